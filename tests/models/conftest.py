import pytest
import torch

from prefbo.data import ChoiceSets


@pytest.fixture
def choice_data():
    r"""A factory of small ``ChoiceSets``: ragged sets of three options on
    ``n`` designs in 2-D, some with two chosen options."""

    def make(n=12, k=16, seed=0, **tkwargs):
        g = torch.Generator().manual_seed(seed)
        X = torch.rand(n, 2, generator=g, dtype=torch.float64).to(**tkwargs)
        sets = torch.stack([torch.randperm(n, generator=g)[:3] for _ in range(k)])
        sets[::4, 2] = -1  # ragged sets
        chosen = torch.zeros(k, 3, dtype=torch.bool)
        chosen[:, 0] = True
        chosen[1::4, 1] = True  # two chosen options
        return ChoiceSets(X, sets.to(X.device), chosen.to(X.device))

    return make


@pytest.fixture
def perturb_q_u():
    r"""A function giving a variational model a non-trivial ``q(u)``: a random
    whitened mean and Cholesky factor."""

    def perturb(model, seed=0, scale=0.5):
        g = torch.Generator().manual_seed(seed)
        q_u = model.base_variational_strategy._variational_distribution
        with torch.no_grad():
            mean, chol = q_u.variational_mean, q_u.chol_variational_covar
            mean.copy_(torch.randn(mean.shape, generator=g, dtype=torch.float64))
            noise = torch.randn(chol.shape, generator=g, dtype=torch.float64)
            eye = torch.eye(chol.shape[-1], dtype=torch.float64)
            chol.copy_(scale * eye + 0.2 * noise.tril(-1))

    return perturb
