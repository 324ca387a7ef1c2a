import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior

from prefbo.data import PairwiseComparisons
from prefbo.data.minibatch import AnswerLoader
from prefbo.exceptions import NumericalError
from prefbo.fit.epoch import local_step, log_prior, run_epoch
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.utils.testing import make_pairwise_data


def _model():
    X, comp, _ = make_pairwise_data(15, 40, seed=0, dtype=torch.float64)
    data = PairwiseComparisons(X, comp)
    return VariationalPreferenceGP(data, inducing_points=6), data


def test_log_prior_sums_the_registered_priors():
    kernel = ScaleKernel(RBFKernel(), outputscale_prior=GammaPrior(2.0, 0.5))
    kernel.outputscale = 1.7
    expected = GammaPrior(2.0, 0.5).log_prob(torch.tensor(1.7))
    torch.testing.assert_close(log_prior(kernel), expected)


def test_local_step_returns_the_elbo_and_leaves_its_gradient():
    model, data = _model()
    (batch,) = AnswerLoader(data, 1000, shuffle=False)  # one full batch
    model.train()
    elbo = local_step(model, batch, data.num_answers, 0, False, None, True)
    with torch.no_grad():
        ell = model.expected_log_likelihood(data, None).sum()
        expected = ell - model.kl_divergence()
    torch.testing.assert_close(elbo, expected)
    assert not elbo.requires_grad
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None for g in grads)


def test_run_epoch_sums_the_minibatch_elbos_and_raises_when_not_finite():
    model, data = _model()
    loader = AnswerLoader(data, 10, shuffle=False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.0)  # no move: ELBOs add up
    model.train()
    sums = run_epoch(model, loader, optimizer, None, params, None, 0, False, None)
    assert len(loader) == 4 and isinstance(sums, float)
    with torch.no_grad():
        kl = model.kl_divergence()
        ell = model.expected_log_likelihood(data, None).sum()
    # each of the four estimates scales its quarter of the answers by 4
    assert sums == pytest.approx(4 * (ell - kl).item(), rel=1e-10)
    with torch.no_grad():
        model.likelihood.noise_std = float("nan")
    with pytest.raises(NumericalError, match="the ELBO became non-finite"):
        run_epoch(model, loader, optimizer, None, params, None, 3, False, None)
