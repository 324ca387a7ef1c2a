import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from gpytorch.kernels import Kernel, ScaleKernel

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.kernels import default_preference_covar_module
from prefbo.kernels.population import POPULATION, PopulationKernel
from prefbo.mlls import PairwiseLaplaceMLL
from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.models.population import (
    disagreement,
    favourite,
    population_model,
    stack_participants,
    utility_posterior,
)
from prefbo.utils.testing import make_pairwise_data


class _Zero(Kernel):
    def forward(self, x1, x2, diag=False, **params):
        if diag:
            return torch.zeros(x1.shape[:-1], dtype=x1.dtype)
        return torch.zeros(*x1.shape[:-1], x2.shape[-2], dtype=x1.dtype)


def _data(seeds=(0, 1, 2)):
    return {p: make_pairwise_data(6, 10, d=2, seed=s)[:2] for p, s in enumerate(seeds)}


def _kernel(lengthscale, outputscale):
    k = default_preference_covar_module(2)
    k.base_kernel.lengthscale, k.outputscale = lengthscale, outputscale
    return k


def _mean_var(model, X):
    post = model.posterior(X.unsqueeze(-2))
    return post.mean.reshape(-1).detach(), post.variance.reshape(-1).detach()


@pytest.mark.parametrize(
    "cls, name", [(PairwiseLaplaceGP, "laplace"), (PairwiseEPGP, "ep")]
)
def test_without_a_shared_utility_each_person_is_their_own_model(cls, name):
    data = _data()
    ind = _kernel(0.4, 1.5)
    model = population_model(
        data, model=name, covar_module=PopulationKernel(_Zero(), ind)
    ).eval()
    Xs = torch.rand(
        5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(9)
    )
    for p, (X, c) in data.items():
        alone = cls(X, c, covar_module=_kernel(0.4, 1.5)).eval()
        post = utility_posterior(model, Xs.unsqueeze(-2), participant=p)
        m, v = post.mean.reshape(-1).detach(), post.variance.reshape(-1).detach()
        m0, v0 = _mean_var(alone, Xs)
        torch.testing.assert_close(m, m0, rtol=1e-6, atol=1e-8)
        torch.testing.assert_close(v, v0, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "cls, name", [(PairwiseLaplaceGP, "laplace"), (PairwiseEPGP, "ep")]
)
def test_without_deviations_the_population_is_everyone_pooled(cls, name):
    data = _data()
    model = population_model(
        data, model=name, covar_module=PopulationKernel(_kernel(0.3, 2.0), _Zero())
    ).eval()
    X, c = stack_participants(data)
    pooled = cls(X[:, :-1], c, covar_module=_kernel(0.3, 2.0)).eval()
    Xs = torch.rand(
        5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3)
    )
    post = utility_posterior(model, Xs.unsqueeze(-2))
    m0, v0 = _mean_var(pooled, Xs)
    torch.testing.assert_close(post.mean.reshape(-1).detach(), m0, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(
        post.variance.reshape(-1).detach(), v0, rtol=1e-6, atol=1e-8
    )


def test_a_new_participant_starts_from_the_population_posterior():
    data = _data()
    ind = _kernel(0.5, 0.3)
    model = population_model(
        data, model="laplace", covar_module=PopulationKernel(_kernel(0.3, 1.2), ind)
    ).eval()
    Xs = torch.rand(
        4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5)
    )
    pop = utility_posterior(model, Xs.unsqueeze(-2))
    new = utility_posterior(model, Xs.unsqueeze(-2), participant=17)
    torch.testing.assert_close(new.mean, pop.mean)
    prior_dev = ind(Xs, diag=True).detach()
    torch.testing.assert_close(
        new.variance.reshape(-1), pop.variance.reshape(-1) + prior_dev
    )
    x, mean, sd = favourite(model, Xs)
    assert mean == pytest.approx(pop.mean.max().item())
    assert disagreement(model, Xs) == pytest.approx(0.3 / 1.5)


def test_a_fitted_population_finds_the_shared_favourite():
    # 8 people whose utilities are a shared bump at (0.7, 0.3) plus small
    # individual tilts; each answers 12 noiseless random pairs
    g = torch.Generator().manual_seed(0)
    data = {}
    for p in range(8):
        X = torch.rand(10, 2, dtype=torch.float64, generator=g)
        tilt = 0.2 * torch.randn(2, dtype=torch.float64, generator=g)
        u = -((X - torch.tensor([0.7, 0.3])) ** 2).sum(-1) * 4 + X @ tilt
        pairs = torch.randint(0, 10, (12, 2), generator=g)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        win = u[pairs[:, 0]] > u[pairs[:, 1]]
        data[p] = (X, torch.where(win.unsqueeze(-1), pairs, pairs.flip(-1)))
    model = population_model(data, model="laplace")
    fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    model.eval()
    grid = torch.stack(
        torch.meshgrid(
            *[torch.linspace(0, 1, 21, dtype=torch.float64)] * 2, indexing="ij"
        ),
        -1,
    ).reshape(-1, 2)
    x, _, sd = favourite(model, grid)
    assert (x - torch.tensor([0.7, 0.3], dtype=torch.float64)).norm() < 0.2
    assert sd > 0
    assert 0 < disagreement(model, grid) < 0.5


@pytest.mark.parametrize(
    "data, error, message",
    [
        ([], InputTypeError, r"data must be a dict"),
        ({}, InputDataError, r"at least one participant"),
        ({-1: (torch.rand(3, 2), torch.tensor([[0, 1]]))}, InputDataError, r">= 0"),
        ({"a": (torch.rand(3, 2), torch.tensor([[0, 1]]))}, InputTypeError, r"ints"),
        ({0: torch.rand(3, 2)}, InputTypeError, r"\(X, comparisons\)"),
        (
            {
                0: (torch.rand(3, 2), torch.tensor([[0, 1]])),
                1: (torch.rand(3, 3), torch.tensor([[0, 1]])),
            },
            InputDataError,
            r"one d for all",
        ),
        (
            {0: (torch.rand(3, 2), torch.tensor([[0, 3]]))},
            InputDataError,
            r"index its 3",
        ),
        (
            {0: (torch.rand(3, 2), torch.tensor([[0.0, 1.0]]))},
            InputDataError,
            r"integer",
        ),
    ],
)
def test_bad_data_raises_typed_errors(data, error, message):
    with pytest.raises(error, match=message):
        stack_participants(data)


def test_bad_model_or_kernel_is_refused():
    data = _data((0,))
    with pytest.raises(InputDataError, match=r"model must be one of"):
        population_model(data, model="skew")
    with pytest.raises(InputTypeError, match=r"must be a PopulationKernel"):
        population_model(data, covar_module=ScaleKernel(_Zero()))
    assert POPULATION == -1


def test_a_participant_that_is_not_an_id_is_refused():
    model = population_model(_data(), model="laplace").eval()
    X = torch.rand(3, 2, dtype=torch.float64)
    with pytest.raises(InputTypeError, match=r"participant must be an int"):
        utility_posterior(model, X, participant=1.5)
    with pytest.raises(InputDataError, match=r"participant must be >= -1"):
        favourite(model, X, participant=-2)
