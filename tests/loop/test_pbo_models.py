import warnings

import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.optim import optimize_acqf

from prefbo import (
    PairwiseEPGP,
    PairwiseEPMLL,
    PairwiseLaplaceGP,
    PairwiseLaplaceMLL,
    SkewGP,
)
from prefbo.test_functions import Branin, SimulatedPerson


def _fit(kind, X, comp):
    if kind == "laplace":
        model = PairwiseLaplaceGP(X, comp)
        fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    elif kind == "ep":
        model = PairwiseEPGP(X, comp)
        fit_gpytorch_mll(PairwiseEPMLL(model.likelihood, model))
    else:
        model = SkewGP(X, comp, num_samples=256, burnin=50, seed=0)
        model.fit_hyperparameters("ep")
    return model


@pytest.mark.parametrize("kind", ["laplace", "ep", "skew"])
def test_a_short_eubo_loop_runs_with_each_model(kind):
    problem = Branin()
    person = SimulatedPerson(problem, noise_std=0.1, seed=0)
    g = torch.Generator().manual_seed(0)
    lo, hi = problem.bounds
    X = lo + (hi - lo) * torch.rand(6, 2, generator=g, dtype=torch.float64)
    comp = torch.tensor([[0, 1], [2, 3], [4, 5]])
    for k in range(3):  # orient the initial answers by the person
        if person.compare(X[2 * k], X[2 * k + 1]) == 1:
            comp[k] = comp[k].flip(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizationWarning)
        for it in range(3):
            model = _fit(kind, X, comp)
            acq = AnalyticExpectedUtilityOfBestOption(pref_model=model)
            pair, value = optimize_acqf(
                acq,
                problem.bounds,
                q=2,
                num_restarts=2,
                raw_samples=32,
                options={"maxiter": 30, "seed": it},
            )
            assert torch.isfinite(value)
            winner = person.compare(pair[0], pair[1])
            n = X.shape[0]
            X = torch.cat([X, pair.detach()])
            comp = torch.cat([comp, torch.tensor([[n + winner, n + 1 - winner]])])
        model = _fit(kind, X, comp)
    mean = model.posterior(X.unsqueeze(-2)).mean.reshape(-1)
    regret = problem.optimal_value - problem(X[mean.argmax()]).item()
    assert 0 <= regret < 2.5
