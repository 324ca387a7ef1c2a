r"""Batched Laplace approximation for pairwise preference GPs (SPEC §3).

Newton's method is run on the whitened utilities ``v`` with ``f = L v`` and
``K = L Lᵀ``, maximising ``Ψ(v) = log p(D | L v) - ½ |v|²``. Its negative
Hessian is the symmetric

    A = I + Lᵀ W L,      W = Dᵀ diag(ω) D  (the weighted comparison Laplacian),

whose eigenvalues are all ``≥ 1``: its Cholesky factor always exists and is
well conditioned, ``W`` (singular: ``W·1 = 0``) is never inverted and ``K`` is
never inverted either. Steps are damped by a vectorised line search (the
largest of ``1, ½, ¼, …`` that does not decrease ``Ψ``), batch elements are
independent problems solved by tensor ops, and there is no host round trip
inside an iteration except the convergence test (every ``sync_every`` steps).

At the mode ``f̂`` the state caches ``L``, the factor ``C`` of ``A`` and
``α = K⁻¹ f̂ = L⁻ᵀ v̂``; the predictive mean at ``x*`` is ``k*ᵀ α`` and the
covariance ``k** - uᵀu + wᵀw`` with ``u = L⁻¹ k*`` and ``w = (L C)⁻¹ k*``.

The evidence ``log p(D|f̂) - ½ f̂ᵀK⁻¹f̂ - ½ log|I + K Ŵ|`` is differentiable in
``K`` through :class:`LaplaceEvidence`, whose backward is the analytic gradient
including the dependence of ``f̂`` on ``K`` (implicit function theorem).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

from prefbo.exceptions import ConvergenceWarning, NumericalError
from prefbo.inference.cholesky import cholesky_solve, jittered_cholesky
from prefbo.likelihoods.pairwise import PairwiseLikelihood


@dataclass(eq=False)
class GaussianApproximation:
    r"""A Gaussian approximation ``N(f̂, (K⁻¹ + Ŵ)⁻¹)`` of the utilities'
    posterior at the designs, for a batch of problems: the Laplace
    approximation at the mode, or EP's approximation with ``f̂`` its mean and
    ``Ŵ`` built from its sites.

    Attributes:
        mode: ``batch_shape x n`` mode ``f̂`` of the utilities at the designs.
        chol_prior: ``batch_shape x n x n`` lower factor ``L`` of ``K``.
        alpha: ``batch_shape x n`` vector ``K⁻¹ f̂``.
        curvature: ``batch_shape x m`` weights ``ω`` with ``Ŵ = Dᵀ diag(ω) D``.
        comparisons: ``batch_shape x m x 2`` the comparisons.
        log_likelihood: ``batch_shape`` value of ``log p(D | f̂)``.
        evidence: ``batch_shape`` Laplace log evidence.
        converged: ``batch_shape`` bool, whether Newton met its tolerance.
        iterations: Newton iterations taken.
        form: ``"whitened"`` or ``"precision"``, the form Newton ran in.
    """

    mode: Tensor
    chol_prior: Tensor
    alpha: Tensor
    curvature: Tensor
    comparisons: Tensor
    log_likelihood: Tensor
    evidence: Tensor
    converged: Tensor
    iterations: int
    form: str
    _chol_post: Tensor | None = None
    _post_cov: Tensor | None = None
    _pred_factors: Tensor | None = None
    _mode_derivatives: tuple[Tensor, Tensor] | None = None

    def laplacian(self) -> Tensor:
        r"""``batch_shape x n x n`` curvature ``Ŵ`` at the mode."""
        return comparison_laplacian(
            self.curvature, self.comparisons, self.mode.shape[-1]
        )

    @property
    def chol_post(self) -> Tensor:
        r"""``batch_shape x n x n`` lower factor ``C`` of ``A = I + Lᵀ Ŵ L``."""
        if self._chol_post is None:
            L = self.chol_prior
            A = L.transpose(-1, -2) @ laplacian_matmul(
                self.curvature, self.comparisons, L
            )
            A.diagonal(dim1=-2, dim2=-1).add_(1.0)
            self._chol_post, _ = torch.linalg.cholesky_ex(A)
        return self._chol_post

    def predictive_factors(self) -> Tensor:
        r"""``batch_shape x 2 x n x n`` stack of ``L`` and ``L C`` (cached)."""
        if self._pred_factors is None:
            self._pred_factors = torch.stack(
                [self.chol_prior, self.chol_prior @ self.chol_post], dim=-3
            )
        return self._pred_factors

    def covariance_root(self) -> Tensor:
        r"""``batch_shape x n x n`` factor ``F = L C⁻ᵀ`` of the posterior
        covariance ``(K⁻¹ + Ŵ)⁻¹ = F Fᵀ`` at the designs."""
        return torch.linalg.solve_triangular(
            self.chol_post, self.chol_prior.transpose(-1, -2), upper=False
        ).transpose(-1, -2)

    def posterior_covariance(self) -> Tensor:
        r"""``batch_shape x n x n`` Laplace covariance ``Σ = (K⁻¹ + Ŵ)⁻¹``."""
        if self._post_cov is None:
            F = self.covariance_root()
            self._post_cov = F @ F.transpose(-1, -2)
        return self._post_cov


def scatter_pairs(values: Tensor, comparisons: Tensor, n: int) -> Tensor:
    r"""``Dᵀ values``: add each comparison's value at its winner, subtract it
    at its loser.

    Args:
        values: ``batch_shape x m`` per-comparison values.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        n: number of designs.

    Returns:
        ``batch_shape x n``.
    """
    out = values.new_zeros(values.shape[:-1] + (n,))
    out.scatter_add_(-1, comparisons[..., 0], values)
    out.scatter_add_(-1, comparisons[..., 1], -values)
    return out


def _pair_diff(f: Tensor, comparisons: Tensor) -> Tensor:
    r"""``D f``: ``f_w - f_l`` per comparison (``batch_shape x m``)."""
    return f.gather(-1, comparisons[..., 0]) - f.gather(-1, comparisons[..., 1])


def comparison_laplacian(
    weights: Tensor, comparisons: Tensor, n: int, base: Tensor | None = None
) -> Tensor:
    r"""Dense weighted comparison Laplacian ``W = Dᵀ diag(weights) D``.

    Args:
        weights: ``batch_shape x m`` non-negative weights.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        n: number of designs.
        base: Optional ``batch_shape x n x n`` matrix to add ``W`` to (a new
            tensor is returned; ``base`` is not modified).

    Returns:
        ``batch_shape x n x n`` symmetric PSD matrix with ``W·1 = 0`` (plus
        ``base``).
    """
    return _scatter_laplacian(weights, _laplacian_index(comparisons, n), n, base)


def _laplacian_index(comparisons: Tensor, n: int) -> Tensor:
    r"""Flat ``n x n`` positions of ``W``'s four entries per comparison
    (``ww, ll, wl, lw``), for :func:`_scatter_laplacian` (cached per
    comparisons tensor, see :func:`_cached_for`)."""

    def build() -> Tensor:
        w, l = comparisons[..., 0], comparisons[..., 1]
        return torch.cat([w * n + w, l * n + l, w * n + l, l * n + w], dim=-1)

    return _cached_for(comparisons, ("index", n), build)


def _scatter_laplacian(
    weights: Tensor, index: Tensor, n: int, base: Tensor | None = None
) -> Tensor:
    r"""``base + Dᵀ diag(weights) D`` (or ``W`` alone) with precomputed
    positions ``index``."""
    batch = weights.shape[:-1]
    if base is None:
        out = weights.new_zeros(batch + (n * n,))
    else:
        out = base.expand(batch + (n, n)).reshape(batch + (n * n,)).clone()
    _scatter_laplacian_(out, weights, index)
    return out.view(batch + (n, n))


def _scatter_laplacian_(flat: Tensor, weights: Tensor, index: Tensor) -> None:
    r"""Add ``Dᵀ diag(weights) D`` in place to ``flat`` (``batch x n²``)."""
    flat.scatter_add_(-1, index, torch.cat([weights, weights, -weights, -weights], -1))


def _cholesky_plus_laplacian(
    Kinv: Tensor, weights: Tensor, index: Tensor
) -> tuple[Tensor, Tensor]:
    r"""``cholesky_ex(K⁻¹ + W)`` for ``W = Dᵀ diag(weights) D`` without an n²
    copy: ``W``'s ``4m`` entries (positions ``index``, see
    :func:`_laplacian_index`) are added to ``Kinv`` in place, the sum is
    factorised into a new tensor, and the entries are restored exactly.

    Args:
        Kinv: ``batch x n x n`` (row-major; copied once otherwise).
        weights: ``batch x m``.
        index: ``batch x 4m``.

    Returns:
        The lower factor and ``info`` of :func:`torch.linalg.cholesky_ex`.
    """
    Kinv = Kinv.contiguous()
    flat = Kinv.view(Kinv.shape[:-2] + (-1,))
    saved = flat.gather(-1, index)
    _scatter_laplacian_(flat, weights, index)
    try:
        return torch.linalg.cholesky_ex(Kinv)
    finally:
        flat.scatter_(-1, index, saved)


def _row_major(S: Tensor) -> Tensor:
    r"""A symmetric matrix as a row-major view: LAPACK-backed results
    (``cholesky_inverse``) come column-major, and every flattening or
    ``reshape(...).clone()`` of those is a transposing copy (4.5 ms at
    ``n = 800``); ``Sᵀ`` holds the same values in row-major order for free."""
    return S.mT if not S.is_contiguous() and S.mT.is_contiguous() else S


def _default_tol(dtype: torch.dtype) -> float:
    return 1e-9 if dtype == torch.float64 else 1e-4


DENSE_BELOW = 128  # laplacian_matmul: dense W below, sparse CSR from here on
_REFINE_STEPS = 4  # precision form: iterative-refinement steps at most


@dataclass(eq=False)
class _CSRPattern:
    r"""The sparsity pattern of ``W = Dᵀ diag(ω) D`` for one set of comparisons:
    it depends on the comparisons alone, so it is built once and reused while
    only the weights change (every Newton step and evidence gradient of a fit).
    """

    order: Tensor  # the 4m entries [ww, ll, wl, lw] per batch row, sorted
    counts: Tensor  # entries summed into each stored non-zero
    crow: Tensor
    col: Tensor
    size: int


# comparisons tensor (a view's base) -> (version, {key: (snapshot, value)}):
# what depends on the comparisons alone, reused while only the weights change
# (every Newton step and evidence gradient of a fit). Entries go with the
# tensor; the version counter catches in-place edits, and on the CPU a hit is
# also checked against a copy of the comparisons (cheap there, and it catches
# what bypasses the counter: ``.data`` assignments, edits through NumPy). On
# accelerators that check would synchronise the device at every Newton step,
# so there only the counter is trusted: replace comparisons instead of writing
# into their storage behind autograd's back.
_COMPARISON_CACHE: WeakIdKeyDictionary = WeakIdKeyDictionary()


def _cached_for(comparisons: Tensor, what: tuple, build):
    r"""``build()``, cached per comparisons tensor and ``what``."""
    if comparisons.is_inference():  # no version counter to key on
        return build()
    base = comparisons if comparisons._base is None else comparisons._base
    version = comparisons._version
    key = (
        what,
        tuple(comparisons.shape),
        comparisons.stride(),
        comparisons.storage_offset(),
        comparisons.data_ptr(),
    )
    entry = _COMPARISON_CACHE.get(base)
    if entry is None or entry[0] != version or len(entry[1]) > 16:
        entry = _COMPARISON_CACHE[base] = (version, {})
    values = entry[1]
    on_cpu = comparisons.device.type == "cpu"
    hit = values.get(key)
    if hit is not None and (not on_cpu or torch.equal(hit[0], comparisons)):
        return hit[1]
    value = build()
    values[key] = (comparisons.clone() if on_cpu else None, value)
    return value


def _csr_pattern(comparisons: Tensor, n: int, batch: torch.Size) -> _CSRPattern:
    r"""The (cached) CSR pattern of :func:`_laplacian_csr` for comparisons
    broadcast to ``batch x m x 2``."""

    def build() -> _CSRPattern:
        m = comparisons.shape[-2]
        B = math.prod(batch)
        comps = comparisons.expand(batch + (m, 2)).reshape(B, m, 2)
        device = comps.device
        offset = (torch.arange(B, device=device) * n).unsqueeze(-1)  # B x 1
        w = comps[..., 0] + offset
        l = comps[..., 1] + offset
        size = B * n
        rows = torch.cat([w, l, w, l], -1).flatten()
        cols = torch.cat([w, l, l, w], -1).flatten()
        # entries sorted by (row, column), duplicates summed segment by
        # segment: no atomic adds, so the sums are reproducible on
        # accelerators too
        sorted_keys, order = torch.sort(rows * size + cols, stable=True)
        keys, counts = torch.unique_consecutive(sorted_keys, return_counts=True)
        crow = torch.zeros(size + 1, dtype=torch.long, device=device)
        crow[1:] = torch.bincount(keys // size, minlength=size).cumsum(0)
        return _CSRPattern(order, counts, crow, keys % size, size)

    return _cached_for(comparisons, ("csr", n, tuple(batch)), build)


def _laplacian_csr(weights: Tensor, comparisons: Tensor, n: int) -> Tensor:
    r"""``W = Dᵀ diag(weights) D`` as one block-diagonal sparse CSR matrix over
    the batch (``B·n x B·n``, ``B`` = the broadcast batch size).

    Built directly in CSR order: the ``4m`` entries per batch element are
    sorted once by ``(row, column)`` and duplicates (a design's diagonal, a
    repeated pair) summed per segment — no COO ``coalesce``, 40x cheaper at
    ``n = 800``. The sort depends on the comparisons alone and is cached
    (:func:`_csr_pattern`); only the values are computed per call.
    """
    batch = torch.broadcast_shapes(weights.shape[:-1], comparisons.shape[:-2])
    m = weights.shape[-1]
    B = math.prod(batch)
    pattern = _csr_pattern(comparisons, n, batch)
    om = weights.expand(batch + (m,)).reshape(B, m)
    entries = torch.cat([om, om, -om, -om], -1).flatten()[pattern.order]
    if entries.numel():
        values = torch.segment_reduce(entries, "sum", lengths=pattern.counts)
    else:  # no comparisons: W = 0 (segment_reduce rejects empty input)
        values = entries
    size = pattern.size
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(pattern.crow, pattern.col, values, (size, size))


def _laplacian_csr_for(
    weights: Tensor, comparisons: Tensor, n: int, rhs_batch: torch.Size
) -> tuple[Tensor, torch.Size]:
    r"""The CSR ``W`` of :func:`_laplacian_csr` for products with right-hand
    sides of batch ``rhs_batch``, and the batch of those products: one block
    per element of the broadcast batch of weights, comparisons and ``M``."""
    batch = torch.broadcast_shapes(
        weights.shape[:-1], comparisons.shape[:-2], rhs_batch
    )
    weights = weights.expand(batch + weights.shape[-1:])
    comparisons = comparisons.expand(batch + comparisons.shape[-2:])
    return _laplacian_csr(weights, comparisons, n), batch


def _csr_matmul(W: Tensor, M: Tensor, batch: torch.Size) -> Tensor:
    r"""``W @ M`` for a block-diagonal CSR ``W`` from :func:`_laplacian_csr`
    and a ``batch x n x k`` dense ``M`` (made row-major first)."""
    n, k = M.shape[-2:]
    rhs = M.expand(batch + (n, k)).reshape(-1, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return (W @ rhs.contiguous()).reshape(batch + (n, k))


def laplacian_matmul(
    weights: Tensor, comparisons: Tensor, M: Tensor, dense: Tensor | None = None
) -> Tensor:
    r"""``W @ M`` for ``W = Dᵀ diag(weights) D``.

    Small problems use a dense ``W``; from ``n ≥ 128`` on, ``W`` (``n + 2m``
    non-zeros) is assembled as a block-diagonal sparse CSR matrix over the
    batch, an order of magnitude faster than the dense ``n³`` product.

    Args:
        weights: ``batch_shape x m``.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        M: ``batch_shape x n x k``.
        dense: The dense ``W`` if the caller already built it (used below the
            sparse threshold instead of building it again).

    Returns:
        ``batch_shape x n x k``.
    """
    n = M.shape[-2]
    if n >= DENSE_BELOW:
        W, batch = _laplacian_csr_for(weights, comparisons, n, M.shape[:-2])
        return _csr_matmul(W, M, batch)
    if dense is None:  # W's batch: the weights' and comparisons' (M broadcasts)
        wbatch = torch.broadcast_shapes(weights.shape[:-1], comparisons.shape[:-2])
        dense = comparison_laplacian(
            weights.expand(wbatch + weights.shape[-1:]),
            comparisons.expand(wbatch + comparisons.shape[-2:]),
            n,
        )
    return dense @ M


FORMS = ("auto", "whitened", "precision")


def find_mode(
    chol_prior: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
    init: Tensor | None = None,
    *,
    max_iter: int = 100,
    tol: float | None = None,
    num_halvings: int = 10,
    sync_every: int | None = None,
    form: str = "auto",
) -> GaussianApproximation:
    r"""Find the Laplace mode of a batch of pairwise-probit/logit problems.

    Two symmetric forms of the Newton system are available:

    - ``"whitened"``: ``A = I + Lᵀ W L`` in ``v = L⁻¹ f`` (eigenvalues ``≥ 1``;
      stable in float32 and for any conditioning of ``K``); one ``n³`` product
      per iteration.
    - ``"precision"``: ``B = K⁻¹ + W`` with ``K⁻¹`` formed once from ``L``;
      only a Cholesky per iteration (about 6x cheaper). The explicit ``K⁻¹``
      loses digits as ``cond(K)`` grows, so it enters ``B`` only, the
      preconditioner: each step is ``B⁻¹ ∇Ψ`` with the true gradient
      ``∇ℓ(f) - K⁻¹f`` (``K⁻¹f`` by the backward-stable solve with ``L``), and
      a last check refines the end point the same way (with ``B`` factorised
      again if that moves it). Steps ``B⁻¹(Wf + ∇ℓ)`` with ``K⁻¹`` inside
      stopped 2e-4 from the mode at ``cond(K) = 6e9``. Used in float64
      unless ``K`` is near-singular (the ratio of the extreme diagonal
      entries of ``L``, a lower bound on ``cond(L)``, above ``1e6``).

    ``"auto"`` (default) takes ``"precision"`` in float64 when the check
    passes and ``"whitened"`` otherwise; ``"precision"`` also falls back to
    ``"whitened"`` if its Newton system fails to factorise.

    Args:
        chol_prior: ``batch_shape x n x n`` lower Cholesky factor of the prior
            covariance ``K``.
        comparisons: ``batch_shape x m x 2`` long ``[winner, loser]`` rows.
        likelihood: The pairwise likelihood.
        init: Optional ``batch_shape x n`` warm start (e.g. the last mode).
        max_iter: Newton iteration budget.
        tol: Stop when every batch element's Newton step has
            ``max|Δf| ≤ tol · (1 + max|f|)``; default ``1e-9`` (float64) or
            ``1e-4`` (float32).
        num_halvings: Step sizes ``1, ½, …, 2^-num_halvings`` are tried at
            once; the largest that does not decrease ``Ψ`` is taken.
        sync_every: Read the on-device convergence flags every this many
            iterations (default 1 on CPU, where it is free, 4 on CUDA).
        form: ``"auto"``, ``"whitened"`` or ``"precision"``.

    Returns:
        The :class:`GaussianApproximation` at the mode (detached from autograd).
    """
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}; got {form!r}.")
    with torch.no_grad():
        if form == "auto":
            form = "whitened"
            if chol_prior.dtype == torch.float64:
                d = chol_prior.diagonal(dim1=-2, dim2=-1).abs()
                ratio = d.amax(-1) / d.amin(-1).clamp_min(1e-300)
                if bool((ratio <= 1e6).all()):
                    form = "precision"
        args = (
            chol_prior,
            comparisons,
            likelihood,
            init,
            max_iter,
            tol,
            num_halvings,
            sync_every,
        )
        if form == "precision":
            state = _find_mode(*args, precision=True)
            if state is not None:
                return state
        return _find_mode(*args, precision=False)


def _find_mode(
    L, comparisons, likelihood, init, max_iter, tol, num_halvings, sync_every, precision
) -> GaussianApproximation | None:
    n = L.shape[-1]
    dtype, device = L.dtype, L.device
    tol = _default_tol(dtype) if tol is None else tol
    psi_tol = 1e-13 if dtype == torch.float64 else 1e-6
    if sync_every is None:
        sync_every = 1 if device.type == "cpu" else 4
    batch = L.shape[:-2]
    Lt = L.transpose(-1, -2)
    steps = 2.0 ** -torch.arange(num_halvings + 1, dtype=dtype, device=device)
    steps_b = steps.view((-1,) + (1,) * (len(batch) + 1))  # J x 1.. x 1
    comps_j = comparisons.expand(batch + comparisons.shape[-2:])
    comps_ls = comps_j.expand((len(steps),) + comps_j.shape)
    Kinv = _row_major(torch.cholesky_inverse(L)) if precision else None

    def mv(M: Tensor, x: Tensor) -> Tensor:
        return (M @ x.unsqueeze(-1)).squeeze(-1)

    # p: the prior coordinates (v = L⁻¹f whitened; f itself in precision
    # form), pm: the prior metric applied to p (v, or K⁻¹ f): prior = ½ p·pm
    f = torch.zeros(batch + (n,), dtype=dtype, device=device)
    p, pm = f.clone(), f.clone()
    prev = init if isinstance(init, GaussianApproximation) else None
    if prev is not None:
        init = prev.mode
    if init is not None:
        # Warm start at f0 = K ∇ℓ(init), i.e. v0 = Lᵀ ∇ℓ(init): exact at a
        # previous mode under the same K, and always well scaled under a new K
        # (unlike L⁻¹ init). Kept per batch element only where Ψ beats f = 0.
        # From a Laplace state ∇ℓ(f̂) = K_old⁻¹ f̂ = α at its mode, so f0 = K α
        # needs no likelihood pass (and K⁻¹ f0 = α needs no product).
        from_state = type(prev) is GaussianApproximation
        if from_state:
            g0 = prev.alpha.to(L).expand(batch + (n,))
        else:
            _, g0k, _, _ = likelihood.derivatives(
                init.to(L).expand(batch + (n,)), comps_j
            )
            g0 = scatter_pairs(g0k, comps_j, n)
        v0 = mv(Lt, g0)
        f0 = mv(L, v0)
        if not precision:
            p0, pm0 = v0, v0
        elif from_state:
            p0, pm0 = f0, g0  # K⁻¹ f0 = K⁻¹ K α = α (the new K)
        else:
            p0, pm0 = f0, mv(Kinv, f0)
        candidates = [(f0, p0, pm0)]
        if (
            precision
            and prev is not None
            and prev._post_cov is not None
            and prev.curvature.shape[-1] == comps_j.shape[-2]
        ):
            # first-order (implicit-function) prediction of the new mode from the
            # previous state: f̂ + (I + K W)⁻¹ δK α = f̂ + r - Σ W r with
            # r = K_new α_old - f̂_old (= δK α_old) and Σ, W the old ones
            fo = prev.mode.to(L).expand(batch + (n,))
            if from_state:
                r = f0 - fo
            else:
                r = mv(L, mv(Lt, prev.alpha.to(L).expand(batch + (n,)))) - fo
            Wr = scatter_pairs(prev.curvature * _pair_diff(r, comps_j), comps_j, n)
            f1 = fo + r - mv(prev._post_cov, Wr)
            candidates.append((f1, f1, mv(Kinv, f1)))
        best = likelihood._log_prob_pairs(f, comps_j).sum(-1)  # Ψ at f = 0
        for fc, pc, pmc in candidates:
            psi_c = likelihood._log_prob_pairs(fc, comps_j).sum(-1) - 0.5 * (
                pc * pmc
            ).sum(-1)
            better = psi_c > best
            best = torch.where(better, psi_c, best)
            better = better.unsqueeze(-1)
            f = torch.where(better, fc, f)
            p = torch.where(better, pc, p)
            pm = torch.where(better, pmc, pm)
    converged = torch.zeros(batch, dtype=torch.bool, device=device)
    it = 0
    lap_index = _laplacian_index(comps_j, n) if precision else None
    # derivatives at the current iterate; on CPU the full Newton step's are
    # computed for the damping test and reused by the next iteration
    logp, grad_k, omega, domega = likelihood.derivatives(f, comps_j)
    for it in range(1, max_iter + 1):
        omega_c = omega  # the curvature C is factorised at
        if precision:
            C, info = _cholesky_plus_laplacian(Kinv, omega, lap_index)  # K⁻¹ + W
            # the step B⁻¹ ∇Ψ with the true gradient ∇Ψ = ∇ℓ - K⁻¹f, K⁻¹f from
            # the backward-stable solve with L: the explicit K⁻¹ (in B only)
            # then slows the convergence at worst, it does not move the mode
            # (from B f it did: 2e-4 off at cond(K) = 6e9). K⁻¹Δf = ∇Ψ - WΔf
            # since BΔf = ∇Ψ: a sparse product, for Ψ's quadratic model only
            pm = cholesky_solve(f.unsqueeze(-1), L).squeeze(-1)
            g = scatter_pairs(grad_k, comps_j, n) - pm
            df = cholesky_solve(g.unsqueeze(-1), C).squeeze(-1)
            diff = _pair_diff(df, comps_j)
            dp, dpm = df, g - scatter_pairs(omega * diff, comps_j, n)
        else:
            grad = scatter_pairs(grad_k, comps_j, n)  # batch x n
            LtWL = Lt @ laplacian_matmul(omega, comps_j, L)
            A = LtWL.clone()
            A.diagonal(dim1=-2, dim2=-1).add_(1.0)
            C, info = torch.linalg.cholesky_ex(A)
            rhs = mv(LtWL, p) + mv(Lt, grad)
            dp = cholesky_solve(rhs.unsqueeze(-1), C).squeeze(-1) - p
            dpm = dp
            df = mv(L, dp)
            diff = _pair_diff(df, comps_j)
        if bool((info > 0).any()) if device.type == "cpu" else False:
            if precision:
                return None
            break
        # vectorised damping: Ψ(t) = Σ log p(f + tΔf) - ½(a + 2tb + t²c)
        a, b, c = (p * pm).sum(-1), (dp * pm).sum(-1), (dp * dpm).sum(-1)
        psi0 = logp.sum(-1) - 0.5 * a  # batch
        # on CPU try the full step alone first (the usual case); else all at once
        at_full = None
        if device.type == "cpu":
            at_full = likelihood.derivatives(f + df, comps_j)
            if not bool((at_full[0].sum(-1) - 0.5 * (a + 2 * b + c) >= psi0).all()):
                at_full = None
        if at_full is not None:
            t = torch.ones_like(psi0)
            any_ok = torch.ones_like(psi0, dtype=torch.bool)
        else:
            t_b = steps_b.squeeze(-1)
            psi = likelihood._log_prob_pairs(f + steps_b * df, comps_ls).sum(
                -1
            ) - 0.5 * (a + 2 * t_b * b + t_b**2 * c)  # J x batch
            ok = psi >= psi0
            any_ok = ok.any(0)
            first = torch.argmax(ok.to(torch.int8), dim=0)  # batch
            t = torch.where(any_ok, steps[first], torch.zeros_like(steps[first]))
        # converged: a negligible Newton step, no step size that increases Ψ
        # (stationary to working precision), or a Newton decrement ½ΔfᵀHΔf
        # (the predicted gain in Ψ) at the level of rounding in Ψ, below which
        # the precision form cannot improve
        decrement = 0.5 * (c + (omega * diff * diff).sum(-1))
        small = df.abs().amax(-1) <= tol * (1.0 + f.abs().amax(-1))
        flat = decrement <= psi_tol * (1.0 + psi0.abs())
        converged = (small | flat | ~any_ok) & (info == 0)
        tt = t.unsqueeze(-1)
        f, p, pm = f + tt * df, p + tt * dp, pm + tt * dpm
        if at_full is not None:
            logp, grad_k, omega, domega = at_full
        else:
            logp, grad_k, omega, domega = likelihood.derivatives(f, comps_j)
        if it % sync_every == 0 and bool(converged.all()):
            break
    if bool((info > 0).any()):
        if precision:
            return None
        raise NumericalError(
            "Cholesky of I + Lᵀ W L failed; the likelihood curvature is not finite. "
            "Check the kernel hyperparameters and the data for extreme values."
        )
    if not bool(converged.all()):
        warnings.warn(
            f"Laplace mode finding stopped after {max_iter} Newton iterations with "
            f"{int((~converged).sum())} of {converged.numel()} batch elements not "
            f"converged (tol={tol:g}); raise max_iter or tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    if precision:
        alpha = cholesky_solve(f.unsqueeze(-1), L).squeeze(-1)
        # The end point, checked with the true gradient ∇ℓ(f) - K⁻¹f (K⁻¹f
        # from the backward-stable solve with L) preconditioned by the loop's
        # factor: the loop's steps use that gradient, so this rarely moves f
        # (when it does, one or two n² steps, and the factor is recomputed at
        # the new point so that the log determinant and Σ belong to it).
        moved = torch.zeros(batch, dtype=torch.bool, device=device)
        for step_no in range(_REFINE_STEPS + 1):
            g = scatter_pairs(grad_k, comps_j, n) - alpha
            step = cholesky_solve(g.unsqueeze(-1), C).squeeze(-1)
            big = step.abs().amax(-1) > tol * (1.0 + f.abs().amax(-1))
            if not bool(big.any()):
                break
            if step_no == _REFINE_STEPS:
                return None  # not settling: the whitened form decides
            moved |= big
            f = f + torch.where(big.unsqueeze(-1), step, torch.zeros_like(step))
            logp, grad_k, omega, domega = likelihood.derivatives(f, comps_j)
            alpha = cholesky_solve(f.unsqueeze(-1), L).squeeze(-1)
        if bool(moved.any()):
            C, info = _cholesky_plus_laplacian(Kinv, omega, lap_index)
            omega_c = omega
            if bool((info > 0).any()):
                return None
    log_lik = logp.sum(-1)
    if precision:
        logdet = 2 * (
            C.diagonal(dim1=-2, dim2=-1).log().sum(-1)
            + L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        )
    else:
        alpha = torch.linalg.solve_triangular(Lt, p.unsqueeze(-1), upper=True)
        alpha = alpha.squeeze(-1)
        logdet = 2 * C.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    state = GaussianApproximation(
        mode=f,
        chol_prior=L,
        alpha=alpha,
        curvature=omega_c,
        comparisons=comps_j,
        log_likelihood=log_lik,
        evidence=log_lik - 0.5 * (f * alpha).sum(-1) - 0.5 * logdet,
        converged=converged,
        iterations=it,
        form="precision" if precision else "whitened",
    )
    if precision:
        state._post_cov = _row_major(torch.cholesky_inverse(C))
    else:
        state._chol_post = C
    state._mode_derivatives = (omega, domega)  # at the returned mode
    return state


class LaplaceEvidence(torch.autograd.Function):
    r"""Laplace log evidence as a differentiable function of the prior
    covariance ``K``.

    Forward finds the mode (warm-started) and returns the ``batch_shape``
    evidence. Backward returns ``∂ log Z / ∂K = ½ (ααᵀ - R + αbᵀ + bαᵀ)`` with
    ``R = (K + Ŵ⁻¹)⁻¹ = Ŵ - Ŵ Σ Ŵ`` (``Σ = (K⁻¹ + Ŵ)⁻¹``) and
    ``b = (I + ŴK)⁻¹ s = s - ŴΣs``, ``s_j = -½ ∂ log|I + KŴ| / ∂f̂_j``: the
    second pair of terms is the implicit dependence of the mode on ``K``.
    """

    @staticmethod
    def forward(ctx, K, comparisons, likelihood, init, options, out):  # noqa: D102
        L = jittered_cholesky(K.detach(), name="prior covariance K")
        state = find_mode(L, comparisons, likelihood, init, **options)
        out["state"] = state
        ctx.state = state
        ctx.likelihood = likelihood
        return state.evidence.clone()

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        state: GaussianApproximation = ctx.state
        comps = state.comparisons
        if state._mode_derivatives is not None:
            omega, domega = state._mode_derivatives
        else:
            _, _, omega, domega = ctx.likelihood.derivatives(state.mode, comps)
        n = state.mode.shape[-1]
        q = pair_quadratic(state.posterior_covariance(), comps)  # a_kᵀ Σ a_k
        s = -0.5 * scatter_pairs(q * domega, comps, n)  # batch x n
        M = evidence_kernel_gradient(state, omega, s)
        return M.mul_((0.5 * grad_out)[..., None, None]), None, None, None, None, None


def pair_quadratic(
    S: Tensor, comparisons: Tensor, index: Tensor | None = None
) -> Tensor:
    r"""``a_kᵀ S a_k = S_ww + S_ll - 2 S_wl`` for every comparison.

    Args:
        S: ``batch_shape x n x n`` symmetric matrix.
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows.
        index: Their :func:`_laplacian_index` if the caller has it.

    Returns:
        ``batch_shape x m``.
    """
    n, m = S.shape[-1], comparisons.shape[-2]
    if index is None:
        index = _laplacian_index(comparisons, n)
    # the positions ww, ll, wl, lw of W's entries are the ones read
    ww_ll_wl = S.flatten(-2).gather(-1, index[..., : 3 * m])
    return ww_ll_wl[..., :m] + ww_ll_wl[..., m : 2 * m] - 2 * ww_ll_wl[..., 2 * m :]


def evidence_kernel_gradient(
    state: GaussianApproximation, omega: Tensor, implicit: Tensor | None = None
) -> Tensor:
    r"""``2 ∂ log Z / ∂K = ααᵀ - R + αbᵀ + bαᵀ`` for a Gaussian approximation.

    ``R = (K + W⁻¹)⁻¹ = W - WΣW`` with ``W = Dᵀ diag(ω) D`` and
    ``Σ = (K⁻¹ + W)⁻¹``; ``b = (I + WK)⁻¹ s = s - WΣs`` carries the implicit
    dependence of the approximation on ``K`` (Laplace: ``s = -½ ∂ log|I+KW| /
    ∂f̂``; EP at convergence: none, ``implicit=None``).

    Args:
        state: The approximation (``alpha`` = ``K⁻¹`` times its mean).
        omega: ``batch_shape x m`` weights of ``W``.
        implicit: Optional ``batch_shape x n`` vector ``s``.

    Returns:
        ``batch_shape x n x n``.
    """
    comps = state.comparisons
    S = state.posterior_covariance()
    n = S.shape[-1]
    if n < DENSE_BELOW:
        W = comparison_laplacian(omega, comps, n)
        WS = W @ S  # W Σ
        WSW = W @ WS.transpose(-1, -2)  # W Σ W
    else:  # one sparse W for both products
        W, batch = _laplacian_csr_for(omega, comps, n, S.shape[:-2])
        WS = _csr_matmul(W, S, batch)
        WSW = _csr_matmul(W, WS.transpose(-1, -2), batch)
    a = state.alpha
    if implicit is None:
        b = torch.zeros_like(a)
    else:
        b = implicit - (WS @ implicit.unsqueeze(-1)).squeeze(-1)
    # M = ααᵀ + αbᵀ + bαᵀ - R = [α, b] [α + b, α]ᵀ - W + WΣW, built in place on
    # the fresh WΣW (-W scattered at its 4m entries, no dense W pass)
    batch = WSW.shape[:-2]
    M = WSW.contiguous()
    _scatter_laplacian_(
        M.view(batch + (n * n,)),
        -omega.expand(batch + omega.shape[-1:]),
        _laplacian_index(comps.expand(batch + comps.shape[-2:]), n),
    )
    U = torch.stack([a, b], dim=-1).expand(batch + (n, 2))
    V = torch.stack([a + b, a], dim=-1).expand(batch + (n, 2))
    M3 = M.view((-1, n, n))
    M3.baddbmm_(U.reshape((-1, n, 2)), V.reshape((-1, n, 2)).transpose(-1, -2))
    return M


def laplace_evidence(
    K: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
    init: Tensor | None = None,
    **options,
) -> tuple[Tensor, GaussianApproximation]:
    r"""Laplace log evidence, differentiable in ``K``, and the state at the mode.

    Args:
        K: ``batch_shape x n x n`` prior covariance of the utilities at the
            designs (may require grad).
        comparisons: ``batch_shape x m x 2`` long ``[winner, loser]`` rows.
        likelihood: The pairwise likelihood.
        init: Optional ``batch_shape x n`` warm start.
        **options: Passed to :func:`find_mode`.

    Returns:
        ``(evidence, state)``: a ``batch_shape`` tensor and the
        :class:`GaussianApproximation`.
    """
    out: dict = {}
    evidence = LaplaceEvidence.apply(K, comparisons, likelihood, init, options, out)
    return evidence, out["state"]
