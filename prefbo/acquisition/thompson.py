r"""Large-batch Thompson sampling with decoupled sample paths (Wilson et al., 2020).

``thompson_batch`` draws ``B`` pathwise posterior samples (Matheron's rule:
a random-Fourier-feature prior draw plus a pathwise update), maximises all of
them at once by a batched multi-start gradient ascent, and returns the ``B``
maximisers. ``thompson_pairs`` turns them into the next ``B`` questions for a
preference model: each sample's maximiser against the current best design.
"""

from __future__ import annotations

import torch
from botorch.models.model import Model
from botorch.sampling.pathwise import draw_matheron_paths
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.data.validation import check_bounds
from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.models.pairwise import PairwisePreferenceGP
from prefbo.models.skew import SkewGP
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.sampling.pathwise import draw_pairwise_paths, draw_variational_paths


def thompson_batch(
    model: Model,
    bounds: Tensor,
    batch_size: int,
    *,
    raw_samples: int = 1024,
    num_restarts: int = 8,
    num_steps: int = 100,
    lr: float = 0.02,
    num_features: int = 1024,
    seed: int | None = None,
) -> Tensor:
    r"""Maximisers of ``batch_size`` independent posterior sample paths.

    Args:
        model: A model ``draw_matheron_paths`` supports (prefbo's pairwise and
            variational preference models, BoTorch's exact and variational
            GPs); one output, no batch shape.
        bounds: ``2 x d`` box ``[lower, upper]``.
        batch_size: ``B``, the number of paths and of returned designs.
        raw_samples: Sobol points on which every path is first evaluated.
        num_restarts: Best raw points per path refined by gradient ascent.
        num_steps: Adam steps of the refinement (all paths and starts at once).
        lr: Step size. The ascent runs Adam with learning rate ``50·lr`` on
            the logits of the design's position in the box, so one step moves
            a design by at most ``12.5·lr`` box widths (that much at the
            box's centre, less towards its faces).
        num_features: Random Fourier features of the prior draws (prefbo
            models; BoTorch's own models use their default).
        seed: Seed for the raw points.

    Returns:
        A ``B x d`` tensor of designs, one maximiser per path.

    Raises:
        InputDataError: ``bounds`` not a ``2 x d`` box of the model's ``d``.
        UnsupportedError: A model without sample paths (:class:`SkewGP`: use
            a :class:`~prefbo.models.PairwiseEPGP`), or with several outputs.
    """
    check_bounds(bounds)
    if getattr(model, "num_outputs", 1) != 1:
        raise UnsupportedError(
            "thompson_batch maximises one utility; got a model with "
            f"num_outputs={model.num_outputs}."
        )
    if isinstance(model, SkewGP):
        raise UnsupportedError(
            "thompson_batch needs continuous sample paths, which SkewGP (posterior "
            "draws at given points) does not provide. Use a PairwiseEPGP on the "
            "same data and kernel (the approximation SkewGP.fit_hyperparameters "
            "fits), or an acquisition on SkewGP's posterior such as qEUBO."
        )
    _check_bounds_dim(model, bounds)
    shape = torch.Size([batch_size])
    # draw the paths' weights without a graph back to the model's parameters,
    # or every ascent step after the first would backward through it again
    with torch.no_grad():
        if isinstance(model, PairwisePreferenceGP):
            paths = draw_pairwise_paths(model, shape, num_features=num_features)
        elif isinstance(model, VariationalPreferenceGP):
            paths = draw_variational_paths(model, shape, num_features=num_features)
        else:
            try:
                paths = draw_matheron_paths(model, sample_shape=shape)
            except NotImplementedError as err:
                raise UnsupportedError(
                    f"thompson_batch cannot draw sample paths of a "
                    f"{type(model).__name__} (BoTorch's draw_matheron_paths: "
                    f"{err}). Use one of prefbo's pairwise or variational "
                    "preference models, or a BoTorch exact or variational GP."
                ) from err
    return _maximize_paths(
        paths, bounds, batch_size, raw_samples, num_restarts, num_steps, lr, seed
    )


def _check_bounds_dim(model: Model, bounds: Tensor) -> None:
    r"""``bounds``' ``d`` against the model's, where the model says it (prefbo's
    models hold their raw ``datapoints``; BoTorch's models without an input
    transform their ``train_inputs``)."""
    X = getattr(model, "datapoints", None)
    if not isinstance(X, Tensor) and getattr(model, "input_transform", None) is None:
        inputs = getattr(model, "train_inputs", None)
        X = inputs[0] if isinstance(inputs, tuple) and inputs else None
    if isinstance(X, Tensor) and X.ndim >= 2 and X.shape[-1] != bounds.shape[-1]:
        raise InputDataError(
            f"bounds must be a 2 x d box with the model's d={X.shape[-1]} "
            f"features; got bounds of shape {tuple(bounds.shape)}."
        )


