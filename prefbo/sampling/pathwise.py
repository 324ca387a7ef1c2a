r"""Pathwise (Matheron) posterior samples for prefbo's pairwise preference GPs.

BoTorch's ``draw_matheron_paths`` raises for ``PairwiseGP``. For a pairwise
model the answers depend on the utilities at the designs only, so a posterior
path is a prior path conditioned on a posterior draw of those utilities:

    g(·) = h(·) + k(·, X) K⁻¹ (f_X - h(X)),   f_X ~ N(μ, Σ),

with ``h`` a random-Fourier-feature draw of the prior GP, and ``(μ, Σ)`` the
Laplace (or EP) posterior at the designs (``Σ = F Fᵀ`` from the cached
factorisation). Each path is then a cheap function of ``x``: ``O(F + n)`` per
point.

For :class:`~prefbo.models.VariationalPreferenceGP` the update goes through
the inducing points instead (:func:`draw_variational_paths`): a prior path
conditioned on a draw of the inducing values from ``q(u)``.

:mod:`prefbo.models.pathwise` registers both with BoTorch's dispatcher, so
``draw_matheron_paths(model, sample_shape)`` works on every prefbo pairwise
and variational model. This module reads the models through their methods
only and imports none of them (the models package imports this one).
"""

from __future__ import annotations

import torch
from botorch.models.model import Model
from botorch.sampling.pathwise.features import KernelEvaluationMap, gen_kernel_features
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.posterior_samplers import MatheronPath
from torch import Size

from prefbo.exceptions import UnsupportedError


def draw_pairwise_paths(
    model: Model, sample_shape: Size, num_features: int = 1024
) -> MatheronPath:
    r"""Matheron paths of a pairwise preference GP (see the module docstring).

    Args:
        model: A fitted prefbo pairwise model, a
            :class:`~prefbo.models.PairwisePreferenceGP`.
        sample_shape: Shape of the draws.
        num_features: Number of random Fourier features of the prior draw.

    Returns:
        A BoTorch ``MatheronPath``; evaluated at ``batch_shape x q x d`` it
        returns ``sample_shape x batch_shape x q``.
    """
    if model._has_no_data():
        raise UnsupportedError("draw_matheron_paths needs a model with data.")
    model.eval()
    state = model._get_state()
    with torch.no_grad():
        X = model._train_inputs()  # batch x n x d (transformed)
    kernel = model.covar_module
    input_transform = getattr(model, "input_transform", None)
    feature_map = gen_kernel_features(
        kernel=kernel, num_inputs=X.shape[-1], num_outputs=num_features
    )
    batch = model.batch_shape
    tkwargs = {"dtype": X.dtype, "device": X.device}
    prior = GeneralizedLinearPath(
        feature_map=feature_map,
        weight=torch.randn(
            sample_shape + batch + (feature_map.num_outputs,), **tkwargs
        ),
        input_transform=input_transform,
    )
    with torch.no_grad():
        h_X = prior.forward(X)  # sample x batch x n (forward skips transforms)
        F = state.covariance_root()  # batch x n x n, Σ = F Fᵀ
        eps = torch.randn(sample_shape + batch + X.shape[-2:-1], **tkwargs)
        f_X = state.mode + (F @ eps.unsqueeze(-1)).squeeze(-1)
        weight = torch.cholesky_solve(
            (f_X - h_X).unsqueeze(-1), state.chol_prior
        ).squeeze(-1)  # sample x batch x n: K⁻¹ (f_X - h(X))
    update = GeneralizedLinearPath(
        feature_map=KernelEvaluationMap(
            kernel=kernel, points=X, input_transform=input_transform
        ),
        weight=weight,
    )
    return MatheronPath(prior_paths=prior, update_paths=update)


