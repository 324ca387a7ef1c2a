r"""Pathwise (Matheron) posterior samples for prefbo's pairwise preference GPs.

BoTorch's ``draw_matheron_paths`` raises for ``PairwiseGP``. For a pairwise
model the answers depend on the utilities at the designs only, so a posterior
path is a prior path conditioned on a posterior draw of those utilities:

    g(·) = h(·) + k(·, X) K⁻¹ (f_X - h(X)),   f_X ~ N(μ, Σ),

with ``h`` a random-Fourier-feature draw of the prior GP, and ``(μ, Σ)`` the
Laplace (or EP) posterior at the designs (``Σ = F Fᵀ`` from the cached
factorisation). Each path is then a cheap function of ``x``: ``O(F + n)`` per
point. Registered with BoTorch's dispatcher, so ``draw_matheron_paths(model,
sample_shape)`` works on :class:`~prefbo.models.PairwiseLaplaceGP` and
:class:`~prefbo.models.PairwiseEPGP`.
"""

from __future__ import annotations

import torch
from botorch.sampling.pathwise.features import KernelEvaluationMap, gen_kernel_features
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.posterior_samplers import (
    DrawMatheronPaths,
    MatheronPath,
)
from torch import Size

from prefbo.exceptions import UnsupportedError
from prefbo.models.pairwise import PairwisePreferenceGP


@DrawMatheronPaths.register(PairwisePreferenceGP)
def _draw_matheron_paths_pairwise(
    model: PairwisePreferenceGP,
    *,
    sample_shape: Size,
    prior_sampler=None,
    update_strategy=None,
) -> MatheronPath:
    r"""BoTorch's ``draw_matheron_paths`` for prefbo's pairwise models (1024
    random features; ``prior_sampler`` and ``update_strategy`` are not used)."""
    return draw_pairwise_paths(model, sample_shape)


def draw_pairwise_paths(
    model: PairwisePreferenceGP, sample_shape: Size, num_features: int = 1024
) -> MatheronPath:
    r"""Matheron paths of a pairwise preference GP (see the module docstring).

    Args:
        model: A fitted prefbo pairwise model.
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
