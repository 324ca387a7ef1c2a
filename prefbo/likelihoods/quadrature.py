r"""Gaussian expectations of log-likelihoods for variational inference.

The evidence lower bound of a variational preference GP needs, for every
answer ``k``, ``E_q[log p(answer_k | f)]`` under the Gaussian marginal ``q``
of the few latent values the answer touches. This module holds
the pieces every prefbo likelihood shares:

- :func:`latent_moments` gathers, per answer, the mean and covariance of the
  latent values it touches from the moments at the designs;
- :func:`gaussian_expectation_1d` integrates a function of one Gaussian
  scalar by Gauss–Hermite quadrature (answers that touch one utility
  difference);
- :func:`gaussian_expectation_qmc` integrates a function of a Gaussian vector
  by randomised (scrambled, seeded) quasi-Monte Carlo: Sobol points mapped by
  ``ndtri`` and the covariance's Cholesky factor.

The module knows no likelihood: likelihoods pass their log-probability as a
function.

Moments at the designs come as ``mean``: ``batch_shape x n x d`` (``d``
latent values per design: utilities, labels) and ``covariance`` in one of
three layouts, told apart by shape:

- ``batch_shape x n x d`` (exactly the mean's shape): marginal variances
  only (latents independent);
- ``batch_shape x n x d x d``: the covariance of a design's ``d`` latents,
  designs independent of each other (enough for label likelihoods, whose
  answers touch one design);
- ``batch_shape x (n·d) x (n·d)``: the full joint, design-major (latent
  ``(i, j)`` at index ``i·d + j``), the layout of GPyTorch's interleaved
  ``MultitaskMultivariateNormal``; for ``d = 1`` the ordinary ``n x n``
  covariance. Its batch shape broadcasts with the mean's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from linear_operator import to_dense
from linear_operator.operators import LinearOperator
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.data.validation import broadcast_batches
from prefbo.exceptions import InputDataError, InputTypeError, NumericalError
from prefbo.utils.checks import check_int


@functools.lru_cache(maxsize=32)
def _hermegauss(num_points: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    import numpy as np

    x, w = np.polynomial.hermite_e.hermegauss(num_points)
    return tuple(x.tolist()), tuple((w / w.sum()).tolist())


def gauss_hermite(
    num_points: int, dtype: torch.dtype, device: torch.device | str | None = None
) -> tuple[Tensor, Tensor]:
    r"""Nodes and weights for ``E[h(Z)] ≈ Σ_j w_j h(x_j)``, ``Z ~ N(0, 1)``.

    Args:
        num_points: Number of nodes ``P`` (exact for polynomials of degree
            ``< 2P``).
        dtype: Floating dtype of the result.
        device: Device of the result.

    Returns:
        ``(nodes, weights)``, two ``P`` tensors; the weights sum to one.
    """
    x, w = _hermegauss(check_int("num_points", num_points, 1))
    return (
        torch.tensor(x, dtype=dtype, device=device),
        torch.tensor(w, dtype=dtype, device=device),
    )


def sobol_normal(
    num_samples: int,
    dim: int,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""Scrambled Sobol points mapped to standard normals by ``ndtri``.

    Args:
        num_samples: Number of points ``S`` (a power of two balances best).
        dim: Dimension ``p``.
        seed: Scrambling seed; the same seed gives the same points, so an
            objective built on them is a deterministic function of its
            parameters.
        dtype: Floating dtype of the result.
        device: Device of the result.

    Returns:
        An ``S x p`` tensor of quasi-random standard-normal draws.
    """
    u = sobol_uniform(num_samples, dim, seed=seed, device=device)
    return torch.special.ndtri(u).to(dtype=dtype, device=device)


