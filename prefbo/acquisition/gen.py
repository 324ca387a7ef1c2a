r"""Candidate generation for ``optimize_acqf`` with the written-out EUBO gradient.

BoTorch's ``optimize_acqf`` hands its restarts to ``gen_candidates_scipy``,
which runs BoTorch's batched L-BFGS-B (each restart its own problem) and, at
every evaluation, converts the point to a tensor, runs the acquisition
function's forward pass, asks autograd for the gradient and converts both
back. For :class:`~prefbo.acquisition.FastAnalyticEUBO` the gradient is
already written out, so :func:`gen_candidates_eubo` runs the *same* L-BFGS-B
— BoTorch's ``fmin_l_bfgs_b_batched``, with the same options, bounds, starts
and result handling — on the value and gradient directly:

- float64 on the CPU: computed in NumPy
  (:meth:`~prefbo.acquisition.FastAnalyticEUBO.numpy_value_and_grad`, the
  same formula on arrays; L-BFGS-B works on arrays anyway, and NumPy's
  per-operation cost is a fraction of torch's at 2-100 designs). The values
  equal the torch path's to rounding (``M = ŴΣŴ - Ŵ`` as one matrix instead
  of two triangular solves), so the question equals BoTorch's to rounding;
- otherwise (float32, CUDA): in torch
  (:meth:`~prefbo.acquisition.FastAnalyticEUBO.value_and_grad`), the very
  numbers the autograd path gives, so the question is BoTorch's to the bit.

Anything else — another acquisition function, a model without the
closed-form gradient, constraints, fixed features, options or a timeout that
take BoTorch off its batched path — goes to ``gen_candidates_scipy``
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from botorch.acquisition import AcquisitionFunction
from botorch.exceptions.errors import OptimizationGradientError
from botorch.generation.gen import gen_candidates_scipy
from botorch.optim.utils import columnwise_clamp
from torch import Tensor

from prefbo.acquisition.eubo import FastAnalyticEUBO

# options BoTorch's gen_candidates_scipy keeps out of the L-BFGS-B call
_NOT_LBFGSB = (
    "method",
    "callback",
    "with_grad",
    "max_optimization_problem_aggregation_size",
)


# BoTorch's batched L-BFGS-B pieces, looked up once; without them (a BoTorch
# that lacks the batched path) everything goes to gen_candidates_scipy
try:
    from botorch.generation.gen import (
        _process_scipy_result,
        get_reasons_against_fast_path,
    )
    from botorch.optim.batched_lbfgs_b import (
        fmin_l_bfgs_b_batched,
        translate_bounds_for_lbfgsb,
    )
except ImportError:  # pragma: no cover - BoTorch 0.18 has them
    fmin_l_bfgs_b_batched = None


def gen_candidates_eubo(
    initial_conditions: Tensor,
    acquisition_function: AcquisitionFunction,
    lower_bounds: float | Tensor | None = None,
    upper_bounds: float | Tensor | None = None,
    options: dict[str, Any] | None = None,
    fixed_features: Mapping[int, float | Tensor] | None = None,
    timeout_sec: float | None = None,
    use_parallel_mode: bool | None = None,
    **constraints: Any,
) -> tuple[Tensor, Tensor]:
    r"""``gen_candidates_scipy`` for :class:`~prefbo.acquisition.FastAnalyticEUBO`,
    evaluating its written-out value and gradient directly.

    Pass it as ``optimize_acqf(..., gen_candidates=gen_candidates_eubo)``. The
    arguments and results are ``gen_candidates_scipy``'s; so are the
    candidates (the same L-BFGS-B iterates, to rounding in float64), in a
    fraction of the time on prefbo's GPs (see the module docstring).

    Example:
        >>> acqf = FastAnalyticEUBO(model)
        >>> X, value = optimize_acqf(
        ...     acqf, bounds, q=2, num_restarts=4, raw_samples=128,
        ...     gen_candidates=gen_candidates_eubo,
        ... )

    Args:
        initial_conditions: ``b x q x d`` (or ``q x d``) starting points.
        acquisition_function: The acquisition function; anything but a
            :class:`~prefbo.acquisition.FastAnalyticEUBO` with
            :attr:`~prefbo.acquisition.FastAnalyticEUBO.closed_form_gradient`
            goes to ``gen_candidates_scipy``.
        lower_bounds: Lower bounds of the candidates' columns.
        upper_bounds: Upper bounds of the candidates' columns.
        options: ``gen_candidates_scipy``'s options (``maxiter``, ``ftol``,
            ``factr``, ``pgtol``, ``maxls``, ``callback``, …).
        fixed_features: Features fixed to values (``gen_candidates_scipy``).
        timeout_sec: Timeout (``gen_candidates_scipy``).
        use_parallel_mode: ``gen_candidates_scipy``'s; ``False`` (its serial
            path) goes there.
        **constraints: Constraints (``inequality_constraints``, …); any given
            goes to ``gen_candidates_scipy``.

    Returns:
        ``(candidates, values)``: the optimised ``initial_conditions``-shaped
        candidates and their ``b`` acquisition values.
    """
    options = dict(options or {})
    minimize_options = _lbfgsb_options(options)
    direct = _takes_the_direct_path(
        initial_conditions,
        acquisition_function,
        options,
        minimize_options,
        fixed_features,
        timeout_sec,
        use_parallel_mode,
        constraints,
    )
    if not direct:  # it needs autograd, also in a caller's torch.no_grad()
        with torch.enable_grad():
            return gen_candidates_scipy(
                initial_conditions,
                acquisition_function,
                lower_bounds=lower_bounds,
                upper_bounds=upper_bounds,
                options=options,
                fixed_features=fixed_features,
                timeout_sec=timeout_sec,
                use_parallel_mode=use_parallel_mode,
                **constraints,
            )
    return _minimize_directly(
        initial_conditions,
        acquisition_function,
        lower_bounds,
        upper_bounds,
        options,
        minimize_options,
    )


def _lbfgsb_options(options: dict[str, Any]) -> dict[str, Any]:
    r"""The options passed on to L-BFGS-B, ``maxiter`` (default 2000) included."""
    minimize_options = {k: v for k, v in options.items() if k not in _NOT_LBFGSB}
    minimize_options["maxiter"] = options.get("maxiter", 2000)
    return minimize_options


def _takes_the_direct_path(
    initial_conditions: Tensor,
    acquisition_function: AcquisitionFunction,
    options: dict[str, Any],
    minimize_options: dict[str, Any],
    fixed_features: Mapping[int, float | Tensor] | None,
    timeout_sec: float | None,
    use_parallel_mode: bool | None,
    constraints: dict[str, Any],
) -> bool:
    r"""Whether the written-out gradient and BoTorch's batched L-BFGS-B serve
    the call: a closed-form EUBO, no fixed features or constraints, and
    nothing that takes BoTorch off its batched path."""
    return bool(
        fmin_l_bfgs_b_batched is not None
        and isinstance(acquisition_function, FastAnalyticEUBO)
        and acquisition_function.closed_form_gradient
        and initial_conditions.ndim in (2, 3)
        and not fixed_features
        and all(c is None for c in constraints.values())
        and use_parallel_mode is not False
        and not get_reasons_against_fast_path(
            method=options.get("method", "L-BFGS-B"),
            with_grad=options.get("with_grad", True),
            minimize_options=minimize_options,
            timeout_sec=timeout_sec,
        )
    )


def _minimize_directly(
    initial_conditions: Tensor,
    acquisition_function: FastAnalyticEUBO,
    lower_bounds: float | Tensor | None,
    upper_bounds: float | Tensor | None,
    options: dict[str, Any],
    minimize_options: dict[str, Any],
) -> tuple[Tensor, Tensor]:
    r"""``gen_candidates_scipy``'s batched L-BFGS-B on the written-out value
    and gradient: clamp the starts, minimise, process the results as BoTorch
    does, clamp the candidates and evaluate them."""
    shape = initial_conditions.shape
    ics = (
        initial_conditions if initial_conditions.ndim == 3 else initial_conditions[None]
    )
    clamped = columnwise_clamp(
        ics, lower=lower_bounds, upper=upper_bounds, raise_on_violation=True
    )
    b, q, d = clamped.shape  # b x q x d
    value_and_grad = _negated_value_and_grad(
        acquisition_function, q, d, clamped.dtype, clamped.device
    )
    x0 = clamped.detach().cpu().double().numpy().reshape(b, -1)  # b x q·d
    # (BoTorch also caps numpy's BLAS threads here, which scans the loaded
    # libraries on every call; L-BFGS-B's products are far too small to be
    # threaded, so the iterates are the same without it)
    xs, _, results = fmin_l_bfgs_b_batched(
        func=value_and_grad,
        x0=x0,
        bounds=translate_bounds_for_lbfgsb(
            lower_bounds=lower_bounds,
            upper_bounds=upper_bounds,
            num_features=d,
            q=q,
        ),
        callback=options.get("callback"),
        pass_batch_indices=True,
        **minimize_options,
    )
    for res in results:
        _process_scipy_result(res=res, options=options)
    candidates = torch.from_numpy(xs).view_as(clamped).to(ics)
    candidates = columnwise_clamp(
        candidates, lower=lower_bounds, upper=upper_bounds, raise_on_violation=True
    ).reshape(shape)
    with torch.no_grad():
        values = acquisition_function(candidates)
    return candidates, values


def _negated_value_and_grad(
    acquisition_function: FastAnalyticEUBO,
    q: int,
    d: int,
    dtype: torch.dtype,
    device: torch.device,
) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    r"""L-BFGS-B's objective: the negative EUBO and its gradient at the
    restarts still running, in NumPy for float64 on the CPU (where L-BFGS-B
    works anyway), else in torch."""
    numpy = acquisition_function.numpy_ready and dtype == torch.float64

    def value_and_grad(x: np.ndarray, batch_indices: list[int] | None = None):
        # minimised: the negative EUBO of the restarts still running (``x`` is
        # ``b' x q·d``), as gen_candidates_scipy's wrapper returns it
        if np.isnan(x).any():
            raise RuntimeError(
                f"{np.isnan(x).sum()} elements of the {x.size} element array `x` "
                "are NaN."
            )
        if numpy:
            values, grad = acquisition_function.numpy_value_and_grad(
                x.reshape(-1, q, d)
            )
            values, g = -values, -grad.reshape(x.shape)
        else:
            X = torch.from_numpy(x).to(device=device, dtype=dtype).view(-1, q, d)
            values, grad = acquisition_function.value_and_grad(X)
            values = values.neg().cpu().numpy()
            g = grad.neg().reshape(x.shape).cpu().double().numpy()
        if np.isnan(g).any():
            raise OptimizationGradientError(
                f"{np.isnan(g).sum()} elements of the {g.size} element gradient "
                "array `gradf` are NaN. This often indicates numerical issues.",
                current_x=x,
            )
        return values, g

    return value_and_grad
