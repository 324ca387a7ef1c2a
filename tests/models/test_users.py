import pytest
import torch
from botorch.fit import fit_gpytorch_mll

from prefbo.exceptions import InputDataError
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP, batch_users
from prefbo.utils.testing import make_pairwise_data

SIZES = [(10, 20, 0), (14, 25, 1), (7, 12, 2)]


def _data():
    return [make_pairwise_data(n, m, seed=s)[:2] for n, m, s in SIZES]


@pytest.mark.parametrize("cls", [PairwiseLaplaceGP, PairwiseEPGP])
def test_ragged_batch_equals_separate_models(cls):
    data = _data()
    batched = cls(**batch_users(data).model_kwargs())
    Xt = torch.rand(4, 2, dtype=torch.float64)
    post = batched.posterior(Xt.expand(3, 4, 2))
    batched.train()
    evidence = batched(batched.train_inputs[0]).evidence
    for u, (X, C) in enumerate(data):
        single = cls(X, C)
        ps = single.posterior(Xt)
        torch.testing.assert_close(post.mean[u], ps.mean, rtol=0, atol=1e-6)
        torch.testing.assert_close(
            post.covariance_matrix[u], ps.covariance_matrix, rtol=0, atol=1e-6
        )
        single.train()
        assert evidence[u].item() == pytest.approx(single(X).evidence.item(), abs=1e-6)


def test_ragged_batched_fit_equals_separate_fits():
    data = _data()
    batched = PairwiseLaplaceGP(**batch_users(data).model_kwargs())
    fit_gpytorch_mll(PairwiseLaplaceMLL(batched.likelihood, batched))
    for u, (X, C) in enumerate(data):
        single = PairwiseLaplaceGP(X, C)
        fit_gpytorch_mll(PairwiseLaplaceMLL(single.likelihood, single))
        torch.testing.assert_close(
            batched.covar_module.outputscale[u],
            single.covar_module.outputscale,
            rtol=2e-2,
            atol=1e-3,
        )


def test_ep_ragged_fit_runs():
    batched = PairwiseEPGP(**batch_users(_data()).model_kwargs())
    fit_gpytorch_mll(PairwiseEPMLL(batched.likelihood, batched))
    assert torch.isfinite(batched.covar_module.outputscale).all()


def test_batch_users_errors():
    X, C = _data()[0]
    with pytest.raises(InputDataError, match="non-empty list"):
        batch_users([])
    with pytest.raises(InputDataError, match=r"datasets\[1\] must have d=2"):
        batch_users(
            [(X, C), (torch.rand(5, 3, dtype=torch.float64), torch.tensor([[0, 1]]))]
        )
    with pytest.raises(InputDataError, match="design_mask marks every design as"):
        PairwiseLaplaceGP(X, C, design_mask=torch.zeros(10, dtype=torch.bool))
    with pytest.raises(InputDataError, match="comparison_mask must be a bool"):
        PairwiseLaplaceGP(X, C, comparison_mask=torch.ones(20))


def test_ragged_centred_posterior_and_conditioning_equal_separate_models():
    # the default reference of a masked model is each user's real designs,
    # and conditioning keeps the padding masked (it used to centre on the
    # padding and to fail on the padding rows in condition_on_observations)
    data = _data()
    batched = PairwiseLaplaceGP(**batch_users(data).model_kwargs())
    g = torch.Generator().manual_seed(3)
    Xt = torch.rand(3, 4, 2, dtype=torch.float64, generator=g)
    new_X = torch.rand(3, 2, 2, dtype=torch.float64, generator=g)
    new_Y = torch.tensor([[0, 1]]).expand(3, 1, 2)
    centred = batched.centred_posterior(Xt)
    conditioned = batched.condition_on_observations(new_X, new_Y)
    cond_post = conditioned.posterior(Xt)
    for u, (X, C) in enumerate(data):
        single = PairwiseLaplaceGP(X, C)
        cs = single.centred_posterior(Xt[u])
        torch.testing.assert_close(centred.mean[u], cs.mean, rtol=0, atol=1e-6)
        torch.testing.assert_close(
            centred.covariance_matrix[u], cs.covariance_matrix, rtol=0, atol=1e-6
        )
        ps = single.condition_on_observations(new_X[u], new_Y[u]).posterior(Xt[u])
        torch.testing.assert_close(cond_post.mean[u], ps.mean, rtol=0, atol=1e-6)
