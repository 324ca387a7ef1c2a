import torch
from gpytorch.distributions import MultivariateNormal

from prefbo import PairwiseLaplaceGP
from prefbo.posteriors.gaussian import TrainingPosterior, mvn
from prefbo.utils.testing import make_pairwise_data


def test_training_posterior_carries_the_evidence_of_the_approximation():
    X, comp, _ = make_pairwise_data(10, 20)
    model = PairwiseLaplaceGP(X, comp).train()
    out = model(X)
    assert isinstance(out, TrainingPosterior)
    assert isinstance(out, MultivariateNormal)
    assert out.evidence.shape == () and out.evidence.requires_grad
    state = model.approximation  # the prediction state, at the same mode
    torch.testing.assert_close(out.mean, state.mode, rtol=1e-5, atol=1e-6)
    # derived distributions keep the class, not the evidence
    assert (out * 2.0).evidence is None
    assert out.expand(torch.Size([3])).evidence is None


def test_mvn_keeps_a_singular_covariance_lazy():
    cov = torch.ones(3, 3, dtype=torch.float64)  # rank one
    dist = mvn(torch.zeros(3, dtype=torch.float64), cov)
    torch.testing.assert_close(dist.covariance_matrix, cov)
