r"""Linear elliptical slice sampling (LinESS) of a linearly truncated Gaussian.

Target: ``N(μ, Σ)`` restricted to ``{x : A x ≤ b}`` (see
:mod:`prefbo.sampling.base`). With ``Σ = L Lᵀ`` and the chain at ``x``, one
transition draws ``ν ~ N(0, I_d)``, sets ``u = L ν`` and moves along the
ellipse

.. math::

    x(θ) = μ + (x - μ) \cos θ + u \sin θ,

to an angle drawn *uniformly from the set of feasible angles*, which is
computed exactly: constraint ``j`` reads ``p_j \cos θ + q_j \sin θ ≤ b̃_j`` with
``p = A (x - μ)``, ``q = A u`` and ``b̃ = b - A μ``, i.e.
``R_j \cos(θ - φ_j) ≤ b̃_j`` with ``R_j = |(p_j, q_j)|`` and
``φ_j = atan2(q_j, p_j)``. It is violated on the single arc
``(φ_j - α_j, φ_j + α_j)``, ``α_j = arccos(b̃_j / R_j)`` (none when
``b̃_j ≥ R_j``), which never contains ``θ = 0`` because the chain is feasible.
The feasible set is the circle minus the union of these arcs: sorting the arcs
by their start and taking a running maximum of their ends gives the ``k + 1``
gaps between them (the idea of Wu & Gardner, 2024), one of which is picked with
probability proportional to its length. No proposal is ever rejected, and the
move leaves the truncated Gaussian invariant (Murray et al., 2010; Gessner et
al., 2020).

Cone shortcut: when ``b̃ = 0`` (all constraints pass through the mean, as for
the skew-GP's ``r > 0`` with mean zero), every violated arc is a half circle
and the feasible set is the single arc ``[max_j a_j - π, min_j a_j]`` with
``a_j = atan2(-p_j, q_j) ∈ [0, π]``: no sort is needed, and as ``a_j`` is
monotone in ``q_j / (-p_j)`` only the two extreme ratios need an arctangent.

Mixing: when many constraints are close to active, as in the skew-GP orthant
with ``m ≳ 100`` answers, the feasible arcs are short and the chain moves in
small steps: ``benchmarks/sampler_throughput.py`` measures autocorrelation
times of thousands of transitions at ``m = 200``, where
:class:`~prefbo.sampling.GibbsSampler` is orders of magnitude more efficient.

Cost per transition: ``ν`` for a block of transitions is drawn at once and
mapped by one matrix product per block (``O(d²)`` per chain and transition, plus
``O(dk)`` for dense ``A``; axis-aligned constraints such as orthants need only a
gather), followed by ``O(k)`` (cone) or ``O(k log k)`` elementwise work per
transition. Angles are kept a small distance (``min(gap / 4, 1e-12)`` radians in
float64, ``1e-6`` in float32) away from the ends of each feasible arc so that
rounding cannot carry a chain outside the domain.

References:
    I. Murray, R. Adams, D. MacKay. Elliptical slice sampling. AISTATS 2010.
    A. Gessner, O. Kanjilal, P. Hennig. Integrals over Gaussians under linear
    domain constraints. AISTATS 2020.
    K. Wu, J. Gardner. A fast, robust elliptical slice sampling implementation
    for linearly truncated multivariate normal distributions. arXiv:2407.10449.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from prefbo.sampling.base import TruncatedGaussianSampler
from prefbo.utils.checks import check_int

_TWO_PI = 2.0 * math.pi
_BLOCK_ELEMENTS = 2**17  # noise drawn per block: 1 MB in float64, stays in cache


def cone_angle(slack: Tensor, rate: Tensor, uniform: Tensor, trim: float) -> Tensor:
    r"""Uniform angle on the feasible arc when every constraint is homogeneous.

    For constraints ``p_j cos θ + q_j sin θ ≤ 0`` with ``p ≤ 0`` (the current
    point, ``θ = 0``, is feasible), constraint ``j`` holds exactly on
    ``[a_j - π, a_j]`` with ``a_j = atan2(-p_j, q_j) ∈ [0, π]``, so the feasible
    set is the arc ``[max_j a_j - π, min_j a_j]``, which contains ``0``. As
    ``a_j = π/2 - atan(q_j / (-p_j))`` decreases in ``q_j / (-p_j)``, only the
    extreme ratios need an arctangent.

    Args:
        slack: ``batch_shape x k`` slacks ``-p`` (``≥ 0`` up to rounding).
        rate: ``batch_shape x k`` rates ``q``.
        uniform: ``batch_shape`` uniforms on ``[0, 1)``.
        trim: Largest margin (radians) kept from each end of the arc.

    Returns:
        ``batch_shape`` angles in ``[-π, π]``.
    """
    ratio = rate / slack.clamp_min(torch.finfo(slack.dtype).tiny)  # cot(a_j)
    upper = math.pi / 2 - ratio.amax(dim=-1).atan_()  # min_j a_j
    lower = -math.pi / 2 - ratio.amin(dim=-1).atan_()  # max_j a_j - π
    gap = upper - lower  # length of the feasible arc, in [0, π]
    margin = (gap * 0.25).clamp_(max=trim)
    return (lower + margin).addcmul_(uniform, gap - 2 * margin)


def union_angle(
    p: Tensor, q: Tensor, b: Tensor, uniform: Tensor, trim: float
) -> Tensor:
    r"""Uniform angle on the union of feasible arcs of general constraints.

    Constraint ``j`` is ``p_j cos θ + q_j sin θ ≤ b_j``, feasible at ``θ = 0``.

    Args:
        p: ``batch_shape x k`` constraint values at the current point.
        q: ``batch_shape x k`` constraint values of the direction ``u``.
        b: ``k`` right-hand sides.
        uniform: ``batch_shape`` uniforms on ``[0, 1)``.
        trim: Largest margin (radians) kept from each end of each arc.

    Returns:
        ``batch_shape`` angles in ``[0, 2π]``.
    """
    radius = torch.hypot(p, q)
    active = b < radius  # the constraint is violated somewhere on the ellipse
    phi = torch.atan2(q, p)
    alpha = torch.arccos((b / radius).clamp_(-1.0, 1.0))
    # The violated arc (phi - alpha, phi + alpha) excludes 0, so it lies inside
    # [0, 2π] once shifted by 2π when phi < 0; clamping absorbs rounding.
    centre = phi + phi.lt(0).to(phi.dtype) * _TWO_PI
    full = torch.full_like(phi, _TWO_PI)
    lo = torch.where(active, (centre - alpha).clamp_(0.0, _TWO_PI), full)
    hi = torch.where(active, (centre + alpha).clamp_(0.0, _TWO_PI), full)
    lo, order = lo.sort(dim=-1)
    reach = hi.gather(-1, order).cummax(dim=-1).values  # furthest violated angle
    starts = torch.cat([torch.zeros_like(reach[..., :1]), reach], dim=-1)  # k + 1
    ends = torch.cat([lo, full[..., :1]], dim=-1)  # batch x (k + 1) feasible gaps
    length = (ends - starts).clamp_(min=0.0)
    margin = (length * 0.25).clamp_(max=trim)
    usable = length - 2 * margin
    csum = usable.cumsum(dim=-1)
    target = uniform * csum[..., -1]
    idx = torch.searchsorted(csum, target.unsqueeze(-1)).clamp_(max=csum.shape[-1] - 1)
    offset = (starts + margin + usable - csum).gather(-1, idx).squeeze(-1)
    return offset + target


class LinESS(TruncatedGaussianSampler):
    r"""Rejection-free elliptical slice sampler of a linearly truncated Gaussian.

    Samples ``N(mean, covariance)`` restricted to ``{x : A x ≤ b}`` with
    ``num_chains`` chains advanced together (see the module docstring for the
    algorithm and :class:`~prefbo.sampling.base.TruncatedGaussianSampler` for
    the arguments).

    Example:
        >>> # r ~ N(0, S) restricted to r > 0, 64 chains, 1000 draws each
        >>> m = S.shape[-1]
        >>> sampler = LinESS(-torch.eye(m), torch.zeros(m), covariance_matrix=S,
        ...                  num_chains=64, burnin=200, thinning=4, seed=0)
        >>> r = sampler.draw(1000)  # 1000 x 64 x m
    """

    def __init__(
        self,
        A: Tensor,
        b: Tensor,
        mean: Tensor | None = None,
        covariance_matrix: Tensor | None = None,
        *,
        covariance_root: Tensor | None = None,
        start: Tensor | None = None,
        num_chains: int = 1,
        burnin: int = 0,
        thinning: int = 0,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        progress: Callable[[int], None] | None = None,
        block_size: int | None = None,
    ) -> None:
        r"""Set up the sampler (arguments as the base class), then burn in.

        Args:
            block_size: Transitions whose noise is drawn and mapped by ``L`` in
                one matrix product (default: as many as fit in ``2**17``
                numbers, at most 1024). Affects speed, memory and which random
                number goes where (so the realised chain for a given seed),
                never the distribution.
        """
        if block_size is not None:
            block_size = check_int("block_size", block_size, 1)
        self._block_size = block_size
        super().__init__(
            A,
            b,
            mean,
            covariance_matrix,
            covariance_root=covariance_root,
            start=start,
            num_chains=num_chains,
            burnin=burnin,
            thinning=thinning,
            seed=seed,
            generator=generator,
            progress=progress,
        )

    def _setup(self) -> None:
        k, d = self.A.shape
        self._root_t = self.covariance_root.mT.contiguous()  # d x d
        self._trim = 1e-12 if self.A.dtype == torch.float64 else 1e-6
        if self._axis_aligned:
            cols = self._axis_cols
            arange = torch.arange(d, device=cols.device)
            self._gather = not (k == d and bool((cols == arange).all()))
        else:
            self._A_t = self.A.mT.contiguous()  # d x k
        if self._block_size is None:
            per_step = self.num_chains * (d + k)
            self._block_size = max(1, min(1024, _BLOCK_ELEMENTS // per_step))

    def _axis_values(self, w: Tensor) -> Tensor:
        r"""``A w`` for axis-aligned ``A``: ``batch x d`` -> ``batch x k``."""
        return (w[..., self._axis_cols] if self._gather else w) * self._axis_vals

    def _advance(self, num_kept: int, stride: int) -> Tensor:
        C, d = self._w.shape
        total = num_kept * stride
        out = torch.empty(num_kept, C, d, dtype=self.A.dtype, device=self.A.device)
        w, b, trim = self._w, self._b_tilde, self._trim
        neg = -self._axis_vals if self._axis_aligned else None
        done = 0
        while done < total:
            T = min(self._block_size, total - done)
            U = self._standard_normal(T, C, d) @ self._root_t  # T x C x d
            if self._axis_aligned:
                Q = self._axis_values(U)  # T x C x k
            else:
                Q = U @ self._A_t  # T x C x k
                p = w @ self._A_t  # C x k, refreshed every block against drift
            V = self._uniform(T, C)
            for t in range(T):
                if self._axis_aligned and self._is_cone:
                    slack = (w[..., self._axis_cols] if self._gather else w) * neg
                    theta = cone_angle(slack, Q[t], V[t], trim)
                elif self._axis_aligned:
                    p = self._axis_values(w)
                    theta = union_angle(p, Q[t], b, V[t], trim)
                elif self._is_cone:
                    theta = cone_angle(-p, Q[t], V[t], trim)
                else:
                    theta = union_angle(p, Q[t], b, V[t], trim)
                cos, sin = theta.cos().unsqueeze(-1), theta.sin().unsqueeze(-1)
                w = (w * cos).addcmul_(U[t], sin)  # C x d
                if not self._axis_aligned:
                    p = (p * cos).addcmul_(Q[t], sin)  # C x k
                step = done + t + 1
                if step % stride == 0:
                    torch.add(w, self.mean, out=out[step // stride - 1])
            done += T
            self._report(T)
        self._w = w
        self.lifetime_steps += total
        return out
