r"""Hard optimiser bounds at the edges of box priors.

GPyTorch's ``SmoothedBoxPrior(a, b, sigma=0.01)`` is flat on ``[a, b]`` with
Gaussian tails of standard deviation ``sigma`` outside. BoTorch's pairwise
default puts one on the outputscale (``a, b = 0.01, 100``). With nearly
separable answers the exact Laplace or EP evidence keeps rising with the
outputscale, so the fit's optimum lies a hair outside ``b``, against a wall
of curvature ``1/sigma²``. L-BFGS-B then crawls along the wall for tens of
evaluations. :func:`box_prior_bounds` gives ``fit_gpytorch_mll`` bounds on the
raw parameters at ``[a, b]``, where L-BFGS-B's projection pins such a
parameter at once. The optimum then moves from ``b + sigma² · slope`` to
``b``; nothing changes where it lies inside the box.
"""

from __future__ import annotations

import torch
from gpytorch.mlls import MarginalLogLikelihood
from gpytorch.priors import SmoothedBoxPrior
from torch import Tensor

from prefbo.exceptions import InputTypeError


def box_prior_bounds(
    mll: MarginalLogLikelihood,
) -> dict[str, tuple[Tensor | None, Tensor | None]]:
    r"""Bounds on raw parameters at the edges of their ``SmoothedBoxPrior``.

    A prior registered as ``<name>_prior`` on a module whose parameter
    ``raw_<name>`` maps to it through the module's constraint (as GPyTorch's
    ``ScaleKernel`` outputscale does) gets the bounds ``[a, b]`` mapped to the
    raw scale by the constraint's inverse transform. An edge at or beyond the
    constraint's own bound is left to the constraint (``None``).

    Args:
        mll: The marginal log likelihood to be fitted.

    Returns:
        ``{parameter name: (lower, upper)}`` in the form
        ``fit_gpytorch_mll(mll, optimizer_kwargs={"bounds": ...})`` takes
        (names as in ``mll.named_parameters()``); empty without box priors.

    Example:
        >>> mll = PairwiseEPMLL(model.likelihood, model)
        >>> fit_gpytorch_mll(mll, optimizer_kwargs={"bounds": box_prior_bounds(mll)})
    """
    if not isinstance(mll, MarginalLogLikelihood):
        raise InputTypeError(
            f"mll must be a gpytorch MarginalLogLikelihood; got {type(mll).__name__}."
        )
    out: dict[str, tuple[Tensor | None, Tensor | None]] = {}
    for name, module, prior, _, _ in mll.named_priors():
        if not isinstance(prior, SmoothedBoxPrior) or not name.endswith("_prior"):
            continue
        prefix, _, attr = name[: -len("_prior")].rpartition(".")
        raw_name = f"raw_{attr}"
        raw = getattr(module, raw_name, None)
        if not isinstance(raw, torch.nn.Parameter):
            continue
        constraint = module.constraint_for_parameter_name(raw_name)
        edges = []
        for edge, limit, outside in (
            (prior.a, getattr(constraint, "lower_bound", None), torch.le),
            (prior.b, getattr(constraint, "upper_bound", None), torch.ge),
        ):
            edge = edge.to(raw)
            edge = (edge.reshape(()) if edge.numel() == 1 else edge).expand(raw.shape)
            if limit is not None and bool(outside(edge, limit.to(raw)).any()):
                edges.append(None)
                continue
            if constraint is not None:
                edge = constraint.inverse_transform(edge)
            edges.append(edge.detach().reshape(-1))
        full = f"{prefix}.{raw_name}" if prefix else raw_name
        out[full] = (edges[0], edges[1])
    return out