class VariationalPreferencePath(torch.nn.Module):
    r"""Posterior sample paths of a :class:`~prefbo.models.VariationalPreferenceGP`.

    For each of the ``Q`` latent GPs, with inducing locations ``Z``,
    ``K = k(Z, Z) + jitter·I = L Lᵀ`` and whitened ``q(v) = N(m̃, S̃)``
    (``u - m(Z) = L v``, as GPyTorch's ``VariationalStrategy`` has it),

        g(x) = m(x) + h(x) + k(x, Z) K⁻¹ (L v - h(Z)),   v ~ q(v),

    with ``h`` a random-Fourier-feature draw of the zero-mean prior. Its mean
    is ``m(x) + k(x, Z) L⁻ᵀ m̃`` and its covariance
    ``k(x, x') - k(x, Z) K⁻¹ k(Z, x') + k(x, Z) L⁻ᵀ S̃ L⁻¹ k(Z, x')`` — the
    SVGP predictive distribution, up to the random-feature error of ``h``.
    Utility ``j`` is ``Σ_q W[q, j] g_q`` (``W`` the model's
    :meth:`~prefbo.models.VariationalPreferenceGP.mixing_matrix`).

    Calling the path on ``batch x r x d`` inputs returns
    ``sample_shape x batch x r`` for one utility and
    ``sample_shape x batch x r x t`` for ``t`` utilities; as with BoTorch's
    paths, a leading input dimension equal to ``sample_shape`` evaluates
    path ``b`` on row ``b``.
    """

    def __init__(
        self,
        feature_map: torch.nn.Module,
        prior_weight: torch.Tensor,
        kernel: torch.nn.Module,
        mean_module: torch.nn.Module,
        inducing_points: torch.Tensor,
        update_weight: torch.Tensor,
        mixing: torch.Tensor,
        latent_batched: bool,
    ) -> None:
        super().__init__()
        self.feature_map = feature_map
        self.kernel = kernel
        self.mean_module = mean_module
        self.register_buffer("prior_weight", prior_weight)  # S x [Q] x F
        self.register_buffer("inducing_points", inducing_points)  # M x d
        self.register_buffer("update_weight", update_weight)  # S x [Q] x M
        self.register_buffer("mixing", mixing)  # Q x t
        self.latent_batched = latent_batched

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        r"""Evaluate the paths at ``X`` (``batch x r x d``); see the class docstring."""
        Xq = X.unsqueeze(-3) if self.latent_batched else X  # ... x [1] x r x d
        cross = self.kernel(Xq, self.inducing_points).to_dense()  # ... x [Q] x r x M
        g = (
            self.mean_module(Xq)
            + _contract(self.feature_map(Xq), self.prior_weight, self.latent_batched)
            + _contract(cross, self.update_weight, self.latent_batched)
        )  # S x ... x [Q] x r
        if not self.latent_batched:
            return g
        utilities = torch.einsum("...qr,qt->...rt", g, self.mixing)
        return utilities.squeeze(-1) if self.mixing.shape[-1] == 1 else utilities


def _contract(
    features: torch.Tensor, weight: torch.Tensor, latent_batched: bool
) -> torch.Tensor:
    r"""``Σ_f features[..., q, r, f] · weight[S, q, f]`` → ``S x ... x [q] x r``.

    An einsum rather than ``features @ weight.unsqueeze(-1)``: the matmul
    would first broadcast (copy) the features over all ``S`` samples.
    """
    if not latent_batched:  # a unit latent dimension
        return torch.einsum(
            "...qrf,...qf->...qr", features.unsqueeze(-3), weight.unsqueeze(-2)
        ).squeeze(-2)
    return torch.einsum("...qrf,...qf->...qr", features, weight)


def draw_variational_paths(
    model: Model, sample_shape: Size, num_features: int = 1024
) -> VariationalPreferencePath:
    r"""Pathwise posterior samples of a variational preference GP.

    Args:
        model: A (fitted) :class:`~prefbo.models.VariationalPreferenceGP`.
        sample_shape: Shape of the draws.
        num_features: Number of random Fourier features of the prior draw.

    Returns:
        A :class:`VariationalPreferencePath` (see its docstring for shapes).
    """
    if not all(
        hasattr(model, name)
        for name in ("base_variational_strategy", "whitening_root", "mixing_matrix")
    ):
        raise UnsupportedError(
            "draw_variational_paths needs a VariationalPreferenceGP; got "
            f"{type(model).__name__}."
        )
    model.eval()
    strategy = model.base_variational_strategy
    kernel = model.covar_module
    q_v = strategy.variational_distribution  # whitened q(v), [Q] x M
    latent = q_v.batch_shape  # [Q], or [] for a single unbatched latent GP
    latent_batched = len(latent) > 0
    with torch.no_grad():
        Z = strategy.inducing_points.detach()  # M x d
        tkwargs = {"dtype": Z.dtype, "device": Z.device}
        feature_map = gen_kernel_features(
            kernel=kernel, num_inputs=Z.shape[-1], num_outputs=num_features
        ).to(**tkwargs)
        Zq = Z.unsqueeze(-3) if latent_batched else Z
        prior_weight = torch.randn(
            sample_shape + latent + (feature_map.num_outputs,), **tkwargs
        )
        h_Z = _contract(feature_map(Zq), prior_weight, latent_batched)  # S x [Q] x M
        L = model.whitening_root()  # [Q] x M x M
        root = q_v.lazy_covariance_matrix.root_decomposition().root.to_dense()
        eps = torch.randn(sample_shape + latent + (root.shape[-1],), **tkwargs)
        v = q_v.mean + (root @ eps.unsqueeze(-1)).squeeze(-1)  # S x [Q] x M
        u = (L @ v.unsqueeze(-1)).squeeze(-1)  # centred inducing values
        update_weight = torch.cholesky_solve((u - h_Z).unsqueeze(-1), L).squeeze(-1)
        mixing = model.mixing_matrix().detach().to(**tkwargs)
    return VariationalPreferencePath(
        feature_map=feature_map,
        prior_weight=prior_weight,
        kernel=kernel,
        mean_module=model.mean_module,
        inducing_points=Z,
        update_weight=update_weight,
        mixing=mixing,
        latent_batched=latent_batched,
    )
