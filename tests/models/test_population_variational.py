import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.kernels import default_preference_covar_module
from prefbo.kernels.population import PopulationKernel
from prefbo.models.population import population_model, utility_posterior
from prefbo.models.population_variational import VariationalPopulationGP


def _kernel(lengthscale, outputscale):
    k = default_preference_covar_module(2)
    k.base_kernel.lengthscale, k.outputscale = lengthscale, outputscale
    return k


def _population(P=4, n=8, m=15, seed=0):
    g = torch.Generator().manual_seed(seed)
    data, rows, who, comps, offset = {}, [], [], [], 0
    for p in range(P):
        X = torch.rand(n, 2, dtype=torch.float64, generator=g)
        tilt = 0.5 * torch.randn(2, dtype=torch.float64, generator=g)
        u = -4 * ((X - torch.tensor([0.7, 0.3])) ** 2).sum(-1) + X @ tilt
        pairs = torch.randint(0, n, (m, 2), generator=g)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        win = (u[pairs[:, 0]] > u[pairs[:, 1]]).unsqueeze(-1)
        c = torch.where(win, pairs, pairs.flip(-1))
        data[p] = (X, c)
        rows.append(X), who.append(torch.full((n,), p)), comps.append(c + offset)
        offset += n
    return data, torch.cat(rows), torch.cat(who), torch.cat(comps)


@pytest.fixture(scope="module")
def fitted():
    # hyperparameters and inducing points fixed (all 32 designs for g, 16
    # for the deviations): only q is fitted, so the model is the variational
    # posterior of the exact population model
    data, X, who, comps = _population()
    model = VariationalPopulationGP(
        X,
        who,
        comps,
        num_inducing=(64, 16),
        population_kernel=_kernel(0.3, 2.0),
        individual_kernel=_kernel(0.4, 0.5),
    )
    for part in (model.population, model.individual):
        part.Z.requires_grad_(False)
        for prm in part.kernel.parameters():
            prm.requires_grad_(False)
    history = model.fit(epochs=200, lr=0.05)
    exact = population_model(
        data,
        model="ep",
        covar_module=PopulationKernel(_kernel(0.3, 2.0), _kernel(0.4, 0.5)),
    ).eval()
    return model, exact, history


def test_the_variational_posterior_is_ep_s_to_a_few_percent(fitted):
    model, exact, history = fitted
    assert history[-1] > history[0]
    T = torch.rand(
        6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        for p in (-1, 2):
            a = model.posterior(T, participant=p)
            b = utility_posterior(exact, T, participant=p)
            torch.testing.assert_close(a.mean, b.mean, rtol=0.03, atol=0.02)
            # within a few per cent of EP's sd: narrower where the inducing
            # points hold the designs (the population's), wider where 16
            # shared points summarise a person's 8 designs
            ratio = a.variance.sqrt() / b.variance.sqrt()
            assert bool(((ratio > 0.93) & (ratio < 1.05)).all())


def test_a_new_participant_is_the_population_plus_a_deviation_s_prior(fitted):
    model, _, _ = fitted
    T = torch.rand(
        5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )
    with torch.no_grad():
        pop = model.posterior(T)
        new = model.posterior(T, participant=model.num_participants)
        prior = model.individual.kernel(T).to_dense()
    torch.testing.assert_close(new.mean, pop.mean)
    torch.testing.assert_close(
        new.distribution.covariance_matrix,
        pop.distribution.covariance_matrix + prior,
    )
    assert model.disagreement() == pytest.approx(0.5 / 2.5)


def test_batched_designs_get_their_own_blocks(fitted):
    model, _, _ = fitted
    T = torch.rand(
        3, 4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3)
    )
    with torch.no_grad():
        batched = model.posterior(T, participant=1)
        for i in range(3):
            one = model.posterior(T[i], participant=1)
            torch.testing.assert_close(batched.mean[i], one.mean)
            torch.testing.assert_close(
                batched.distribution.covariance_matrix[i],
                one.distribution.covariance_matrix,
            )


def test_answers_across_participants_are_refused():
    _, X, who, comps = _population(P=2)
    bad = torch.tensor([[0, 8]])  # a design of participant 0 against one of 1
    with pytest.raises(InputDataError, match=r"one participant"):
        VariationalPopulationGP(X, who, bad)
    with pytest.raises(InputDataError, match=r"one id per design"):
        VariationalPopulationGP(X, who[:-1], comps)
    with pytest.raises(InputDataError, match=r"ids must lie in \[0, 1\)"):
        VariationalPopulationGP(X, who, comps, num_participants=1)


def test_bad_participants_and_types_are_refused(fitted):
    model, _, _ = fitted
    T = torch.rand(3, 2, dtype=torch.float64)
    with pytest.raises(InputTypeError, match=r"participant must be an int"):
        model.posterior(T, participant=1.5)
    with pytest.raises(InputDataError, match=r"participant must be >= -1"):
        model.posterior(T, participant=-2)
    _, X, who, comps = _population(P=2)
    with pytest.raises(InputTypeError, match=r"participants must be an integer"):
        VariationalPopulationGP(X, who.tolist(), comps)
    with pytest.raises(InputTypeError, match=r"comparisons must be an integer"):
        VariationalPopulationGP(X, who, comps.double())
