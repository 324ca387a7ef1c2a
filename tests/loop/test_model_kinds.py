import warnings

import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.optim import optimize_acqf

from prefbo import PairwiseEPMLL, PairwiseLaplaceMLL, SkewGP
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.loop import model_kinds
from prefbo.loop.model_kinds import (
    EP_POSTERIOR_TOL,
    LaplaceKind,
    ModelKind,
    get_model_kind,
    model_kind_names,
    register_model_kind,
)
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.test_functions import Branin, SimulatedPerson

BOUNDS = Branin().bounds


def test_the_kinds_are_registered_in_order():
    assert model_kind_names() == ("laplace", "ep", "skew", "variational")
    assert get_model_kind("ep").model_class is PairwiseEPGP
    with pytest.raises(InputDataError, match=r"model must be one of .*got 'gp'"):
        get_model_kind("gp")
    with pytest.raises(InputTypeError, match=r"model must be a str .*got list"):
        get_model_kind(["ep"])


def test_a_kind_declares_what_its_posterior_offers():
    # built-in kinds say what they offer; a kind of one's own offers nothing
    # it did not declare, so a strategy that needs it is refused up front
    assert [
        (get_model_kind(k).gaussian_posterior, get_model_kind(k).pathwise_samples)
        for k in model_kind_names()
    ] == [(True, True), (True, True), (False, False), (True, True)]

    class Mine(ModelKind):
        model_class = PairwiseLaplaceGP

        def build(self, designs, comparisons, covar_module=None):
            return PairwiseLaplaceGP(designs, comparisons)

        def fit(self, model, fit_options):
            return None

    assert not Mine.gaussian_posterior and not Mine.pathwise_samples
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(model_kinds.MODEL_KINDS.entries, "mine", Mine)
        with pytest.raises(UnsupportedError, match="model='mine' does not provide"):
            PreferentialOptimizer(BOUNDS, model="mine", strategy="ts")


def test_ep_builds_with_the_loops_site_tolerance():
    X = torch.rand(4, 2, dtype=torch.float64)
    comps = torch.tensor([[0, 1], [2, 3]])
    kind = get_model_kind("ep")({}, seed=0)
    assert kind.build(X, comps)._options["tol"] == EP_POSTERIOR_TOL
    assert (
        get_model_kind("ep")({"tol": 1e-3}, 0).build(X, comps)._options["tol"] == 1e-3
    )


def test_a_registered_kind_runs_in_the_optimizer_and_warm_starts_from_the_fit(
    monkeypatch,
):
    calls = []

    class Recording(LaplaceKind):
        def warm_start(self, model, previous):
            calls.append((model.n, previous.n, type(previous)))
            super().warm_start(model, previous)

    monkeypatch.setitem(model_kinds.MODEL_KINDS.entries, "recording", Recording)
    opt = PreferentialOptimizer(
        BOUNDS, model="recording", strategy="random", refit_every=2
    )
    problem = Branin()
    for _ in range(4):
        X = opt.ask()
        opt.tell(int(problem(X).argmax()))
    assert isinstance(opt.model, PairwiseLaplaceGP)
    # the fit at 4 answers from the one at 2, the model at 4 from the fit at 4
    assert calls == [(8, 4, PairwiseLaplaceGP), (8, 8, PairwiseLaplaceGP)]
    assert opt.config["model"] == "recording"


def test_registering_checks_its_arguments(monkeypatch):
    monkeypatch.setattr(
        model_kinds.MODEL_KINDS, "entries", dict(model_kinds.MODEL_KINDS.entries)
    )
    with pytest.raises(InputTypeError, match="kind must be a ModelKind subclass"):
        register_model_kind("mine", LaplaceKind({}, 0))
    with pytest.raises(InputTypeError, match="name must be a str; got int"):
        register_model_kind(3, LaplaceKind)
    with pytest.raises(InputDataError, match="'ep' is already registered"):
        register_model_kind("ep", LaplaceKind)

    class Mine(ModelKind):
        model_class = PairwiseLaplaceGP

    register_model_kind("mine", Mine)
    assert model_kind_names()[-1] == "mine"
    # model_options are checked against the kind's class
    with pytest.raises(InputDataError, match=r"model='mine' has unknown key"):
        PreferentialOptimizer(BOUNDS, model="mine", model_options={"bogus": 1})


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


@pytest.mark.parametrize("warm", [True, False])
def test_a_kernel_given_in_model_options_is_copied_not_fitted_in_place(warm):
    # the user's kernel is where every fit starts, never the fitted object:
    # fitting it in place would change the user's object, make two
    # optimisers given it share their fits, and (cold refits) start each
    # fit where the last one ended
    from prefbo.kernels.defaults import default_preference_covar_module

    kernel = default_preference_covar_module(2)
    before = {k: v.clone() for k, v in kernel.state_dict().items()}
    opt = PreferentialOptimizer(
        BOUNDS,
        seed=0,
        warm_start_fits=warm,
        model_options={"covar_module": kernel},
    )
    person = SimulatedPerson(Branin(), noise_std=0.1, seed=0)
    for _ in range(4):
        x = opt.ask()
        opt.tell(person.compare(x[0], x[1]), options=x)
    assert opt.model is not None  # every fit made
    for k, v in kernel.state_dict().items():
        assert torch.equal(v, before[k]), k
    kernels = [opt.models.fitted(c).covar_module for c in range(0, 5)]
    assert all(k is not kernel for k in kernels)
    assert len({id(k) for k in kernels}) == len(kernels)
    if not warm:  # each cold refit starts at the user's kernel, so a refit
        # of the same answers from a fresh optimiser gives the same result
        again = PreferentialOptimizer(
            BOUNDS,
            seed=0,
            warm_start_fits=False,
            model_options={"covar_module": kernel},
        )
        for t in opt.history[:3]:
            again.tell(t.answer, options=t.options)
        assert torch.allclose(
            again.models.fitted(3).covar_module.outputscale,
            opt.models.fitted(3).covar_module.outputscale,
        )
