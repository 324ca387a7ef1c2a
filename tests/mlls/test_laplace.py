import pytest
import torch

from prefbo import PairwiseLaplaceGP, PairwiseLaplaceMLL
from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.utils.testing import make_pairwise_data


def test_mll_adds_hyperparameter_log_priors():
    X, comp, _ = make_pairwise_data(15, 30)
    model = PairwiseLaplaceGP(X, comp)
    model.train()
    value = PairwiseLaplaceMLL(model.likelihood, model)(model(X), comp)
    out = model(X)
    priors = (
        model.covar_module.base_kernel.lengthscale_prior.log_prob(
            model.covar_module.base_kernel.lengthscale
        ).sum()
        + model.covar_module.outputscale_prior.log_prob(
            model.covar_module.outputscale
        ).sum()
    )
    torch.testing.assert_close(value, out.evidence.sum() + priors)


def test_mll_sums_batch_elements():
    X, comp, _ = make_pairwise_data(10, 20, batch_shape=torch.Size([3]))
    model = PairwiseLaplaceGP(X, comp)
    model.train()
    out = model(X)
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    assert out.evidence.shape == (3,)
    assert mll(out, comp).shape == ()


def test_mll_errors():
    X, comp, _ = make_pairwise_data(10, 20)
    model = PairwiseLaplaceGP(X, comp)
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    model.eval()
    with pytest.raises(UnsupportedError, match="called in training mode"):
        mll(model(X), comp)
    model.train()
    with pytest.raises(InputDataError, match="target must be the model's training"):
        mll(model(X), comp.flip(-1))
