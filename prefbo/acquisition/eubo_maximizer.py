r"""Maximisation of the analytic EUBO over a pair of designs.

:func:`maximize_eubo` maximises exactly what BoTorch's
:class:`~botorch.acquisition.preference.AnalyticExpectedUtilityOfBestOption`
computes (:mod:`prefbo.acquisition.eubo`) without BoTorch's ``optimize_acqf``
(scipy L-BFGS-B over all restarts stacked into one problem), in three batched
steps:

1. **Raw search.** ``raw_samples`` Sobol designs get one joint posterior
   (mean and ``N x N`` covariance), which scores *every* pair of them —
   ``N (N - 1) / 2`` candidates for the price of ``N`` designs (BoTorch
   scores ``raw_samples`` random pairs); above 1024 designs, every pair
   within each block of 1024 (memory grows with the block's square). With a
   previous winner the candidates are the designs themselves.
2. **Starts.** The best ``num_restarts`` candidates, greedily, none within
   a root-mean-square distance of 0.2 box widths per coordinate of another
   (pairs compared in either order): diverse starts, the best candidate
   always among them.
3. **Ascent.** A batched projected Newton ascent of all starts at once in
   the unit box: gradients (written out for the closed-form kernel, else
   autograd) and forward-difference Hessians, all from one batched
   evaluation of each point with its ``D`` neighbours; variables at a bound
   with an outward gradient are held there; the steps of a
   Levenberg–Marquardt path (Newton, then more and more damped towards the
   gradient; absolute eigenvalues, so ascent directions also where EUBO is
   not concave) are evaluated in one batched call and each restart takes
   the best one if it improves. A restart stops once an iteration improves
   it by less than ``ftol`` (relative); Newton converges in a handful of
   iterations where L-BFGS-B needs tens.

The moments come from :func:`~prefbo.acquisition.pair_moments.pair_moments`:
read once from the fitted model for prefbo's GPs, through ``model.posterior``
and autograd for any other model.
"""

from __future__ import annotations

import math

import torch
from botorch.models.model import Model
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.acquisition.eubo import append_winner, check_winner
from prefbo.acquisition.pair_moments import PairMoments, eubo_from_moments, pair_moments
from prefbo.data.validation import check_bounds
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.utils.checks import check_int

# relative Levenberg–Marquardt damping of the steps tried in parallel (0: Newton)
_DAMPING = (0.0, 1e-6, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0)
# starts closer than this (root-mean-square per unit-box coordinate) count as one
_START_RADIUS = 0.2


class _Objective:
    r"""EUBO as a function of unit-box coordinates ``... x (q d)``."""

    def __init__(
        self, moments: PairMoments, bounds: Tensor, winner: Tensor | None
    ) -> None:
        self.moments, self.winner = moments, winner
        self.lo, self.width = bounds[0], bounds[1] - bounds[0]
        self.d = bounds.shape[-1]
        self.q = 1 if winner is not None else 2

    def _pairs(self, U: Tensor) -> Tensor:
        X = self.lo + self.width * U.unflatten(-1, (self.q, self.d))
        return append_winner(X, self.winner)

    def __call__(self, U: Tensor) -> Tensor:
        with torch.no_grad():
            return self.moments.eubo(self._pairs(U), self.winner is None)

    def value_and_grad(self, U: Tensor) -> tuple[Tensor, Tensor]:
        values, grad = self.moments.eubo_and_grad(self._pairs(U), self.winner is None)
        grad = grad[..., : self.q, :] * self.width  # chain rule of X = lo + w U
        return values, grad.flatten(-2)


def _fd_hessian(grad: Tensor, grads: Tensor, h: float) -> Tensor:
    r"""Symmetrised forward-difference Hessians ``R x D x D`` from the
    gradients ``R x D`` at the points and ``R x D x D`` at ``U + h e_i``."""
    hess = (grads - grad.unsqueeze(-2)) / h  # row i: d grad / d u_i
    hess = 0.5 * (hess + hess.transpose(-1, -2))
    return torch.where(torch.isfinite(hess), hess, 0.0)


