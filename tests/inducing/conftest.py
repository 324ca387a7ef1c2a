"""Shared fixtures of the inducing-point tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from gpytorch.kernels import Kernel, MaternKernel, RBFKernel, ScaleKernel

from prefbo import PairwiseLaplaceGP
from prefbo.utils.testing import make_pairwise_data


@pytest.fixture
def make_kernel() -> Callable[..., Kernel]:
    r"""``make_kernel(kind="rbf" | "matern", d, batch_shape, lengthscale,
    **tkwargs)``: a ``ScaleKernel`` (outputscale 1.7) with the given
    lengthscales."""

    def make(kind="rbf", d=2, batch_shape=torch.Size(), lengthscale=0.3, **tkwargs):
        base = (
            RBFKernel(ard_num_dims=d, batch_shape=batch_shape)
            if kind == "rbf"
            else MaternKernel(nu=2.5, ard_num_dims=d, batch_shape=batch_shape)
        )
        kernel = ScaleKernel(base, batch_shape=batch_shape).to(**tkwargs)
        with torch.no_grad():
            kernel.outputscale = torch.full(batch_shape, 1.7, **tkwargs)
            base.lengthscale = torch.as_tensor(lengthscale, **tkwargs).expand(
                base.lengthscale.shape
            )
        return kernel

    return make


@pytest.fixture
def make_pref_model() -> Callable[..., PairwiseLaplaceGP]:
    r"""``make_pref_model(n, m, d, seed, **tkwargs)``: a Laplace GP on random
    pairwise answers."""

    def make(n=15, m=30, d=2, seed=0, **tkwargs):
        X, comp, _ = make_pairwise_data(n, m, d=d, seed=seed, **tkwargs)
        return PairwiseLaplaceGP(X, comp)

    return make
