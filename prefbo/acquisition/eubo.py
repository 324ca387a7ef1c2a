r"""Fast maximisation of the analytic EUBO over a pair of designs.

BoTorch's :class:`~botorch.acquisition.preference.AnalyticExpectedUtilityOfBestOption`
scores a question ``(x1, x2)`` by the expected utility of its better option,

    EUBO(x1, x2) = E[max(f1, f2)] = σ (φ(u) + u Φ(u)) + μ2,
    u = (μ1 - μ2) / σ,   σ² = Var(f1 - f2) (clamped at 1e-8),

under the joint posterior of ``(f1, f2) = (f(x1), f(x2))``; with a previous
winner ``w`` fixed, the question is ``(x, w)`` and BoTorch drops the constant
``μ_w``: ``σ (φ(u) + u Φ(u))`` with ``u = (μ_x - μ_w) / σ``.

:func:`maximize_eubo` maximises exactly this quantity without BoTorch's
``optimize_acqf`` (scipy L-BFGS-B over all restarts stacked into one
problem), in three batched steps:

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

For the models of :class:`~prefbo.loop.PreferentialOptimizer` the moments are
computed without the posterior objects (:func:`pair_moments`): every one of
them predicts linearly in the kernel, ``μ(x) = c + k(x, Z) α`` and
``Cov(x, x') = k(x, x') + k(x, Z) M k(Z, x')`` (plus GPyTorch's jitter for
the variational GP), with ``α`` and ``M`` read once from the fitted model —
:class:`~prefbo.models.PairwiseLaplaceGP` and
:class:`~prefbo.models.PairwiseEPGP` (their cached triangular factors, the
algebra of their own ``posterior``), :class:`~prefbo.models.SkewGP` (its
stored draws) and the one-utility
:class:`~prefbo.models.VariationalPreferenceGP` (its whitened ``q(u)``). With
a ``ScaleKernel(RBFKernel)`` (the default) the kernel and the gradient are
written out. Any other model (BoTorch's ``PairwiseGP``, input transforms,
design masks, other variational strategies, …) goes through
``model.posterior`` and autograd: same values, slower.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

import gpytorch
import numpy as np
import scipy.special
import torch
from botorch.acquisition import AcquisitionFunction
from botorch.models.model import Model
from botorch.utils.transforms import t_batch_mode_transform
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.means import ConstantMean, ZeroMean
from gpytorch.variational import VariationalStrategy
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.data.validation import check_bounds, check_int
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.inference.laplacian import comparison_laplacian
from prefbo.models.pairwise import PairwisePreferenceGP
from prefbo.models.skew import SkewGP
from prefbo.models.variational import VariationalPreferenceGP

SIGMA_JITTER = 1e-8  # BoTorch's clamp of Var(f1 - f2)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
# relative Levenberg–Marquardt damping of the steps tried in parallel (0: Newton)
_DAMPING = (0.0, 1e-6, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0)
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
# starts closer than this (root-mean-square per unit-box coordinate) count as one
_START_RADIUS = 0.2


# ---------------------------------------------------------------- closed form
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


class _KernelMoments(PairMoments):
    r"""Moments of a posterior that is linear in the kernel.

    ``μ(x) = c + k(x, Z) α`` and ``Cov(x, x') = k(x, x') + j·[x = x'] +
    k(x, Z) M k(Z, x')``, with ``M`` either explicit or, for prefbo's pairwise
    GPs, ``(L C)⁻ᵀ (L C)⁻¹ - L⁻ᵀ L⁻¹`` from the two triangular factors the
    model predicts with (same algebra as the model). ``Var(f1 - f2)`` needs
    only ``dk = k(Z, x1) - k(Z, x2)``: ``k(x1, x1) + k(x2, x2) - 2 k(x1, x2) +
    2 j + dkᵀ M dk``. The kernel is evaluated in closed form, with a
    written-out gradient, for a plain ``ScaleKernel(RBFKernel)``, and through
    ``covar_module`` (autograd) otherwise.

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
        self.rbf = _rbf_parts(model.covar_module)
        if self.rbf is not None:
            Zs = self.Z / self.rbf[1]
            # squared distances by expansion around the inputs' centre
            self.centre = Zs.mean(-2)
            self.Zs, self.Zc = Zs, Zs - self.centre  # n x d
            self.Zc_sq = self.Zc.square().sum(-1)  # n

    def _kernel(self, X1: Tensor, X2: Tensor | None = None) -> Tensor:
        r"""``k(X1, X2)`` (``X2`` the expansion's inputs ``Z`` if ``None``)."""
        if self.rbf is not None:
            scale, ls = self.rbf
            return scale * torch.exp(-0.5 * self._sq_dist(X1 / ls, X2))
        with gpytorch.settings.lazily_evaluate_kernels(False):
            return self.model.covar_module(X1, self.Z if X2 is None else X2).to_dense()

    def _sq_dist(self, Xs: Tensor, X2: Tensor | None = None) -> Tensor:
        r"""Squared distances of scaled ``... x m x d`` points to the scaled
        ``Z`` (or to ``X2 / lengthscale``): ``... x m x n``."""
        A = Xs - self.centre
        if X2 is None:
            B, B_sq = self.Zc, self.Zc_sq
        else:
            B = X2 / self.rbf[1] - self.centre
            B_sq = B.square().sum(-1)
        cross = A @ B.transpose(-1, -2)
        return (A.square().sum(-1, keepdim=True) + B_sq - 2.0 * cross).clamp_min(0)

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
        A = Xs - p.centre  # squared distances to Z, expanded around the centre
        sq = (A * A).sum(-1)[..., None] + p.Zc_sq - 2.0 * (A @ p.Zc.swapaxes(-1, -2))
        Ks = p.scale * xp.exp(-0.5 * xp.clamp_min(sq, 0))  # B x 2 x n
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


def _pairwise_gp_moments(model: PairwisePreferenceGP) -> _KernelMoments | None:
    r"""From the cached approximation of an unbatched prefbo pairwise GP without
    design mask or input transform (see ``PairwisePreferenceGP._predict``)."""
    if (
        model.datapoints is None
        or model.datapoints.ndim != 2
        or model.design_mask is not None
        or getattr(model, "input_transform", None) is not None
    ):
        return None
    with torch.no_grad():
        state = model._get_state()

        def dense_M() -> Tensor:
            # (L C)⁻ᵀ (L C)⁻¹ - L⁻ᵀ L⁻¹ = -(K + Ŵ⁻¹)⁻¹ = Ŵ Σ Ŵ - Ŵ: no K⁻¹
            # (whose entries grow with K's conditioning), bounded by Ŵ's
            with torch.no_grad():
                n = state.mode.shape[-1]
                W = comparison_laplacian(state.curvature, state.comparisons, n)
                M = W @ state.posterior_covariance() @ W - W
                return 0.5 * (M + M.mT)

        return _KernelMoments(
            model,
            model._train_inputs().detach(),
            state.alpha.detach(),
            factors=state.predictive_factors().detach(),
            dense_M=dense_M,
        )


def _skew_moments(model: SkewGP) -> _KernelMoments | None:
    r"""From a skew GP's stored draws ``w_s`` (``S x n``) and ``Q``: mean
    ``k(x, Z) w̄`` and ``M = Cov(w) - Q`` (``Cov`` with ``S - 1``, as
    :class:`~prefbo.posteriors.SkewGPPosterior`'s covariance)."""
    if model.weights is None or getattr(model, "input_transform", None) is not None:
        return None
    with torch.no_grad():
        W = model.weights.detach()
        centred = W - W.mean(0)
        cov = centred.transpose(-1, -2) @ centred / max(W.shape[0] - 1, 1)
        M = cov - model.Q.detach()
        return _KernelMoments(
            model, model.datapoints.detach(), W.mean(0), M=0.5 * (M + M.mT)
        )


def _variational_moments(model: VariationalPreferenceGP) -> _KernelMoments | None:
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
        return None
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
        return _KernelMoments(
            model,
            Z,
            alpha,
            M=0.5 * (M + M.transpose(-1, -2)),
            mean_constant=constant,
            jitter=jitter,
        )


def _rbf_parts(covar_module: object) -> tuple[Tensor, Tensor] | None:
    r"""``(outputscale, lengthscale)`` of a plain ``ScaleKernel(RBFKernel)``."""
    if type(covar_module) is not ScaleKernel or covar_module.active_dims is not None:
        return None
    base = covar_module.base_kernel
    if type(base) is not RBFKernel or base.active_dims is not None:
        return None
    scale = covar_module.outputscale.detach()
    ls = base.lengthscale.detach()
    if scale.ndim != 0 or ls.shape[:-2].numel() != 1:  # batched hyperparameters
        return None
    return scale, ls.reshape(-1)


def pair_moments(model: Model) -> PairMoments:
    r"""The moments analytic EUBO needs, for ``model``.

    Args:
        model: A one-output preference model (prefbo's or BoTorch's).

    Returns:
        A :class:`PairMoments`: ``pairs(X)`` maps ``... x 2 x d`` pairs to
        ``(μ1 - μ2, μ2, Var(f1 - f2))`` and ``joint(X)`` ``N x d`` designs to
        their joint posterior mean and covariance, both differentiable in
        ``X``, equal to ``model.posterior``'s up to rounding: read once from
        the fitted model for prefbo's pairwise GPs (unbatched, without design
        masks or input transforms), skew GPs (without input transforms) and
        one-utility variational GPs (GPyTorch's ``VariationalStrategy``, zero
        or constant mean); through ``model.posterior`` for any other model.
    """
    fast = None
    if isinstance(model, PairwisePreferenceGP):
        fast = _pairwise_gp_moments(model)
    elif isinstance(model, SkewGP):
        fast = _skew_moments(model)
    elif isinstance(model, VariationalPreferenceGP):
        fast = _variational_moments(model)
    return fast if fast is not None else PairMoments(model)


def _append_winner(X: Tensor, winner: Tensor | None) -> Tensor:
    r"""``... x q x d`` options with the ``1 x d`` winner appended as the last
    option of every question (``X`` itself without a winner)."""
    if winner is None:
        return X
    return torch.cat([X, winner.expand(*X.shape[:-2], 1, X.shape[-1])], dim=-2)


def eubo_values(
    model: Model, X: Tensor, previous_winner: Tensor | None = None
) -> Tensor:
    r"""BoTorch's analytic EUBO of ``X`` (same values, faster for prefbo GPs).

    Args:
        model: A one-output preference model.
        X: ``batch_shape x 2 x d`` pairs, or ``batch_shape x 1 x d`` designs
            when ``previous_winner`` is given.
        previous_winner: Optional ``d`` or ``1 x d`` design, the second option
            of every question.

    Returns:
        ``batch_shape`` values, equal to
        ``AnalyticExpectedUtilityOfBestOption(model, previous_winner=...)(X)``.
    """
    if not isinstance(X, Tensor) or X.ndim < 2:
        got = tuple(X.shape) if isinstance(X, Tensor) else type(X).__name__
        raise InputDataError(f"X must be a batch_shape x q x d tensor; got {got}.")
    q = 1 if previous_winner is not None else 2
    if X.shape[-2] != q:
        raise InputDataError(
            f"X must have q={q} option(s) per question "
            f"({'with' if q == 1 else 'without'} previous_winner); got shape "
            f"{tuple(X.shape)}."
        )
    _check_dim(model, X)
    w = None
    if previous_winner is not None:
        w = _check_winner(previous_winner, X.shape[-1], X)
    return pair_moments(model).eubo(_append_winner(X, w), add_second_mean=w is None)


class FastAnalyticEUBO(AcquisitionFunction):
    r"""BoTorch's ``AnalyticExpectedUtilityOfBestOption``, computed from
    :func:`pair_moments`.

    Same values (to rounding) and gradients as BoTorch's class, so
    ``optimize_acqf`` follows the same path and returns the same question;
    on prefbo's GPs each evaluation skips the posterior objects: about 2.2x
    faster in ``optimize_acqf`` (Branin / Hartmann-6, 20 answers, Laplace and
    EP). With the default ``ScaleKernel(RBFKernel)`` the gradient is the one
    written out in the forward pass (:meth:`_KernelMoments.eubo_and_grad`)
    instead of autograd's graph, another ~20 % off ``optimize_acqf``; first
    derivatives only. No ``outcome_model``. :meth:`value_and_grad` returns
    both without autograd, and ``optimize_acqf(...,
    gen_candidates=gen_candidates_eubo)`` runs BoTorch's L-BFGS-B on it (in
    NumPy for float64 CPU models): the same question again, 10-12x faster
    than BoTorch's class in all (:func:`~prefbo.acquisition.gen_candidates_eubo`,
    ``benchmarks/eubo_optimizer.py --prefbo gen_candidates``).

    Example:
        >>> acqf = FastAnalyticEUBO(model)
        >>> X, _ = optimize_acqf(
        ...     acqf, bounds, q=2, num_restarts=4, raw_samples=128,
        ...     gen_candidates=gen_candidates_eubo,
        ... )

    Args:
        pref_model: A one-output preference model.
        previous_winner: Optional ``d`` or ``1 x d`` design fixed as the
            second option (then ``q = 1`` and the winner's mean is left out,
            as in BoTorch's class).
    """

    def __init__(
        self, pref_model: Model, previous_winner: Tensor | None = None
    ) -> None:
        super().__init__(model=pref_model)
        self.moments = pair_moments(pref_model)
        winner = None
        if previous_winner is not None:
            like = getattr(pref_model, "datapoints", None)
            if isinstance(like, Tensor) and like.ndim >= 2:
                d = like.shape[-1]
            else:  # no training designs to read d and dtype from
                like = torch.empty(0, dtype=torch.float64)
                d = getattr(previous_winner, "shape", (0,))[-1]
            winner = _check_winner(previous_winner, d, like)
        self.register_buffer("previous_winner", winner)

    @t_batch_mode_transform()
    def forward(self, X: Tensor) -> Tensor:
        r"""EUBO of ``batch_shape x q x d`` questions (``q = 2``, or ``q = 1``
        with a previous winner); returns ``batch_shape`` values."""
        self._check_questions(X)
        winner = self.previous_winner
        if (
            self.closed_form_gradient
            and torch.is_grad_enabled()
            and X.requires_grad
            and (winner is None or not winner.requires_grad)
        ):  # the written-out gradient: autograd's graph costs more here
            values, _ = _EUBOWithGradient.apply(X, self)
            return values
        return self.moments.eubo(
            _append_winner(X, winner), add_second_mean=winner is None
        )

    @property
    def closed_form_gradient(self) -> bool:
        r"""Whether :meth:`value_and_grad` is available: moments read once from
        the model (:func:`pair_moments`) with a ``ScaleKernel(RBFKernel)``."""
        moments = self.moments
        return isinstance(moments, _KernelMoments) and moments.rbf is not None

    def value_and_grad(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""EUBO of ``b x q x d`` questions and its gradient in ``X``, both
        from the written-out forward pass, without autograd.

        The numbers ``forward`` and its backward give, for optimisers that want
        both at once (:func:`~prefbo.acquisition.gen_candidates_eubo`).
        Needs :attr:`closed_form_gradient`.

        Args:
            X: ``b x q x d`` questions (``q = 2``, or ``q = 1`` with a
                previous winner) in the model's dtype.

        Returns:
            ``(values, grad)``: ``b`` values and the ``b x q x d`` gradient.
        """
        if not self.closed_form_gradient:
            raise UnsupportedError(
                f"{type(self).__name__}.value_and_grad needs the written-out "
                "gradient (a prefbo GP whose moments are read once, with a "
                "ScaleKernel(RBFKernel)); use forward and autograd for this model."
            )
        self._check_questions(X)
        return self._value_and_grad(X)

    def _value_and_grad(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r""":meth:`value_and_grad` of checked questions."""
        winner = self.previous_winner
        values, grad = self.moments.eubo_and_grad(
            _append_winner(X.detach(), winner), add_second_mean=winner is None
        )
        return values, grad[..., : X.shape[-2], :]

    @property
    def numpy_ready(self) -> bool:
        r"""Whether :meth:`numpy_value_and_grad` is available (the written-out
        gradient, float64 on the CPU, a winner that needs no gradient)."""
        winner = self.previous_winner
        return (
            self.closed_form_gradient
            and self.moments.numpy_ready
            and (winner is None or not winner.requires_grad)
        )

    def numpy_value_and_grad(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r""":meth:`value_and_grad` of a float64 ``b x q x d`` array, computed in
        NumPy (the same formula, to rounding; a fraction of torch's
        per-operation cost at these sizes). Needs :attr:`numpy_ready`.

        Args:
            X: ``b x q x d`` float64 questions.

        Returns:
            ``(values, grad)``: ``b`` values and the ``b x q x d`` gradient.
        """
        if not self.numpy_ready:
            raise UnsupportedError(
                f"{type(self).__name__}.numpy_value_and_grad needs the written-out "
                "gradient of a float64 model on the CPU; use value_and_grad."
            )
        q = 1 if self.previous_winner is not None else 2
        if X.ndim != 3 or X.shape[-2] != q:
            raise UnsupportedError(
                f"{type(self).__name__} takes b x {q} x d arrays here; got shape "
                f"{X.shape}."
            )
        winner = self.previous_winner
        if winner is not None:
            w = winner.detach().cpu().numpy()
            X = np.concatenate([X, np.broadcast_to(w, (X.shape[0], 1, X.shape[-1]))], 1)
        values, grad = self.moments.numpy_eubo_and_grad(
            X, add_second_mean=winner is None
        )
        return values, grad[:, :q]

    def _check_questions(self, X: Tensor) -> None:
        q = 1 if self.previous_winner is not None else 2
        if X.shape[-2] != q:
            raise UnsupportedError(
                f"{type(self).__name__} takes q={q} option(s) per question "
                f"({'with' if q == 1 else 'without'} a previous winner); got "
                f"X of shape {tuple(X.shape)}."
            )
        _check_dim(self.model, X)
        moments = self.moments
        if isinstance(moments, _KernelMoments) and X.dtype != moments.Z.dtype:
            raise InputTypeError(
                f"X must have the model's dtype {moments.Z.dtype}; got {X.dtype}."
            )


class _EUBOWithGradient(torch.autograd.Function):
    r"""EUBO of ``... x q x d`` questions (and, as a second, non-differentiable
    output, its gradient) whose backward is the gradient
    :meth:`FastAnalyticEUBO.value_and_grad` wrote out in the forward pass.

    A backward that builds a graph (``create_graph=True``, Hessians,
    ``torch.func`` transforms) differentiates the autograd form of the same
    EUBO instead, so higher derivatives stay exact.
    """

    @staticmethod
    def forward(X, acqf):  # noqa: D102
        return acqf._value_and_grad(X)  # (forward checked the questions)

    @staticmethod
    def setup_context(ctx, inputs, output):  # noqa: D102
        X, acqf = inputs
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(X, output[1])
        ctx.acqf = acqf

    @staticmethod
    def backward(ctx, grad_out, _):  # noqa: D102
        X, grad = ctx.saved_tensors
        if torch.is_grad_enabled():  # a graph is wanted: the autograd form
            winner = ctx.acqf.previous_winner
            with torch.enable_grad():
                values = ctx.acqf.moments.eubo(
                    _append_winner(X, winner), add_second_mean=winner is None
                )
                (g,) = torch.autograd.grad(values, X, grad_out, create_graph=True)
            return g, None
        return grad_out[..., None, None] * grad, None


def _check_dim(model: Model, X: Tensor) -> None:
    r"""``X``'s last dimension against the model's input dimension, where the
    model says it (prefbo's models hold their raw ``datapoints``)."""
    datapoints = getattr(model, "datapoints", None)
    if isinstance(datapoints, Tensor) and X.shape[-1] != datapoints.shape[-1]:
        raise InputDataError(
            f"X must have d={datapoints.shape[-1]} features (the model's "
            f"datapoints); got X of shape {tuple(X.shape)}."
        )


# ---------------------------------------------------------------- maximiser
def _check_winner(previous_winner: object, d: int, like: Tensor) -> Tensor:
    if not isinstance(previous_winner, Tensor):
        raise InputTypeError(
            "previous_winner must be a torch.Tensor of shape d or 1 x d; got "
            f"{type(previous_winner).__name__}."
        )
    if previous_winner.shape not in ((d,), (1, d)):
        raise InputDataError(
            f"previous_winner must have shape ({d},) or (1, {d}); got "
            f"{tuple(previous_winner.shape)}."
        )
    if not bool(torch.isfinite(previous_winner).all()):
        raise InputDataError(
            f"previous_winner must be finite; got {previous_winner.tolist()}."
        )
    return previous_winner.reshape(1, d).to(like)


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
        return _append_winner(X, self.winner)

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
    computes, several times faster than ``optimize_acqf`` (see the module
    docstring): every pair of ``raw_samples`` Sobol designs is scored from
    one joint posterior, the best ``num_restarts`` pairs that are not close
    to one another start a batched projected Newton ascent, and the best
    point reached is returned (never worse than the best raw pair).

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
            columns), ``previous_winner`` shape, or counts.
        InputTypeError: Non-floating ``bounds`` or a non-tensor winner.
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
        winner = _check_winner(previous_winner, d, bounds)
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
