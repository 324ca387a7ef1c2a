r"""The posterior moments of a pair of designs, read once from a fitted model.

BoTorch's :class:`~botorch.acquisition.preference.AnalyticExpectedUtilityOfBestOption`
and prefbo's :class:`~prefbo.acquisition.PairwiseBALD` score a question
``(x1, x2)`` from three numbers of the joint posterior of ``(f(x1), f(x2))``:
``μ1 - μ2``, ``μ2`` and ``Var(f1 - f2)``. :class:`PairMoments` computes them
through ``model.posterior`` for any model. Every prefbo model that
:class:`~prefbo.loop.PreferentialOptimizer` fits predicts linearly in the
kernel,

    μ(x) = c + k(x, Z) α,   Cov(x, x') = k(x, x') + k(x, Z) M k(Z, x')

(plus GPyTorch's jitter for the variational GP), so :class:`KernelPairMoments`
computes them from ``α`` and ``M`` read once from the fitted model, without the
posterior objects; with a ``ScaleKernel(RBFKernel)`` (the default) the
kernel, the EUBO and its gradient are written out (:mod:`prefbo.kernels.rbf`).

:func:`pair_moments` picks the moments of a model through the dispatcher
:data:`GetPairMoments`, on the model's type, as BoTorch's
``draw_matheron_paths`` does: :class:`~prefbo.models.PairwiseLaplaceGP` and
:class:`~prefbo.models.PairwiseEPGP` (their Gaussian approximation's
triangular factors, the algebra of their own ``posterior``),
:class:`~prefbo.models.SkewGP` (its stored draws) and the one-utility
:class:`~prefbo.models.VariationalPreferenceGP` (its whitened ``q(u)``)
are registered here; any other model (BoTorch's ``PairwiseGP``, input
transforms, design masks, other variational strategies, …) gets
:class:`PairMoments`: same values, slower. A model class of one's own
registers its extractor with ``@GetPairMoments.register(MyModel)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

import gpytorch
import numpy as np
import scipy.special
import torch
from botorch.models.model import Model
from botorch.utils.dispatcher import Dispatcher
from gpytorch.means import ConstantMean, ZeroMean
from gpytorch.variational import VariationalStrategy
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from prefbo.kernels.rbf import scaled_rbf, scaled_rbf_hyperparameters
from prefbo.models.pairwise import PairwisePreferenceGP
from prefbo.models.skew import SkewGP
from prefbo.models.variational import VariationalPreferenceGP

SIGMA_JITTER = 1e-8  # BoTorch's clamp of Var(f1 - f2)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
# the array functions the written-out EUBO needs, for tensors and for arrays
_TORCH = SimpleNamespace(
    exp=torch.exp,
    sqrt=torch.sqrt,
    ndtr=torch.special.ndtr,
    where=torch.where,
    stack=torch.stack,
    clamp_min=torch.clamp_min,
)
_NUMPY = SimpleNamespace(
    exp=np.exp,
    sqrt=np.sqrt,
    ndtr=scipy.special.ndtr,
    where=np.where,
    stack=np.stack,
    clamp_min=np.maximum,
)

# model type -> its PairMoments; register a model class of one's own with
# ``@GetPairMoments.register(MyModel)`` and a function ``model -> PairMoments``
GetPairMoments = Dispatcher("get_pair_moments")


def eubo_from_moments(delta: Tensor, mean_second: Tensor | None, var: Tensor) -> Tensor:
    r"""BoTorch's analytic EUBO from the moments of a pair.

    Args:
        delta: ``μ1 - μ2``, any shape.
        mean_second: ``μ2`` (same shape), or ``None`` to leave it out (BoTorch's
            value with a previous winner as the second option).
        var: ``Var(f1 - f2)``, same shape; clamped at ``1e-8`` as BoTorch does.

    Returns:
        ``σ (φ(u) + u Φ(u)) [+ μ2]`` with ``σ = √var`` and ``u = delta / σ``.
    """
    sigma = var.clamp(min=SIGMA_JITTER).sqrt()
    u = delta / sigma
    pdf = _INV_SQRT_2PI * torch.exp(-0.5 * u * u)
    value = sigma * (pdf + u * torch.special.ndtr(u))
    return value if mean_second is None else value + mean_second


class PairMoments:
    r"""The moments analytic EUBO needs, through ``model.posterior``.

    Works for any one-output model whose posterior has ``mean`` and
    ``covariance_matrix`` (BoTorch's EUBO reads the same two). See
    :func:`pair_moments` for the fast path of prefbo's pairwise GPs.

    Args:
        model: A one-output preference model in eval mode.
    """

    def __init__(self, model: Model) -> None:
        self.model = model

    def pairs(self, X: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r"""``(μ1 - μ2, μ2, Var(f1 - f2))`` of ``... x 2 x d`` pairs (shape ``...``)."""
        post = self.model.posterior(X)
        mean = post.mean.squeeze(-1)  # ... x 2
        cov = post.covariance_matrix  # ... x 2 x 2
        var = cov[..., 0, 0] + cov[..., 1, 1] - cov[..., 0, 1] - cov[..., 1, 0]
        return mean[..., 0] - mean[..., 1], mean[..., 1], var

    def joint(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""Joint posterior ``(mean N, covariance N x N)`` at ``N x d`` designs."""
        post = self.model.posterior(X)
        return post.mean.reshape(-1), post.covariance_matrix

    def eubo(self, X: Tensor, add_second_mean: bool = True) -> Tensor:
        r"""EUBO of ``... x 2 x d`` pairs (``μ2`` left out if not
        ``add_second_mean``, BoTorch's value with a previous winner second)."""
        delta, mean2, var = self.pairs(X)
        return eubo_from_moments(delta, mean2 if add_second_mean else None, var)

    def eubo_and_grad(
        self, X: Tensor, add_second_mean: bool = True
    ) -> tuple[Tensor, Tensor]:
        r""":meth:`eubo` of ``... x 2 x d`` pairs and its gradient in ``X``."""
        with torch.enable_grad():
            X = X.detach().requires_grad_(True)
            values = self.eubo(X, add_second_mean)
            (grad,) = torch.autograd.grad(values.sum(), X)
        return values.detach(), grad


class KernelPairMoments(PairMoments):
    r"""Moments of a posterior that is linear in the kernel.

    ``μ(x) = c + k(x, Z) α`` and ``Cov(x, x') = k(x, x') + j·[x = x'] +
    k(x, Z) M k(Z, x')``, with ``M`` either explicit or, for prefbo's pairwise
    GPs, ``(L C)⁻ᵀ (L C)⁻¹ - L⁻ᵀ L⁻¹`` from the two triangular factors the
    model predicts with (same algebra as the model). ``Var(f1 - f2)`` needs
    only ``dk = k(Z, x1) - k(Z, x2)``: ``k(x1, x1) + k(x2, x2) - 2 k(x1, x2) +
    2 j + dkᵀ M dk``. The kernel is evaluated in closed form, with a
    written-out gradient, for a plain ``ScaleKernel(RBFKernel)``, and through
    ``covar_module`` (autograd) otherwise. An extractor registered with
    :data:`GetPairMoments` for a model of one's own that predicts this way
    can return one.

    Args:
        model: The model (for its ``covar_module``).
        Z: ``n x d`` inputs of the kernel expansion (transformed).
        alpha: ``n`` weights of the mean.
        factors: ``2 x n x n`` lower factors ``[L, L C]`` (or ``None``).
        M: ``n x n`` symmetric matrix (or ``None``).
        dense_M: With ``factors``: a function returning ``M`` as a matrix,
            for the NumPy evaluation (:meth:`eubo_and_grad` on arrays).
        mean_constant: ``c``.
        jitter: ``j``, added to every variance (GPyTorch's variational
            strategies add it).
    """

    def __init__(
        self,
        model: Model,
        Z: Tensor,
        alpha: Tensor,
        *,
        factors: Tensor | None = None,
        M: Tensor | None = None,
        dense_M: Callable[[], Tensor] | None = None,
        mean_constant: float = 0.0,
        jitter: float = 0.0,
    ) -> None:
        super().__init__(model)
        self.Z, self.alpha, self.factors, self.M = Z, alpha, factors, M
        self.mean_constant, self.jitter = mean_constant, jitter
        self._dense_M = dense_M
        self._parts: dict[str, SimpleNamespace] = {}  # per backend, see _parts_for
        self.rbf = scaled_rbf_hyperparameters(model.covar_module)
        if self.rbf is not None:
            Zs = self.Z / self.rbf[1]
            # squared distances by expansion around the inputs' centre
            self.centre = Zs.mean(-2)
            self.Zs, self.Zc = Zs, Zs - self.centre  # n x d
            self.Zc_sq = self.Zc.square().sum(-1)  # n

    def _kernel(self, X1: Tensor, X2: Tensor | None = None) -> Tensor:
        r"""``k(X1, X2)`` of ``... x m x d`` points (``X2`` the expansion's
        inputs ``Z`` if ``None``): ``... x m x n``."""
        if self.rbf is None:
            with gpytorch.settings.lazily_evaluate_kernels(False):
                X2 = self.Z if X2 is None else X2
                return self.model.covar_module(X1, X2).to_dense()
        scale, ls = self.rbf
        A = X1 / ls - self.centre
        if X2 is None:
            B, B_sq = self.Zc, self.Zc_sq
        else:
            B = X2 / ls - self.centre
            B_sq = B.square().sum(-1)
        return scaled_rbf(A, B, B_sq, scale)

    def _solve(self, cols: Tensor) -> Tensor:
        r"""``[L⁻¹ K; (L C)⁻¹ K]`` for ``n x B`` columns: ``2 x n x B``."""
        n = self.Z.shape[-2]
        rhs = cols.unsqueeze(0).expand(2, n, cols.shape[-1])
        return torch.linalg.solve_triangular(self.factors, rhs, upper=False)

    def _reduce(self, dk: Tensor, grad: bool = False) -> tuple[Tensor, Tensor | None]:
        r"""``dkᵀ M dk`` of ``B x n`` rows, and ``M dk`` (``B x n``) if ``grad``."""
        if self.M is not None:
            Mdk = dk @ self.M
            return (Mdk * dk).sum(-1), Mdk
        sol = self._solve(dk.transpose(-1, -2))  # 2 x n x B
        red = sol[1].square().sum(-2) - sol[0].square().sum(-2)  # B
        if not grad:
            return red, None
        back = torch.linalg.solve_triangular(
            self.factors.transpose(-1, -2), sol, upper=True
        )  # 2 x n x B
        return red, (back[1] - back[0]).transpose(-1, -2)

    def pairs(self, X: Tensor) -> tuple[Tensor, Tensor, Tensor]:  # noqa: D102
        batch, n = X.shape[:-2], self.Z.shape[-2]
        Ks = self._kernel(X)  # ... x 2 x n
        mean = self.mean_constant + Ks @ self.alpha  # ... x 2
        red, _ = self._reduce((Ks[..., 0, :] - Ks[..., 1, :]).reshape(-1, n))
        if self.rbf is not None:  # Var0(f1 - f2) = 2 s (1 - exp(-r²/2))
            scale, ls = self.rbf
            r2 = ((X[..., 0, :] - X[..., 1, :]) / ls).square().sum(-1)
            prior = 2.0 * scale * (1.0 - torch.exp(-0.5 * r2))
        else:
            with gpytorch.settings.lazily_evaluate_kernels(False):
                K = self.model.covar_module(X).to_dense()  # ... x 2 x 2
            prior = K[..., 0, 0] + K[..., 1, 1] - K[..., 0, 1] - K[..., 1, 0]
        var = prior + 2.0 * self.jitter + red.reshape(batch)
        return mean[..., 0] - mean[..., 1], mean[..., 1], var

    def eubo_and_grad(  # noqa: D102
        self, X: Tensor, add_second_mean: bool = True
    ) -> tuple[Tensor, Tensor]:
        if self.rbf is None:
            return super().eubo_and_grad(X, add_second_mean)
        return self._written_out(X, add_second_mean, self._parts_for("torch"), _TORCH)

    @property
    def numpy_ready(self) -> bool:
        r"""Whether :meth:`numpy_eubo_and_grad` is available: the closed-form
        kernel, float64 on the CPU, and ``M`` as a matrix."""
        return (
            self.rbf is not None
            and self.Z.device.type == "cpu"
            and self.Z.dtype == torch.float64
            and (self.M is not None or self._dense_M is not None)
        )

    def numpy_eubo_and_grad(
        self, X: np.ndarray, add_second_mean: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        r""":meth:`eubo_and_grad` of a float64 ``b x 2 x d`` array, in NumPy:
        the same formula (to rounding), without torch's per-operation
        overhead, for optimisers that work on arrays (needs
        :attr:`numpy_ready`)."""
        return self._written_out(X, add_second_mean, self._parts_for("numpy"), _NUMPY)

    def _parts_for(self, backend: str) -> SimpleNamespace:
        r"""The arrays :meth:`_written_out` reads, built once per backend:
        tensors (``M`` as given: ``None`` means the factors' solves), or
        NumPy arrays (``M`` always a matrix)."""
        parts = self._parts.get(backend)
        if parts is None:
            scale, ls = self.rbf
            M = self.M
            if backend == "numpy" and M is None:
                M = self._dense_M()
            parts = SimpleNamespace(
                scale=scale,
                ls=ls,
                centre=self.centre,
                Zc=self.Zc,
                Zc_sq=self.Zc_sq,
                Zs=self.Zs,
                alpha=self.alpha,
                M=M,
                constant=self.mean_constant,
                jitter=self.jitter,
            )
            if backend == "numpy":
                parts = SimpleNamespace(
                    **{
                        k: v.detach().cpu().numpy() if isinstance(v, Tensor) else v
                        for k, v in vars(parts).items()
                    }
                )
            self._parts[backend] = parts
        return parts

    def _written_out(self, X, add_second_mean: bool, p: SimpleNamespace, xp):
        r"""EUBO and its gradient, written out (``p``: the moments' arrays,
        ``xp``: their array functions, torch's or NumPy's): autograd's graph
        costs more than the arithmetic at these sizes."""
        shape, d = X.shape[:-2], X.shape[-1]
        Xs = (X / p.ls).reshape(-1, 2, d)  # B x 2 x d
        Ks = scaled_rbf(Xs - p.centre, p.Zc, p.Zc_sq, p.scale)  # B x 2 x n
        mean = p.constant + Ks @ p.alpha  # B x 2
        dk = Ks[:, 0] - Ks[:, 1]  # B x n
        if p.M is not None:
            Mdk = dk @ p.M
            red = (Mdk * dk).sum(-1)
        else:
            red, Mdk = self._reduce(dk, grad=True)  # B, B x n
        d01 = Xs[:, 0] - Xs[:, 1]  # B x d
        e01 = xp.exp(-0.5 * (d01 * d01).sum(-1))  # B
        var = 2.0 * p.scale * (1.0 - e01) + 2.0 * p.jitter + red
        sigma = xp.sqrt(xp.clamp_min(var, SIGMA_JITTER))
        u = (mean[:, 0] - mean[:, 1]) / sigma
        pdf = _INV_SQRT_2PI * xp.exp(-0.5 * u * u)
        cdf = xp.ndtr(u)
        values = sigma * (pdf + u * cdf)
        g_m1 = -cdf
        if add_second_mean:
            values = values + mean[:, 1]
            g_m1 = g_m1 + 1.0
        # d EUBO / d σ = φ(u), so d EUBO / d var = φ(u) / (2 σ) (0 when clamped)
        g_var = xp.where(var > SIGMA_JITTER, pdf / (2.0 * sigma), 0.0)
        g_dk = (2.0 * g_var)[..., None] * Mdk  # d EUBO / d dk, B x n
        G0 = cdf[..., None] * p.alpha + g_dk
        G1 = g_m1[..., None] * p.alpha - g_dk
        GK = xp.stack([G0, G1], -2) * Ks  # B x 2 x n: d EUBO / d log k
        # d k(x, z) / d xs = -k(x, z) (xs - zs)
        g_Xs = GK @ p.Zs - GK.sum(-1)[..., None] * Xs  # B x 2 x d
        g_prior = (2.0 * p.scale * g_var * e01)[..., None] * d01  # B x d
        g_Xs = g_Xs + xp.stack([g_prior, -g_prior], -2)
        return values.reshape(shape), (g_Xs / p.ls).reshape(shape + (2, d))

    def joint(self, X: Tensor) -> tuple[Tensor, Tensor]:  # noqa: D102
        Ks = self._kernel(X)  # N x n
        cov = self._kernel(X, X)
        if self.M is not None:
            cov = cov + Ks @ self.M @ Ks.transpose(-1, -2)
        else:
            u, w = self._solve(Ks.transpose(-1, -2)).unbind(0)  # n x N each
            cov = cov - u.transpose(-1, -2) @ u + w.transpose(-1, -2) @ w
        cov = cov + self.jitter * torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        mean = self.mean_constant + Ks @ self.alpha
        return mean, 0.5 * (cov + cov.transpose(-1, -2))


def pair_moments(model: Model) -> PairMoments:
    r"""The moments analytic EUBO needs, for ``model``.

    Dispatches on the model's type through :data:`GetPairMoments`.

    Args:
        model: A one-output preference model (prefbo's or BoTorch's).

    Returns:
        A :class:`PairMoments`: ``pairs(X)`` maps ``... x 2 x d`` pairs to
        ``(μ1 - μ2, μ2, Var(f1 - f2))`` and ``joint(X)`` ``N x d`` designs to
        their joint posterior mean and covariance, both differentiable in
        ``X``, equal to ``model.posterior``'s up to rounding: read once from
        the fitted model (:class:`KernelPairMoments`) for prefbo's pairwise
        GPs (unbatched, without design masks or input transforms), skew GPs
        (without input transforms) and one-utility variational GPs
        (GPyTorch's ``VariationalStrategy``, zero or constant mean); through
        ``model.posterior`` for any other model.
    """
    return GetPairMoments(model)


@GetPairMoments.register(object)
def _generic_moments(model: Model) -> PairMoments:
    r"""Any model: through ``model.posterior``."""
    return PairMoments(model)


@GetPairMoments.register(PairwisePreferenceGP)
def _pairwise_gp_moments(model: PairwisePreferenceGP) -> PairMoments:
    r"""From the Gaussian approximation of an unbatched prefbo pairwise GP
    without design mask or input transform (the algebra of its ``posterior``)."""
    if (
        model.datapoints is None
        or model.datapoints.ndim != 2
        or model.design_mask is not None
        or getattr(model, "input_transform", None) is not None
    ):
        return PairMoments(model)
    with torch.no_grad():
        state = model.approximation
        stiff_M = state.projected_reduction()  # no factor C of a stiff curvature
        if stiff_M is not None:
            Z = model.datapoints.detach()
            return KernelPairMoments(model, Z, state.alpha.detach(), M=stiff_M)

        def dense_M() -> Tensor:
            # (L C)⁻ᵀ (L C)⁻¹ - L⁻ᵀ L⁻¹ = -(K + Ŵ⁻¹)⁻¹ = Ŵ Σ Ŵ - Ŵ: no K⁻¹
            # (whose entries grow with K's conditioning), bounded by Ŵ's
            with torch.no_grad():
                W = state.laplacian()
                M = W @ state.posterior_covariance() @ W - W
                return 0.5 * (M + M.mT)

        return KernelPairMoments(
            model,
            model.datapoints.detach(),  # no input transform: the model's inputs
            state.alpha.detach(),
            factors=state.predictive_factors().detach(),
            dense_M=dense_M,
        )


@GetPairMoments.register(SkewGP)
def _skew_moments(model: SkewGP) -> PairMoments:
    r"""From a skew GP's stored draws ``w_s`` (``S x n``) and ``Q``: mean
    ``k(x, Z) w̄`` and ``M = Cov(w) - Q`` (``Cov`` with ``S - 1``, as
    :class:`~prefbo.posteriors.SkewGPPosterior`'s covariance)."""
    if model.weights is None or getattr(model, "input_transform", None) is not None:
        return PairMoments(model)
    with torch.no_grad():
        W = model.weights.detach()
        centred = W - W.mean(0)
        cov = centred.transpose(-1, -2) @ centred / max(W.shape[0] - 1, 1)
        M = cov - model.Q.detach()
        return KernelPairMoments(
            model, model.datapoints.detach(), W.mean(0), M=0.5 * (M + M.mT)
        )


@GetPairMoments.register(VariationalPreferenceGP)
def _variational_moments(model: VariationalPreferenceGP) -> PairMoments:
    r"""From a one-utility variational GP's whitened ``q(v) = N(m, S)``:
    with ``L Lᵀ = K_ZZ + jitter``, mean ``c + k(x, Z) L⁻ᵀ m`` and
    ``M = L⁻ᵀ (S - I) L⁻¹`` (GPyTorch's ``VariationalStrategy``)."""
    strategy = model.variational_strategy
    mean_module = model.mean_module
    if (
        model.num_outputs != 1
        or type(strategy) is not VariationalStrategy
        or type(mean_module) not in (ZeroMean, ConstantMean)
        or len(getattr(mean_module, "batch_shape", ())) != 0
    ):
        return PairMoments(model)
    with torch.no_grad():
        Z = strategy.inducing_points.detach()
        jitter = float(strategy.jitter_val)
        with gpytorch.settings.lazily_evaluate_kernels(False):
            K = model.covar_module(Z).to_dense()
        L = psd_safe_cholesky(K + jitter * torch.eye(Z.shape[-2]).to(K))
        q_v = strategy.variational_distribution
        Lt = L.transpose(-1, -2)
        alpha = torch.linalg.solve_triangular(
            Lt, q_v.mean.unsqueeze(-1), upper=True
        ).squeeze(-1)
        S_minus_I = q_v.covariance_matrix - torch.eye(Z.shape[-2]).to(K)
        A = torch.linalg.solve_triangular(Lt, S_minus_I, upper=True)  # L⁻ᵀ (S - I)
        M = torch.linalg.solve_triangular(Lt, A.transpose(-1, -2), upper=True)
        constant = 0.0
        if isinstance(mean_module, ConstantMean):
            constant = float(mean_module.constant.detach().reshape(()))
        return KernelPairMoments(
            model,
            Z,
            alpha,
            M=0.5 * (M + M.transpose(-1, -2)),
            mean_constant=constant,
            jitter=jitter,
        )
