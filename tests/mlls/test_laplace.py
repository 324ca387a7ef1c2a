import pytest
import torch
from botorch.fit import fit_gpytorch_mll

from prefbo import PairwiseEPGP, PairwiseEPMLL, PairwiseLaplaceGP, PairwiseLaplaceMLL
from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.posteriors.gaussian import TrainingPosterior
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


def test_mll_reads_the_evidence_of_the_training_posterior():
    X, comp, _ = make_pairwise_data(10, 20)
    model = PairwiseEPGP(X, comp).train()
    out = model(X)
    assert isinstance(out, TrainingPosterior)
    # one MLL for both approximations: the EP name is the same class
    assert PairwiseEPMLL is PairwiseLaplaceMLL
    mll = PairwiseEPMLL(model.likelihood, model)
    priors = mll(out, comp) - out.evidence.sum()
    assert torch.isfinite(priors)
    # a derived distribution has no evidence of its own
    with pytest.raises(UnsupportedError, match="called in training mode"):
        mll(out * 2.0, comp)


def test_mll_fits_through_botorch():
    X, comp, _ = make_pairwise_data(12, 25, seed=4)
    model = PairwiseLaplaceGP(X, comp)
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    before = mll(model.train()(X), comp).item()
    fit_gpytorch_mll(mll)
    assert mll(model.train()(X), comp).item() >= before
