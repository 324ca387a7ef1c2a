r"""Gibbs sampling of a linearly truncated Gaussian, one coordinate at a time.

Target: ``N(μ, Σ)`` restricted to ``{x : A x ≤ b}`` (see
:mod:`prefbo.sampling.base`). With the precision ``Λ = Σ⁻¹``, the conditional
of coordinate ``i`` given the others is the 1-D normal

.. math::

    x_i \mid x_{-i} \sim \mathcal N\Big(μ_i - \frac{1}{Λ_{ii}}
    \sum_{j \ne i} Λ_{ij} (x_j - μ_j),\; \frac{1}{Λ_{ii}}\Big)

truncated to the interval that the constraints leave for ``x_i`` (a constant
interval per coordinate for axis-aligned constraints such as the skew-GP's
``r > 0``; otherwise read off the current slacks ``b - A x``). One transition
is a systematic sweep ``i = 1..d``, each conditional drawn exactly by
:func:`sample_truncated_standard_normal`, so every update leaves the target
invariant (Geweke, 1991; used for the skew GP by Takeno et al., 2023). A sweep
costs ``O(d²)`` per chain (``O(d (d + k))`` for dense ``A``) but ``d``
sequential small steps, so it profits from many chains: up to a few hundred
chains cost little more per sweep than one.

Mixing: on the skew-GP orthant each coordinate has its own face, and a sweep
is nearly an independent draw unless ``Σ`` is strongly correlated. It is slow
when constraints chain coordinates together (e.g. a full ranking
``f_1 > f_2 > ... > f_n`` with a smooth kernel: each ``f_i`` is pinned between
its neighbours), where :class:`~prefbo.sampling.LinESS` may do better.

References:
    J. Geweke. Efficient simulation from the multivariate normal and
    Student-t distributions subject to linear constraints. 1991.
    S. Takeno et al. Towards practical preferential Bayesian optimization with
    skew Gaussian processes. ICML 2023.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from prefbo.sampling.base import TruncatedGaussianSampler

_LOG_HALF = -math.log(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def ndtri_exp(log_p: Tensor) -> Tensor:
    r"""Inverse of ``log Φ``: the ``x`` with ``log Φ(x) = log_p``, elementwise.

    Relative error about ``1e-15`` in float64 for ``log_p > -700`` (below
    ``1e-12`` out to ``-1e6``) and ``1e-7`` in float32: ``ndtri(exp(log_p))``
    in the lower half, ``-ndtri(-expm1(log_p))`` in the upper half (so ``log_p``
    near ``0`` keeps its precision), and, where ``exp(log_p)`` would leave the
    normal range (``log_p < log(tiny) + 7``: about ``-701`` in float64, ``-80``
    in float32), the asymptotic ``x ≈ -sqrt(t - log t - log 2π)``,
    ``t = -2 log_p``, polished by two Newton steps on ``log Φ``.

    Args:
        log_p: A tensor of log probabilities (``≤ 0``), any shape.

    Returns:
        A tensor of quantiles, shape and dtype of ``log_p``.
    """
    upper = log_p > _LOG_HALF
    p = torch.where(upper, -torch.expm1(log_p), torch.exp(log_p))
    x = torch.special.ndtri(p)
    x = torch.where(upper, -x, x)
    threshold = math.log(torch.finfo(log_p.dtype).tiny) + 7.0
    tail = log_p < threshold
    if log_p.device.type != "cpu" or bool(tail.any()):
        target = log_p.clamp(max=threshold)
        t = -2.0 * target
        y = -(t - t.log() - 2 * _HALF_LOG_2PI).sqrt()
        for _ in range(2):
            log_cdf = torch.special.log_ndtr(y)
            log_pdf = -0.5 * y * y - _HALF_LOG_2PI
            y = y - (log_cdf - target) * torch.exp(log_cdf - log_pdf)
        x = torch.where(tail, y, x)
    return x


def sample_truncated_standard_normal(
    lower: Tensor, upper: Tensor, uniform: Tensor
) -> Tensor:
    r"""Exact inverse-CDF draw of ``N(0, 1)`` restricted to ``[lower, upper]``.

    The interval is first reflected so that most of its mass lies at
    ``x ≤ 0`` (where ``Φ`` has full relative precision). The quantile
    ``Φ(a) + u (Φ(b) - Φ(a))`` is formed in log space as
    ``log Φ(b) + log1p(u · expm1(log Φ(a) - log Φ(b)))`` and inverted by
    :func:`ndtri_exp`, so intervals far in a tail (``[40, 41]``,
    ``[-1e3, -999]``) are sampled accurately. Intervals so narrow that the
    density changes by less than ``sqrt(eps)`` across them are sampled
    uniformly (which is then exact to that accuracy, while ``Φ`` may not
    resolve their ends, e.g. ``[-1e-8, 1e-8]`` in float32).

    Args:
        lower: ``batch_shape`` lower ends (``-inf`` allowed).
        upper: ``batch_shape`` upper ends (``inf`` allowed), ``≥ lower``.
        uniform: ``batch_shape`` uniforms on the open interval ``(0, 1)``.

    Returns:
        ``batch_shape`` draws in ``[lower, upper]``.
    """
    flip = (lower + upper) > 0
    a = torch.where(flip, -upper, lower)
    b = torch.where(flip, -lower, upper)
    log_a, log_b = torch.special.log_ndtr(a), torch.special.log_ndtr(b)
    log_p = log_b + torch.log1p(uniform * torch.expm1(log_a - log_b))
    x = ndtri_exp(log_p)
    # Where the density varies by less than sqrt(eps) across the interval, it
    # is uniform to that accuracy (and Φ could not tell the ends apart).
    width = b - a
    narrow = width * (1.0 + a.abs() + b.abs()) < math.sqrt(torch.finfo(a.dtype).eps)
    x = torch.where(narrow, a + uniform * width, x)
    x = torch.minimum(torch.maximum(x, a), b)
    return torch.where(flip, -x, x)


def sample_standard_normal_below(upper: Tensor, log_uniform: Tensor) -> Tensor:
    r"""Exact inverse-CDF draw of ``N(0, 1)`` restricted to ``(-inf, upper]``.

    Solves ``log Φ(x) = log u + log Φ(upper)`` with :func:`ndtri_exp`: one
    ``log Φ`` and one inversion, accurate in both tails.

    Args:
        upper: ``batch_shape`` upper ends.
        log_uniform: ``batch_shape`` values ``log u`` with ``u ~ U(0, 1)``.

    Returns:
        ``batch_shape`` draws, each ``≤ upper``.
    """
    x = ndtri_exp(torch.special.log_ndtr(upper) + log_uniform)
    return torch.minimum(x, upper)


class GibbsSampler(TruncatedGaussianSampler):
    r"""Coordinate-wise Gibbs sampler of a linearly truncated Gaussian.

    Same arguments and ``draw`` as :class:`~prefbo.sampling.LinESS` (see
    :class:`~prefbo.sampling.base.TruncatedGaussianSampler`); one transition is
    one sweep over all ``d`` coordinates. With axis-aligned constraints each
    coordinate's interval is fixed, and a one-sided interval (an orthant, a
    half-line) takes the cheaper :func:`sample_standard_normal_below`.
    """

    def _setup(self) -> None:
        k, d = self.A.shape
        precision = torch.cholesky_inverse(self.covariance_root)  # d x d
        diag = precision.diagonal().clone()
        self._sd = diag.rsqrt().tolist()
        self._inv_sd = diag.sqrt().tolist()
        # column i of -Λ / Λ_ii without its diagonal: x_i's conditional mean
        # (centred) is w @ weights[i]. Formed in place: two d x d at the peak.
        weights = precision.div_(diag).neg_().mT
        weights.fill_diagonal_(0.0)
        self._weights = weights.contiguous().unbind(0)  # d rows, one per coordinate
        del precision, weights
        if self._axis_aligned:
            cols, vals = self._axis_cols, self._axis_vals
            bound = self._b_tilde / vals  # k: w[cols] <= bound (vals > 0) or >=
            pos = vals > 0
            inf = torch.full((d,), math.inf, dtype=vals.dtype, device=vals.device)
            hi = inf.scatter_reduce(0, cols[pos], bound[pos], "amin")
            lo = (-inf).scatter_reduce(0, cols[~pos], bound[~pos], "amax")
            self._bounds = list(zip(lo.tolist(), hi.tolist(), strict=True))
        else:
            self._A_t = self.A.mT.contiguous()  # d x k, row i = column i of A
            self._rows = []
            for i in range(d):
                pos = (self.A[:, i] > 0).nonzero().squeeze(-1)
                neg = (self.A[:, i] < 0).nonzero().squeeze(-1)
                inv_pos, inv_neg = 1.0 / self.A[pos, i], 1.0 / self.A[neg, i]
                self._rows.append((pos, inv_pos, neg, inv_neg))

    def _interval(self, i: int, w: Tensor, slack: Tensor) -> tuple[Tensor, Tensor]:
        r"""Bounds on centred ``w_i`` from general constraints, each ``C``."""
        pos, inv_pos, neg, inv_neg = self._rows[i]
        wi = w[:, i]
        inf = torch.full_like(wi, math.inf)
        hi = wi + (slack[:, pos] * inv_pos).amin(-1) if len(pos) else inf
        lo = wi + (slack[:, neg] * inv_neg).amax(-1) if len(neg) else -inf
        return lo, hi

    def _update(self, i: int, w: Tensor, u: Tensor, log_u: Tensor, p: Tensor | None):
        r"""Draw centred ``w_i`` from its conditional; returns the new ``C`` values."""
        m = w @ self._weights[i]  # C, conditional mean of w_i
        s, inv_s = self._sd[i], self._inv_sd[i]
        if p is None:
            lo, hi = self._bounds[i]
            if lo == -math.inf and hi < math.inf:
                y = sample_standard_normal_below((hi - m).mul_(inv_s), log_u)
                return m.add_(y, alpha=s)
            if hi == math.inf and lo > -math.inf:
                y = sample_standard_normal_below((m - lo).mul_(inv_s), log_u)
                return m.sub_(y, alpha=s)
            lo, hi = lo - m, hi - m
        else:
            lo, hi = self._interval(i, w, self._b_tilde - p)
            lo, hi = lo - m, hi - m
        y = sample_truncated_standard_normal(lo * inv_s, hi * inv_s, u)
        return m.add_(y, alpha=s)

    def _advance(self, num_kept: int, stride: int) -> Tensor:
        C, d = self._w.shape
        total = num_kept * stride
        out = torch.empty(num_kept, C, d, dtype=self.A.dtype, device=self.A.device)
        w, p = self._w.clone(), None
        for step in range(1, total + 1):
            U = self._uniform(d, C)
            U, log_U = U.unbind(0), U.log().unbind(0)
            if not self._axis_aligned:
                p = w @ self._A_t  # C x k, refreshed every sweep against drift
            for i in range(d):
                new = self._update(i, w, U[i], log_U[i], p)
                if p is not None:
                    p.addcmul_((new - w[:, i]).unsqueeze(-1), self._A_t[i])
                w[:, i] = new
            if step % stride == 0:
                torch.add(w, self.mean, out=out[step // stride - 1])
            self._report(1)
        self._w = w
        self.lifetime_steps += total
        return out
