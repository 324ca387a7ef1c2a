r"""BoTorch's L-BFGS-B fit, run in log coordinates for positive parameters.

BoTorch's pairwise default kernel keeps its lengthscales in raw form
(``GreaterThan(1e-4, transform=None)``): the optimiser moves the lengthscale
itself, bounded below. L-BFGS-B's first step has unit length in the
coordinates it is given, and its curvature pairs are built in them, so on
a parameter of scale 0.1-1 that has to move by a factor of two or three
the fit spends evaluations overshooting and walking back.
:func:`fit_mll_scipy` runs the same optimiser, with the same defaults and
stopping rule, on ``log(θ - lower)`` for every parameter whose only bound
is a finite lower one (the parameter stays strictly above it by
construction, no bound is needed), and on the raw values of the others.
The model, its parameters and its ``state_dict`` are unchanged: only the
optimiser's coordinates differ (evaluation counts against BoTorch's raw
coordinates: ``benchmarks/results/laplace_vs_botorch.md``).

prefbo's pairwise models route ``botorch.fit.fit_gpytorch_mll`` here through
BoTorch's ``custom_fit`` hook (with BoTorch's retries and rollback kept), so
``fit_gpytorch_mll(mll)`` uses it, together with the box-prior bounds of
:mod:`prefbo.mlls.bounds` (the outputscale pinned at its prior's edge instead
of L-BFGS-B crawling along the prior's wall, where its line search can also
fail outright); an ``optimizer=`` passed to ``fit_gpytorch_mll`` replaces
both. An evaluation that fails numerically during the fit (extreme
hyperparameters tried by the line search) makes the line search back off
(:func:`backing_off`) instead of ending the fit.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch
from botorch.exceptions.errors import ModelFittingError
from botorch.optim.closures import get_loss_closure_with_grads
from botorch.optim.core import OptimizationResult
from botorch.optim.fit import fit_gpytorch_mll_scipy
from botorch.optim.utils import get_parameters_and_bounds
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor

from prefbo.exceptions import InputTypeError, NumericalError
from prefbo.mlls.bounds import box_prior_bounds

Bound = float | Tensor | None


def _log_shift(param: Tensor, bound: tuple[Bound, Bound]) -> Tensor | None:
    r"""The lower bound to measure ``param`` from in log coordinates, or
    ``None`` where it keeps raw coordinates (no finite lower bound, a finite
    upper one, or a value not strictly above the lower bound)."""
    lower, upper = bound
    if lower is None or not param.dtype.is_floating_point:
        return None
    lower = torch.as_tensor(lower, dtype=param.dtype, device=param.device)
    if upper is not None and bool(torch.isfinite(torch.as_tensor(upper)).any()):
        return None
    if not bool(torch.isfinite(lower).all()):
        return None
    lower = lower.expand(param.shape)
    if not bool((param.detach() > lower).all()):
        return None
    return lower


def _log_coordinate_closure(
    closure: Callable[..., tuple[Tensor, Sequence[Tensor | None]]],
    parameters: dict[str, Tensor],
    coords: dict[str, Tensor],
    shifts: dict[str, Tensor],
) -> tuple[Callable[..., tuple[Tensor, list[Tensor | None]]], Callable[[], None]]:
    r"""The loss closure in the optimiser's coordinates ``coords`` (``log(θ -
    a)`` for the names in ``shifts``, ``θ`` itself otherwise), and the
    function that writes ``coords`` back into ``parameters``."""

    def write_back() -> None:
        with torch.no_grad():
            for name, shift in shifts.items():
                parameters[name].copy_(coords[name].exp() + shift)

    def log_closure(**kwargs: Any) -> tuple[Tensor, list[Tensor | None]]:
        write_back()
        value, grads = closure(**kwargs)
        out: list[Tensor | None] = []
        for (name, param), grad in zip(parameters.items(), grads, strict=True):
            if grad is not None and name in shifts:  # dθ/dlog(θ - a) = θ - a
                grad = grad * (param.detach() - shifts[name])
            out.append(grad)
        return value, out

    return log_closure, write_back


def backing_off(
    closure: Callable[..., tuple[Tensor, Sequence[Tensor | None]]],
    parameters: dict[str, Tensor],
) -> Callable[..., tuple[Tensor, list[Tensor | None]]]:
    r"""``closure`` with a failed evaluation turned into a step to back off from.

    L-BFGS-B's line search can try extreme hyperparameters (a lengthscale
    near 0, an outputscale of ``1e30``) where the prior covariance or the
    approximation is not finite or cannot be factorised. Such an evaluation
    (a :class:`~prefbo.exceptions.NumericalError` or ``torch.linalg`` error,
    or a non-finite loss or gradient) returns a loss above every finite one
    seen so far, ``f_max + 1 + |f_max|``, with a zero gradient: the line
    search (Moré & Thuente 1994) then brackets the step and shortens it,
    and the fit goes on from the last accepted point. (An infinite loss
    would end L-BFGS-B's run, a NaN one makes it lengthen the step.) An
    evaluation that fails before any finite one has no point to back off
    to and raises (a non-finite first loss goes to BoTorch as it is).

    Args:
        closure: Forward-backward closure returning the loss and the
            gradients of ``parameters`` (in their order).
        parameters: The parameters the closure differentiates.

    Returns:
        The guarded closure.
    """
    seen: list[float] = []

    def guarded(**kwargs: Any) -> tuple[Tensor, list[Tensor | None]]:
        error: Exception | None = None
        try:
            value, grads = closure(**kwargs)
            grads = list(grads)
            finite = bool(torch.isfinite(value.detach()).all()) and all(
                g is None or bool(torch.isfinite(g).all()) for g in grads
            )
        except (NumericalError, torch.linalg.LinAlgError) as err:
            error, finite = err, False
        if finite:
            seen.append(float(value.detach().sum()))
            if len(seen) > 1:
                seen[:] = [max(seen)]
            return value, grads
        if not seen:
            if error is not None:
                raise error
            return value, grads  # BoTorch's own handling of a bad start
        worst = seen[0]
        penalty = torch.tensor(worst + 1.0 + abs(worst), dtype=torch.float64)
        return penalty, [torch.zeros_like(p) for p in parameters.values()]

    return guarded


def fit_mll_scipy(
    mll: MarginalLogLikelihood,
    parameters: dict[str, Tensor] | None = None,
    bounds: dict[str, tuple[Bound, Bound]] | None = None,
    closure: Callable[[], tuple[Tensor, Sequence[Tensor | None]]] | None = None,
    closure_kwargs: dict[str, Any] | None = None,
    method: str = "L-BFGS-B",
    options: dict[str, Any] | None = None,
    callback: Callable[[dict[str, Tensor], OptimizationResult], None] | None = None,
    timeout_sec: float | None = None,
) -> OptimizationResult:
    r"""``botorch.optim.fit.fit_gpytorch_mll_scipy`` in log coordinates for
    parameters bounded below only.

    Same arguments and result as BoTorch's routine (``mll`` in train mode;
    ``bounds`` update the constraints' bounds on raw parameters, by name).
    A parameter whose merged bounds are a finite lower bound ``a`` and no
    upper one, with every entry above ``a``, is optimised as
    ``log(θ - a)``; the others, including every parameter given an upper
    bound, as BoTorch does. ``callback`` receives the model's parameters.

    Args:
        mll: The marginal log likelihood to maximise.
        parameters: Parameters to optimise (default: all that require grad).
        bounds: Bounds on raw parameters, updating the constraints' ones.
        closure: Forward-backward closure (default: BoTorch's loss closure).
        closure_kwargs: Keyword arguments for ``closure``.
        method: ``scipy.optimize.minimize`` method.
        options: Its options.
        callback: Called as ``callback(parameters, result)`` after each step.
        timeout_sec: Stop after this many seconds.

    Returns:
        BoTorch's ``OptimizationResult`` (``fval``: the negative MLL).

    A model whose parameters are of lower precision than float64 (float32,
    float16, bfloat16) is fitted on a float64 copy and its parameters are
    then set to the copy's (rounded to their own dtype), unless
    ``parameters`` or ``closure`` are given (they belong to the model
    itself). In float32 the evidence changes by less than its own rounding
    long before its maximum on flat surfaces, and L-BFGS-B then stops as
    converged ("relative reduction of f"); ``callback`` then receives the
    copy's parameters.
    """
    if not isinstance(mll, MarginalLogLikelihood):
        raise InputTypeError(
            f"mll must be a gpytorch MarginalLogLikelihood; got {type(mll).__name__}."
        )
    if parameters is None and closure is None and _below_float64(mll):
        twin = copy.deepcopy(mll).double()
        result = fit_mll_scipy(
            twin,
            bounds=bounds,
            closure_kwargs=closure_kwargs,
            method=method,
            options=options,
            callback=callback,
            timeout_sec=timeout_sec,
        )
        fitted = dict(twin.named_parameters())
        with torch.no_grad():
            for name, param in mll.named_parameters():
                param.copy_(fitted[name].to(param.dtype))
        return result
    _parameters, _bounds = get_parameters_and_bounds(mll)
    bounds = _bounds if bounds is None else {**_bounds, **bounds}
    if parameters is None:
        parameters = {n: p for n, p in _parameters.items() if p.requires_grad}
    if closure is None:
        closure = get_loss_closure_with_grads(mll, parameters=parameters)
    if closure_kwargs is not None:
        closure = partial(closure, **closure_kwargs)
    closure = backing_off(closure, parameters)

    shifts: dict[str, Tensor] = {}
    for name, param in parameters.items():
        shift = _log_shift(param, bounds.get(name, (None, None)))
        if shift is not None:
            shifts[name] = shift
    coords = {  # what the optimiser moves: log(θ - a), or θ itself
        name: (param.detach() - shifts[name]).log() if name in shifts else param
        for name, param in parameters.items()
    }
    log_closure, write_back = _log_coordinate_closure(
        closure, parameters, coords, shifts
    )

    wrapped_callback = None
    if callback is not None:

        def wrapped_callback(_: dict[str, Tensor], result: OptimizationResult) -> None:
            write_back()
            callback(parameters, result)

    # BoTorch's routine on the coordinates: log ones are unbounded
    result = fit_gpytorch_mll_scipy(
        mll,
        parameters=coords,
        bounds={**bounds, **dict.fromkeys(shifts, (None, None))},
        closure=log_closure,
        method=method,
        options=options,
        callback=wrapped_callback,
        timeout_sec=timeout_sec,
    )
    write_back()  # the optimiser's final point, not its last evaluation
    return result


def _below_float64(mll: MarginalLogLikelihood) -> bool:
    r"""Whether a trained floating parameter of ``mll`` is of lower
    precision than float64."""
    return any(
        p.requires_grad and p.is_floating_point() and torch.finfo(p.dtype).bits < 64
        for p in mll.parameters()
    )


def custom_fit(
    mll: MarginalLogLikelihood,
    *,
    closure: Callable[[], tuple[Tensor, Sequence[Tensor | None]]] | None = None,
    closure_kwargs: dict[str, Any] | None = None,
    optimizer_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> MarginalLogLikelihood:
    r"""BoTorch's ``fit_gpytorch_mll`` fallback (retries from prior samples,
    rollback, warning policy) with :func:`fit_mll_scipy` as the default
    optimiser, and with it the box-prior bounds of
    :func:`prefbo.fit.box_prior_bounds` (bounds in ``optimizer_kwargs``
    take precedence, name by name). A given ``optimizer`` runs as given.
    Where every attempt fails, BoTorch's ``ModelFittingError`` gets a note
    with where the last attempt ended (a prior-free period run to ``1e-13``,
    say: the evidence is not smooth there, BoTorch's ``PairwiseGP`` fails
    on it too)."""
    from botorch.fit import _fit_fallback

    if kwargs.get("optimizer") is None:
        kwargs["optimizer"] = fit_mll_scipy
        optimizer_kwargs = dict(optimizer_kwargs or {})
        optimizer_kwargs["bounds"] = {
            **box_prior_bounds(mll),
            **(optimizer_kwargs.get("bounds") or {}),
        }
    positional = [
        p
        for p in inspect.signature(_fit_fallback).parameters.values()
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]
    args: tuple = (mll,)
    if len(positional) == 3:  # releases whose fallback also takes the types
        args = (mll, type(mll.likelihood), type(mll.model))
    optimizer, ends = kwargs["optimizer"], []  # (message, hyperparameters)

    def recording(mll: MarginalLogLikelihood, **okw: Any) -> Any:
        result = optimizer(mll, **okw)
        ends.append((getattr(result, "message", None), _hyperparameters(mll)))
        return result

    try:
        return _fit_fallback(
            *args,
            closure=closure,
            closure_kwargs=closure_kwargs,
            optimizer_kwargs=optimizer_kwargs,
            **{**kwargs, "optimizer": recording},
        )
    except ModelFittingError as err:
        if ends:
            message, values = ends[-1]
            err.add_note(
                f"prefbo: the last of {len(ends)} attempts ended "
                + (f"({str(message).strip()}) " if message else "")
                + f"at {values}. A hyperparameter without a prior run to an "
                "extreme (a period or lengthscale towards 0, where the kernel "
                "varies faster than the designs are apart and the evidence is "
                "not smooth, or towards infinity, where it is flat) stops "
                "L-BFGS-B's line search at every attempt: give it a prior, or "
                "bounds on its raw parameter (optimizer_kwargs={'bounds': "
                "{'model.<...>.raw_<name>': (lower, upper)}})."
            )
        raise


def _hyperparameters(mll: MarginalLogLikelihood) -> str:
    r"""The trained hyperparameters of ``mll``, by name, constrained."""
    parts = []
    for name, raw, constraint in mll.named_parameters_and_constraints():
        if not raw.requires_grad:
            continue
        with torch.no_grad():
            value = raw if constraint is None else constraint.transform(raw)
        flat = [f"{v:.3g}" for v in value.detach().flatten().tolist()]
        shown = ", ".join(flat[:4]) + (", ..." if len(flat) > 4 else "")
        parts.append(f"{name.replace('raw_', '')} = {shown}")
    return "; ".join(parts)