def _newton_directions(
    U: Tensor, grad: Tensor, hess: Tensor, damping: Tensor
) -> Tensor:
    r"""Damped projected Newton ascent directions in the unit box.

    Variables at a bound whose gradient points outwards are held (zero
    step); on the others ``p(μ) = (|H| + μ s I)⁻¹ g`` with ``|H|`` the
    Hessian with its eigenvalues replaced by their absolute values (an ascent
    direction also where ``f`` is not concave), ``s`` its largest one and
    ``μ`` each entry of ``damping`` (``0``: Newton; large: short gradient
    steps; in between the Levenberg–Marquardt path, which also tames flat
    directions). Each direction moves no coordinate by more than the box's
    width.

    Args:
        U: ``R x D`` points.
        grad: ``R x D`` gradients.
        hess: ``R x D x D`` Hessians.
        damping: ``T`` relative damping factors.

    Returns:
        ``R x T x D`` directions.
    """
    held = ((U <= 0) & (grad < 0)) | ((U >= 1) & (grad > 0))
    free = (~held).to(U)
    A = -hess * (free.unsqueeze(-1) * free.unsqueeze(-2)) + torch.diag_embed(1 - free)
    lam, V = torch.linalg.eigh(A)
    lam = lam.abs()
    top = lam.amax(-1, keepdim=True)  # R x 1
    lam = lam.clamp_min(1e-12 * top + 1e-300)
    coef = (V.transpose(-1, -2) @ (grad * free).unsqueeze(-1)).squeeze(-1)  # R x D
    shift = damping.unsqueeze(-1) * top.unsqueeze(-1)  # R x T x 1
    p = (coef.unsqueeze(-2) / (lam.unsqueeze(-2) + shift)) @ V.transpose(-1, -2)
    p = p * free.unsqueeze(-2)  # R x T x D
    return p / p.abs().amax(-1, keepdim=True).clamp_min(1.0)