def sobol_uniform(
    num_samples: int,
    dim: int,
    *,
    seed: int = 0,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""Scrambled Sobol points in the open unit cube, float64.

    Args:
        num_samples: Number of points ``S``.
        dim: Dimension ``p``.
        seed: Scrambling seed.
        device: Device of the result.

    Returns:
        An ``S x p`` float64 tensor with entries in ``[2⁻³¹, 1 − 2⁻³¹]``.
    """
    num_samples = check_int("num_samples", num_samples, 1)
    u = SobolEngine(dimension=dim, scramble=True, seed=seed).draw(
        num_samples, dtype=torch.float64
    )
    eps = 0.5 / 2**30
    return u.clamp(eps, 1.0 - eps).to(device=device)


def _covariance_layout(mean: Tensor, covariance: Tensor) -> str:
    n, d = mean.shape[-2:]
    if covariance.shape == mean.shape:
        return "variance"
    if covariance.ndim == mean.ndim + 1 and covariance.shape[-3:] == (n, d, d):
        return "per_design"
    if covariance.ndim >= 2 and covariance.shape[-2:] == (n * d, n * d):
        return "joint"
    raise InputDataError(
        "covariance must have the mean's shape batch_shape x n x d (variances), "
        "batch_shape x n x d x d (per design) or batch_shape x n*d x n*d (joint) "
        f"for a mean of shape batch_shape x n x d = {tuple(mean.shape)}; got "
        f"{tuple(covariance.shape)}."
    )


def latent_moments(
    mean: Tensor,
    covariance: Tensor | LinearOperator,
    designs: Tensor,
    outputs: Tensor,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Mean and covariance of the latent values each answer touches.

    Answer ``k`` touches the ``p`` latents ``f[designs[k, j], outputs[k, j]]``.

    Args:
        mean: A ``batch_shape x n x d`` tensor of means at the designs.
        covariance: Their covariance in one of the layouts of the module
            docstring (a ``LinearOperator`` is densified).
        designs: A ``k x p`` long tensor of design indices (valid indices
            everywhere, also on masked slots).
        outputs: A ``k x p`` long tensor of latent indices in ``[0, d)``.
        mask: An optional ``k x p`` bool tensor, ``False`` on padding slots;
            those get mean 0 and unit variance, independent of the rest.

    Returns:
        ``(mean_k, covariance_k)`` of shapes ``batch_shape x k x p`` and
        ``batch_shape x k x p x p``.
    """
    covariance = to_dense(covariance)
    layout = _covariance_layout(mean, covariance)
    d = mean.shape[-1]
    m = mean[..., designs, outputs]  # batch x k x p
    if layout == "joint":
        flat = designs * d + outputs  # k x p
        c = covariance[..., flat.unsqueeze(-1), flat.unsqueeze(-2)]  # batch x k x p x p
    elif layout == "per_design":
        c = covariance[
            ..., designs.unsqueeze(-1), outputs.unsqueeze(-1), outputs.unsqueeze(-2)
        ]  # batch x k x p x p
        same = designs.unsqueeze(-1) == designs.unsqueeze(-2)
        c = torch.where(same, c, torch.zeros_like(c))
    else:
        v = covariance[..., designs, outputs]  # batch x k x p
        same = (designs.unsqueeze(-1) == designs.unsqueeze(-2)) & (
            outputs.unsqueeze(-1) == outputs.unsqueeze(-2)
        )
        c = torch.where(same, v.unsqueeze(-1).expand(v.shape + v.shape[-1:]), 0.0)
    if mask is not None:
        m = torch.where(mask, m, torch.zeros_like(m))
        both = mask.unsqueeze(-1) & mask.unsqueeze(-2)
        eye = torch.eye(mask.shape[-1], dtype=c.dtype, device=c.device)
        c = torch.where(both, c, eye)
    batch = torch.broadcast_shapes(m.shape[:-2], c.shape[:-3])
    return m.expand(batch + m.shape[-2:]), c.expand(batch + c.shape[-3:])


def single_output_covariance(mean: Tensor, covariance: Tensor) -> Tensor:
    r"""Read the covariance of ``batch_shape x n`` single-utility means.

    A covariance whose last two dimensions are ``n x n`` is a joint
    covariance (its batch shape broadcasts with the mean's); one of the
    mean's shape ``batch_shape x n`` holds variances. When both readings fit
    (the mean's last batch size is ``n`` and the covariance has the mean's
    shape, e.g. a batch of 3 means over 3 designs and a ``3 x 3`` matrix)
    the shape says nothing, and an error asks for an unambiguous layout.

    Args:
        mean: A ``batch_shape x n`` tensor.
        covariance: A ``batch_shape x n x n`` joint covariance or a
            ``batch_shape x n`` tensor of variances.

    Returns:
        The covariance in a layout of :func:`latent_moments` for the mean
        ``batch_shape x n x 1``: variances ``batch_shape x n x 1`` or the
        joint ``batch_shape x n x n``.
    """
    n = mean.shape[-1]
    variances = covariance.shape == mean.shape
    joint = covariance.ndim >= 2 and covariance.shape[-2:] == (n, n)
    if variances and joint:
        raise InputDataError(
            f"covariance of shape {tuple(covariance.shape)} is ambiguous for a mean "
            f"of shape {tuple(mean.shape)} (batch_shape x n with n={n}): it reads "
            "both as variances and as an n x n joint covariance. Pass variances as "
            "torch.diag_embed(covariance), or give the joint covariance the mean's "
            f"batch shape, covariance.expand({tuple(mean.shape) + (n,)})."
        )
    if variances:
        return covariance.unsqueeze(-1)  # batch x n x 1 variances
    if not joint:
        raise InputDataError(
            "covariance must be a batch_shape x n x n covariance or "
            f"batch_shape x n variances for a mean of shape {tuple(mean.shape)}; got "
            f"{tuple(covariance.shape)}."
        )
    broadcast_batches("mean", mean.shape[:-1], "covariance", covariance.shape[:-2])
    return covariance


def difference_moments(
    mean: Tensor, covariance: Tensor | LinearOperator, comparisons: Tensor
) -> tuple[Tensor, Tensor]:
    r"""Moments of the utility differences ``f_w - f_l`` of ``[w, l]`` rows.

    Args:
        mean: A ``batch_shape x n`` tensor of utility means at the designs.
        covariance: A ``batch_shape x n x n`` covariance (or
            ``LinearOperator``), or a ``batch_shape x n`` tensor of variances
            (designs independent).
        comparisons: An ``m x 2`` long tensor of ``[w, l]`` rows.

    Returns:
        ``(mean_diff, var_diff)``, two ``batch_shape x m`` tensors:
        ``μ_w - μ_l`` and ``v_w + v_l - 2 c_wl`` (clamped at zero).
    """
    covariance = single_output_covariance(mean, to_dense(covariance))
    m, c = latent_moments(
        mean.unsqueeze(-1), covariance, comparisons, torch.zeros_like(comparisons)
    )
    mean_diff = m[..., 0] - m[..., 1]
    var_diff = c[..., 0, 0] + c[..., 1, 1] - 2.0 * c[..., 0, 1]
    return mean_diff, var_diff.clamp_min(0.0)


def gaussian_expectation_1d(
    fn: Callable[[Tensor], Tensor],
    mean: Tensor,
    var: Tensor,
    num_points: int = 20,
    log_mean_exp: bool = False,
) -> Tensor:
    r"""``E[fn(X)]`` (or ``log E[exp fn(X)]``), ``X ~ N(mean, var)``, elementwise.

    Args:
        fn: Maps a ``P x batch_shape x k`` tensor of values to a tensor of the
            same shape (nodes lead, so per-answer tensors broadcast).
        mean: A ``batch_shape x k`` tensor.
        var: A ``batch_shape x k`` tensor of variances (``≥ 0``).
        num_points: Number of Gauss–Hermite nodes ``P``.
        log_mean_exp: Return ``log E[exp fn(X)]`` (a log marginal probability
            when ``fn`` is a log-likelihood) instead of ``E[fn(X)]``.

    Returns:
        A ``batch_shape x k`` tensor.

    Note:
        Plain Gauss–Hermite places its nodes by ``X``'s own moments. With
        ``log_mean_exp=True`` and a log-likelihood that falls steeply (a link
        ``F(x/s)`` with ``s`` well below ``X``'s standard deviation), the mass
        of ``exp(fn(x)) N(x; μ, var)`` sits in a narrow peak between the
        nodes: a narrow peak with a heavy one-sided tail, which neither plain
        nor Laplace-centred Gauss–Hermite resolves with few nodes, and the
        result is too low for unlikely answers. prefbo's likelihoods use
        closed forms where they exist (probit links:
        ``log Φ(μ/√(s² + var))``); the logit link has none and uses this rule
        (:meth:`~prefbo.likelihoods.PairwiseLikelihood.log_predictive_probability`,
        40 nodes), accurate while ``√var`` is a few ``s``.
    """
    nodes, weights = gauss_hermite(num_points, mean.dtype, mean.device)
    shape = (-1,) + (1,) * mean.ndim
    x = mean + var.clamp_min(0.0).sqrt() * nodes.view(shape)  # P x batch x k
    values = fn(x)
    if log_mean_exp:
        return torch.logsumexp(values + weights.log().view(shape), dim=0)
    return (values * weights.view(shape)).sum(0)


def psd_cholesky(covariance: Tensor) -> Tensor:
    r"""Cholesky factor of ``batch x p x p`` PSD matrices, adding jitter if needed."""
    dtype = covariance.dtype
    rel = 1e-10 if dtype == torch.float64 else 1e-6
    floor = torch.finfo(dtype).tiny ** 0.5
    scale = covariance.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(floor)
    eye = torch.eye(covariance.shape[-1], dtype=dtype, device=covariance.device)
    for _ in range(4):
        jitter = (rel * scale)[..., None, None] * eye
        chol, info = torch.linalg.cholesky_ex(covariance + jitter)
        if not bool((info > 0).any()):
            return chol
        rel *= 100.0
    raise NumericalError(
        "covariance of the latents touched by an answer is not positive "
        f"semi-definite even with jitter {rel / 100.0:.1e} x mean variance; check "
        "that covariance is symmetric PSD."
    )


def gaussian_expectation_qmc(
    fn: Callable[[Tensor], Tensor],
    mean: Tensor,
    covariance: Tensor,
    num_samples: int = 256,
    seed: int = 0,
    log_mean_exp: bool = False,
) -> Tensor:
    r"""``E[fn(X)]`` (or ``log E[exp fn(X)]``), ``X ~ N(mean, covariance)``, by QMC.

    Args:
        fn: Maps an ``S x batch_shape x k x p`` tensor of draws to an
            ``S x batch_shape x k`` tensor.
        mean: A ``batch_shape x k x p`` tensor.
        covariance: A ``batch_shape x k x p x p`` PSD tensor.
        num_samples: Number of Sobol points ``S``.
        seed: Scrambling seed (fixed by default: deterministic objective).
        log_mean_exp: Return ``log E[exp fn(X)]`` instead of ``E[fn(X)]``.

    Returns:
        A ``batch_shape x k`` tensor.
    """
    chol = psd_cholesky(covariance)
    eps = sobol_normal(
        num_samples, mean.shape[-1], seed=seed, dtype=mean.dtype, device=mean.device
    )  # S x p
    draws = mean + torch.einsum("...ij,sj->s...i", chol, eps)  # S x batch x k x p
    values = fn(draws)  # S x batch x k
    if log_mean_exp:
        return torch.logsumexp(values, dim=0) - math.log(num_samples)
    return values.mean(0)


def distribution_moments(
    function_dist: MultivariateNormal,
) -> tuple[Tensor, Tensor]:
    r"""Mean and dense covariance of a GPyTorch latent distribution.

    Args:
        function_dist: A ``MultivariateNormal`` over ``batch_shape x n`` values
            or a ``MultitaskMultivariateNormal`` over ``batch_shape x n x t``
            (interleaved or not).

    Returns:
        ``(mean, covariance)``: ``batch_shape x n`` and ``batch_shape x n x n``
        for a ``MultivariateNormal``; ``batch_shape x n x t`` and the
        design-major joint ``batch_shape x (n·t) x (n·t)`` for a multitask one.
    """
    if isinstance(function_dist, MultitaskMultivariateNormal):
        mean = function_dist.mean  # batch x n x t
        cov = to_dense(function_dist.lazy_covariance_matrix)
        n, t = mean.shape[-2:]
        if not function_dist._interleaved:
            batch = cov.shape[:-2]
            cov = (
                cov.reshape(batch + (t, n, t, n))
                .permute(*range(len(batch)), -3, -4, -1, -2)
                .reshape(batch + (n * t, n * t))
            )  # batch x (n t) x (n t), design-major
        return mean, cov
    if isinstance(function_dist, MultivariateNormal):
        return function_dist.mean, to_dense(function_dist.lazy_covariance_matrix)
    raise InputTypeError(
        "function_dist must be a gpytorch MultivariateNormal or "
        f"MultitaskMultivariateNormal; got {type(function_dist).__name__}."
    )
