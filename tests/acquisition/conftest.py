"""Shared models of the EUBO tests (moments, acquisition function, maximiser)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models.model import Model

from prefbo import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.data import PairwiseComparisons
from prefbo.loop.optimizer import expected_fit_warnings
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.models import SkewGP
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.utils.testing import make_pairwise_data

MODELS = {"laplace": PairwiseLaplaceGP, "ep": PairwiseEPGP}


def _model(name, n=15, m=30, d=2, seed=0, **kwargs) -> Model:
    X, comp, _ = make_pairwise_data(n, m, d=d, seed=seed)
    if name == "skew":
        return SkewGP(X, comp, num_samples=64, seed=0, **kwargs)
    if name == "variational":
        model = VariationalPreferenceGP(
            PairwiseComparisons(X, comp), inducing_points=8, **kwargs
        )
        # a q(u) away from the prior: mean and covariance of a Laplace fit
        Z = model.base_variational_strategy.inducing_points
        post = PairwiseLaplaceGP(X, comp).posterior(Z)
        with torch.no_grad():
            model.set_inducing_distribution(
                post.mean.squeeze(-1), post.distribution.covariance_matrix
            )
        return model.eval()
    return MODELS[name](X, comp, **kwargs).eval()


def _fitted(name, n, m, d, seed) -> Model:
    model = _model(name, n, m, d, seed)
    mll_cls = PairwiseLaplaceMLL if name == "laplace" else PairwiseEPMLL
    with expected_fit_warnings():
        fit_gpytorch_mll(mll_cls(model.likelihood, model))
    return model.eval()


@pytest.fixture
def make_model() -> Callable[..., Model]:
    r"""``make_model(name, n=15, m=30, d=2, seed=0, **kwargs)``: an unfitted
    ``"laplace"``, ``"ep"``, ``"skew"`` or ``"variational"`` model in eval
    mode on random comparisons (the variational one with a Laplace ``q(u)``)."""
    return _model


@pytest.fixture
def make_fitted() -> Callable[..., Model]:
    r"""``make_fitted(name, n, m, d, seed)``: a ``"laplace"`` or ``"ep"``
    model with fitted hyperparameters, in eval mode."""
    return _fitted