def maximize_paths(
    paths,
    bounds: Tensor,
    batch_size: int,
    *,
    raw_samples: int = 1024,
    num_restarts: int = 8,
    num_steps: int = 100,
    lr: float = 0.02,
    seed: int | None = None,
) -> Tensor:
    r"""Maximise ``batch_size`` sample paths at once.

    Every path is evaluated on the same Sobol points, its best
    ``num_restarts`` start a batched Adam ascent (all paths and starts in one
    tensor, in logit coordinates of the box), and the best point per path is
    kept (never worse than its best raw point).

    Args:
        paths: A callable mapping ``B x r x d`` (or ``r x d``) to ``B x r``
            values, path ``b`` evaluated on row ``b`` (BoTorch sample paths
            with ``sample_shape = (B,)`` do this).
        bounds: ``2 x d`` box.
        batch_size: ``B``.
        raw_samples: Sobol points per path.
        num_restarts: Starts refined per path.
        num_steps: Adam steps.
        lr: Step size: Adam's learning rate on the logits of the position
            in the box is ``50·lr``, so one step moves a design by at most
            ``12.5·lr`` box widths (at the box's centre; less towards its
            faces).
        seed: Seed of the Sobol points.

    Returns:
        ``B x d`` maximisers.
    """
    check_bounds(bounds)
    return _maximize_paths(
        paths, bounds, batch_size, raw_samples, num_restarts, num_steps, lr, seed
    )


def _maximize_paths(
    paths,
    bounds: Tensor,
    batch_size: int,
    raw_samples: int,
    num_restarts: int,
    num_steps: int,
    lr: float,
    seed: int | None,
) -> Tensor:
    r""":func:`maximize_paths` on checked ``bounds``."""
    if batch_size < 1 or num_restarts < 1 or raw_samples < num_restarts:
        raise InputDataError(
            "need batch_size >= 1 and 1 <= num_restarts <= raw_samples; got "
            f"{batch_size=}, {num_restarts=}, {raw_samples=}."
        )
    d = bounds.shape[-1]
    lo, width = bounds[0], bounds[1] - bounds[0]
    sobol = SobolEngine(d, scramble=True, seed=seed).draw(raw_samples)
    sobol = sobol.to(bounds, non_blocking=True)  # a fresh host tensor
    raw = lo + width * sobol  # r x d
    with torch.no_grad():
        values = paths(raw)  # B x r
    top = values.topk(num_restarts, dim=-1).indices  # B x R
    u = ((raw[top] - lo) / width).clamp(1e-6, 1 - 1e-6)  # B x R x d in the unit box
    z = torch.logit(u).detach().requires_grad_(True)
    opt = torch.optim.Adam([z], lr=lr * 50)
    for _ in range(num_steps):
        opt.zero_grad()
        loss = -paths(lo + width * torch.sigmoid(z)).sum()  # B x R values
        loss.backward()
        opt.step()
    with torch.no_grad():
        X = lo + width * torch.sigmoid(z)
        rows = torch.arange(batch_size, device=X.device)
        X_opt = X[rows, paths(X).argmax(dim=-1)]
        X_raw_best = raw[values.argmax(dim=-1)]
    keep = _eval_own(paths, X_opt) >= _eval_own(paths, X_raw_best)
    return torch.where(keep.unsqueeze(-1), X_opt, X_raw_best)


def _eval_own(paths, X: Tensor) -> Tensor:
    r"""Path ``b`` at its own point ``X[b]``: ``B x d`` -> ``B``."""
    with torch.no_grad():
        return paths(X.unsqueeze(-2)).squeeze(-1)


def thompson_pairs(model: Model, bounds: Tensor, batch_size: int, **kwargs) -> Tensor:
    r"""The next ``batch_size`` questions for a pairwise preference model.

    Each question pairs one Thompson sample's maximiser with the current best
    design (the training design with the highest posterior mean).

    Args:
        model: A prefbo pairwise preference model with data.
        bounds: ``2 x d`` box.
        batch_size: Number of questions.
        **kwargs: Passed to :func:`thompson_batch`.

    Returns:
        A ``batch_size x 2 x d`` tensor of pairs ``[candidate, current best]``.
    """
    cand = thompson_batch(model, bounds, batch_size, **kwargs)
    with torch.no_grad():
        designs = model.datapoints
        mean = model.posterior(designs.unsqueeze(-2)).mean.reshape(-1)
        best = designs[mean.argmax()]
    return torch.stack([cand, best.expand_as(cand)], dim=-2)