def _ascend(
    f: _Objective, U: Tensor, num_steps: int, ftol: float
) -> tuple[Tensor, Tensor]:
    r"""Batched projected Newton ascent of ``f`` over ``[0, 1]^D`` from ``R`` starts.

    Each iteration evaluates, in one batched call with gradients, the steps
    of :func:`_newton_directions` for every damping of ``_DAMPING``
    (projected onto the box) together with the ``D`` finite-difference
    neighbours of the undamped Newton step; each restart keeps its best step
    if it improves (the Newton step unless a damped one gains more than
    twice as much). The Hessians at the new points are those finite
    differences where the Newton step was taken, else one more batched call.

    Args:
        f: The objective on the unit box.
        U: ``R x D`` starts.
        num_steps: Maximum iterations.
        ftol: A restart stops once an iteration improves it by less than
            ``ftol · max(1, |f|)``.

    Returns:
        ``(U, values)``: the ``R x D`` points reached and their ``R`` values.
    """
    R, D = U.shape
    h = 1e-6 if U.dtype == torch.float64 else 1e-3
    damping = U.new_tensor(_DAMPING)  # T
    T = damping.shape[0]
    rows = torch.arange(R, device=U.device)
    stencil = h * torch.eye(D, dtype=U.dtype, device=U.device)

    def newton_info(U: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        points = torch.cat([U.unsqueeze(-2), U.unsqueeze(-2) + stencil], dim=-2)
        v, g = f.value_and_grad(points)
        return v[:, 0], g[:, 0], _fd_hessian(g[:, 0], g[:, 1:], h)

    val, grad, hess = newton_info(U)
    active = torch.isfinite(val) & torch.isfinite(grad).all(-1)
    for _ in range(num_steps):
        if not bool(active.any()):
            break
        g = torch.where(active.unsqueeze(-1), grad, 0.0)
        p = _newton_directions(U, g, hess, damping)  # R x T x D
        trial = (U.unsqueeze(-2) + p).clamp(0, 1)
        points = torch.cat([trial, trial[:, :1] + stencil], dim=-2)  # R x (T+D) x D
        values, grads = f.value_and_grad(points)
        tval = torch.where(torch.isfinite(values[:, :T]), values[:, :T], -math.inf)
        best = tval.argmax(-1)
        # the Newton step, whose Hessian comes free, unless a damped one
        # gains more than twice as much
        full_ok = tval[:, 0] - val >= 0.5 * (tval[rows, best] - val)
        best = torch.where(full_ok, 0, best)
        new_val = tval[rows, best]
        gain = new_val - val
        accept = active & (gain > 0)
        U = torch.where(accept.unsqueeze(-1), trial[rows, best], U)
        val = torch.where(accept, new_val, val)
        grad = torch.where(accept.unsqueeze(-1), grads[rows, best], grad)
        active = accept & (gain > ftol * new_val.abs().clamp_min(1.0))
        full = best == 0
        hess_full = _fd_hessian(grads[:, 0], grads[:, T:], h)
        hess = torch.where((accept & full).view(R, 1, 1), hess_full, hess)
        if bool((active & ~full).any()):
            _, _, hess_new = newton_info(U)
            hess = torch.where((accept & ~full).view(R, 1, 1), hess_new, hess)
    return U, val


def _pool_size(k: int) -> int:
    r"""Best raw candidates among which ``k`` diverse starts are sought."""
    return max(64 * k, 256)


def _pair_candidates(
    moments: PairMoments, X: Tensor, keep: int, chunk: int = 1024
) -> tuple[Tensor, Tensor]:
    r"""The best pairs among ``N x d`` designs, every pair scored.

    Designs are taken in chunks of ``chunk`` (memory grows with its square):
    one joint posterior per chunk scores all its pairs ``i < j``, and the
    best ``keep`` of them are kept.

    Returns:
        ``(index K x 2, values K)``: design indices into ``X`` and EUBO values
        of the kept pairs.
    """
    indices, values = [], []
    for start in range(0, X.shape[0], chunk):
        Xc = X[start : start + chunk]
        c = Xc.shape[0]
        if c < 2:
            continue
        mean, cov = moments.joint(Xc)  # c, c x c
        diag = cov.diagonal()
        i, j = torch.triu_indices(c, c, 1, device=X.device)
        var = diag[i] + diag[j] - 2.0 * cov[i, j]
        val = eubo_from_moments(mean[i] - mean[j], mean[j], var)
        best = val.topk(min(val.shape[0], keep)).indices
        indices.append(torch.stack([i[best], j[best]], dim=-1) + start)
        values.append(val[best])
    return torch.cat(indices), torch.cat(values)


def _diverse_top(U: Tensor, values: Tensor, k: int, q: int, radius: float) -> Tensor:
    r"""The best ``k`` candidates, greedily, none within ``radius`` of another.

    Args:
        U: ``P x (q d)`` candidates in the unit box.
        values: ``P`` values.
        k: Number wanted.
        q: Designs per candidate (distances of pairs take the closer order).
        radius: Root-mean-square distance per coordinate below which two
            candidates count as the same start.

    Returns:
        Indices of ``k`` candidates, best first (filled up with the best
        remaining ones if fewer than ``k`` are far enough apart).
    """
    top = values.topk(min(values.shape[0], _pool_size(k))).indices
    C = U[top]
    D = C.shape[-1]
    dist = torch.cdist(C, C)
    if q == 2:
        d = D // 2
        swapped = torch.cat([C[:, d:], C[:, :d]], dim=-1)
        dist = torch.minimum(dist, torch.cdist(C, swapped))
    close = dist < radius * D**0.5
    blocked = torch.zeros(C.shape[0], dtype=torch.bool, device=U.device)
    chosen: list[int] = []
    for _ in range(k):
        free = (~blocked).nonzero()
        if free.numel() == 0:
            break
        i = int(free[0])
        chosen.append(i)
        blocked |= close[i]
    taken = set(chosen)
    chosen += [i for i in range(C.shape[0]) if i not in taken][: k - len(chosen)]
    return top[torch.tensor(chosen, dtype=torch.long, device=U.device)]


def maximize_eubo(
    model: Model,
    bounds: Tensor,
    *,
    previous_winner: Tensor | None = None,
    raw_samples: int = 128,
    num_restarts: int = 4,
    num_steps: int = 100,
    ftol: float = 1e-9,
    seed: int | None = None,
    return_value: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    r"""The pair (or new design) of largest analytic EUBO.

    Maximises exactly what BoTorch's ``AnalyticExpectedUtilityOfBestOption``
    computes, without ``optimize_acqf`` (see the module docstring): every
    pair of ``raw_samples`` Sobol designs is scored from one joint posterior,
    the best ``num_restarts`` pairs that are not close to one another start a
    batched projected Newton ascent, and the best point reached is returned
    (never worse than the best raw pair).

    Example:
        >>> X = maximize_eubo(model, bounds, seed=0)  # the next question, 2 x d
        >>> x = maximize_eubo(model, bounds, previous_winner=w, seed=0)  # 1 x d

    Args:
        model: A one-output, unbatched preference model (prefbo's
            :class:`~prefbo.models.PairwiseLaplaceGP`,
            :class:`~prefbo.models.PairwiseEPGP`, :class:`~prefbo.models.SkewGP`
            and :class:`~prefbo.models.VariationalPreferenceGP` on the fast
            path of :func:`pair_moments`; any other through its
            ``posterior``, e.g. BoTorch's ``PairwiseGP``).
        bounds: ``2 x d`` box ``[lower, upper]`` (cast to the model's dtype).
        previous_winner: Optional ``d`` or ``1 x d`` design fixed as the other
            option (BoTorch's ``previous_winner``): only one design is chosen,
            and the value leaves out the winner's mean, as BoTorch's does.
        raw_samples: Sobol designs of the raw search: all
            ``raw_samples (raw_samples - 1) / 2`` pairs of them are scored
            (above 1024 designs: the pairs within each block of 1024; with
            ``previous_winner``: the designs themselves).
        num_restarts: Starts of the ascent: the best raw candidates, no two
            close to each other.
        num_steps: Maximum Newton iterations (the role of ``optimize_acqf``'s
            ``maxiter``; a handful are usually enough).
        ftol: A restart stops when an iteration improves its value by less
            than ``ftol · max(1, |value|)``.
        seed: Seed of the Sobol designs; the result is a deterministic
            function of the model, the arguments and ``seed``. ``None`` draws
            one from torch's global generator.
        return_value: Also return the EUBO of the result.

    Returns:
        A ``2 x d`` pair, or the ``1 x d`` new design with ``previous_winner``
        (the question is then ``[previous_winner, design]``); with
        ``return_value=True``, ``(X, value)`` with ``value`` the EUBO of ``X``
        as BoTorch computes it (a scalar tensor).

    Raises:
        InputDataError: Bad ``bounds`` (shape, order, finiteness, number of
            columns), ``previous_winner`` shape, or counts out of range.
        InputTypeError: Non-floating ``bounds``, a non-tensor winner, or a
            count that is not an int.
        UnsupportedError: A model with several outputs or a batch shape.
    """
    check_bounds(bounds)
    if not bounds.is_floating_point():
        raise InputTypeError(f"bounds must be a floating tensor; got {bounds.dtype}.")
    if not bool(torch.isfinite(bounds).all()):
        raise InputDataError(f"bounds must be finite; got {bounds.tolist()}.")
    if getattr(model, "num_outputs", 1) != 1:
        raise UnsupportedError(
            "maximize_eubo needs a one-output preference model; got "
            f"num_outputs={model.num_outputs}."
        )
    if len(getattr(model, "batch_shape", ())) != 0:
        raise UnsupportedError(
            "maximize_eubo needs an unbatched model (one question at a time); "
            f"got batch_shape={tuple(model.batch_shape)}."
        )
    check_int("raw_samples", raw_samples, 1 if previous_winner is not None else 2)
    check_int("num_restarts", num_restarts, 1)
    check_int("num_steps", num_steps, 0)
    # candidates: the raw designs with a previous winner, else their pairs
    num_raw = raw_samples
    if previous_winner is None:
        num_raw = raw_samples * (raw_samples - 1) // 2
    if num_restarts > num_raw:
        raise InputDataError(
            f"num_restarts must be at most the {num_raw} raw candidates of "
            f"raw_samples={raw_samples}; got num_restarts={num_restarts}."
        )
    d = bounds.shape[-1]
    datapoints = getattr(model, "datapoints", None)
    if isinstance(datapoints, Tensor) and datapoints.shape[-1] != d:
        raise InputDataError(
            f"bounds must have one column per model input (d={datapoints.shape[-1]}); "
            f"got shape {tuple(bounds.shape)}."
        )
    if isinstance(datapoints, Tensor):
        bounds = bounds.to(datapoints)
    winner = None
    if previous_winner is not None:
        winner = check_winner(previous_winner, d, bounds)
    q = 1 if winner is not None else 2
    lo, width = bounds[0], bounds[1] - bounds[0]
    moments = pair_moments(model)
    objective = _Objective(moments, bounds, winner)

    if seed is None:
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
    designs = SobolEngine(d, scramble=True, seed=seed).draw(raw_samples).to(bounds)
    with torch.no_grad():
        if winner is None:
            index, raw_val = _pair_candidates(
                moments, lo + width * designs, _pool_size(num_restarts)
            )
            raw = torch.cat([designs[index[:, 0]], designs[index[:, 1]]], dim=-1)
        else:
            raw, raw_val = designs, objective(designs)
        starts = raw[_diverse_top(raw, raw_val, num_restarts, q, _START_RADIUS)]
    # the ascent accepts only improvements: the result is never worse than
    # the best raw candidate (the first start)
    U, val = _ascend(objective, starts, num_steps, ftol)
    i = int(val.argmax())
    value = val[i]
    X = (lo + width * U[i].reshape(q, d)).clamp(bounds[0], bounds[1]).detach()
    return (X, value.detach()) if return_value else X
