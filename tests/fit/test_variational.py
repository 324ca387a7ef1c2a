import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from scipy.stats import spearmanr

from prefbo import PairwiseLaplaceGP, PairwiseLaplaceMLL
from prefbo.data import ChoiceSets, PairwiseComparisons, Rankings
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.fit import VariationalFitResult, fit_variational
from prefbo.likelihoods import (
    JustNoticeableDifferenceLikelihood,
    ParetoPreferenceLikelihood,
    PlackettLuceLikelihood,
    PseudoRationalChoiceLikelihood,
)
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.utils.testing import make_pairwise_data


def _pairwise(n=40, m=300, seed=0, **tkwargs):
    X, comp, u = make_pairwise_data(n, m, seed=seed, **tkwargs)
    return PairwiseComparisons(X, comp), u


def test_recovers_a_known_utility_from_minibatches(tkwargs64):
    X, comp, u = make_pairwise_data(40, 500, seed=0, **tkwargs64)
    data = PairwiseComparisons(X, comp[:300])
    model = VariationalPreferenceGP(data, inducing_points=20)
    result = fit_variational(model, batch_size=100, epochs=40, lr=0.05, seed=0)
    assert isinstance(result, VariationalFitResult)
    assert result.elbo[-1] > result.elbo[0] + 20  # nats over 300 answers
    with torch.no_grad():
        mean = model.posterior(X).mean.squeeze(-1)
        held_out = PairwiseComparisons(X, comp[300:])
        logp = model.predictive_log_prob(held_out, chunk_size=64)
    rho = spearmanr(mean.cpu().numpy(), u.cpu().numpy()).correlation
    # as good as the (exact-inference-grade) Laplace GP with fitted hyperparameters
    laplace = PairwiseLaplaceGP(X, comp[:300])
    fit_gpytorch_mll(PairwiseLaplaceMLL(laplace.likelihood, laplace))
    with torch.no_grad():
        reference = laplace.posterior(X).mean.squeeze(-1)
    rho_laplace = spearmanr(reference.cpu().numpy(), u.cpu().numpy()).correlation
    assert rho > 0.85 and rho > rho_laplace - 0.05, (rho, rho_laplace)
    # the model orders held-out pairs like the true utility does
    w, l = comp[300:, 0], comp[300:, 1]
    agree = ((mean[w] - mean[l]) * (u[w] - u[l]) > 0).double().mean()
    assert agree > 0.85
    # predictive probabilities of the (noisy) held-out answers beat a coin
    assert logp.shape == (200,) and (logp < 0).all()
    assert logp.mean() > torch.tensor(0.5).log() + 0.1


def test_same_seed_same_trajectory_different_seed_differs():
    data, _ = _pairwise(n=20, m=120)

    def run(seed):
        torch.manual_seed(0)  # same construction
        model = VariationalPreferenceGP(data, inducing_points=8)
        return fit_variational(model, batch_size=32, epochs=4, lr=0.05, seed=seed).elbo

    first, again, other = run(3), run(3), run(4)
    assert first == again
    assert first != other


def _zoo():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(20, 2, generator=g, dtype=torch.float64)
    u = torch.stack([X.sum(-1), X[:, 0] - X[:, 1]], -1)  # two utilities
    i = torch.randint(20, (60,), generator=g)
    j = (i + torch.randint(1, 20, (60,), generator=g)) % 20
    better = u[i, 0] > u[j, 0]
    comp = torch.stack([torch.where(better, i, j), torch.where(better, j, i)], -1)
    close = (u[i, 0] - u[j, 0]).abs() < 0.2
    pairs = PairwiseComparisons(X, comp[~close], comp[close])
    dom_ij, dom_ji = (u[i] > u[j]).all(-1), (u[j] > u[i]).all(-1)
    rows = torch.stack([torch.where(dom_ji, j, i), torch.where(dom_ji, i, j)], -1)
    conflict = ~dom_ij & ~dom_ji  # rows [x, y]: x dominates y, or a conflict
    pareto = PairwiseComparisons(X, rows[~conflict], rows[conflict])
    sets = torch.stack([torch.randperm(20, generator=g)[:3] for _ in range(30)])
    us = u[sets]  # 30 x 3 x 2
    best = us.argmax(-2)  # 30 x 2: the best option in each utility
    chosen = torch.zeros(30, 3, dtype=torch.bool)
    chosen.scatter_(1, best, True)
    choices = ChoiceSets(X, sets, chosen)
    contexts = torch.rand(30, 2, generator=g, dtype=torch.float64)
    scores = torch.stack([contexts[:, 0], contexts[:, 1], 1 - contexts[:, 0]], -1)
    rankings = Rankings(contexts, scores.argsort(-1, descending=True), num_labels=3)
    return [
        ("jnd", pairs, JustNoticeableDifferenceLikelihood(threshold=0.3), {}),
        ("pareto", pareto, ParetoPreferenceLikelihood(), {"num_utilities": 2}),
        ("plackett_luce", rankings, PlackettLuceLikelihood(), {}),
        (
            "pseudo_rational",
            choices,
            PseudoRationalChoiceLikelihood(num_samples=64),
            {"num_utilities": 2},
        ),
        ("probit", PairwiseComparisons(X, comp), None, {}),
    ]


@pytest.mark.parametrize("case", _zoo(), ids=lambda c: c[0])
def test_short_training_increases_the_elbo_for_each_likelihood(case):
    _, data, likelihood, kwargs = case
    model = VariationalPreferenceGP(data, likelihood, inducing_points=8, **kwargs)
    with torch.no_grad():
        before = model.elbo()
    fit_variational(model, batch_size=16, epochs=5, lr=0.05, seed=0)
    with torch.no_grad():
        after = model.elbo()
    assert after > before + 1.0


def test_jnd_threshold_is_learned_with_the_hyperparameters():
    _, data, likelihood, _ = _zoo()[0]
    model = VariationalPreferenceGP(data, likelihood, inducing_points=8)
    start = float(likelihood.threshold.detach())
    fit_variational(model, batch_size=16, epochs=3, lr=0.05, seed=0)
    assert float(likelihood.threshold.detach()) != start


def test_final_lr_decays_the_steps():
    data, _ = _pairwise(n=15, m=40)

    def run(**kwargs):
        torch.manual_seed(0)
        model = VariationalPreferenceGP(data, inducing_points=6)
        fit_variational(model, epochs=6, lr=0.05, seed=0, **kwargs)
        return model.base_variational_strategy.variational_distribution.mean

    constant, decayed = run(), run(final_lr=0.0005)
    start = torch.zeros_like(constant)
    # the same gradients, smaller steps: the mean moves less far from zero
    assert (decayed - start).norm() < (constant - start).norm()


def test_learn_hyperparameters_false_keeps_the_kernel():
    data, _ = _pairwise(n=15, m=40)
    model = VariationalPreferenceGP(data, inducing_points=6)
    before = {k: v.clone() for k, v in model.covar_module.state_dict().items()}
    Z = model.base_variational_strategy.inducing_points.detach().clone()
    fit_variational(model, epochs=3, learn_hyperparameters=False, seed=0)
    for k, v in model.covar_module.state_dict().items():
        assert torch.equal(v, before[k])
    assert torch.equal(model.base_variational_strategy.inducing_points, Z)
    assert not model.training


def test_early_stopping_and_progress(capsys):
    data, _ = _pairwise(n=15, m=40)
    model = VariationalPreferenceGP(data, inducing_points=6)
    seen = []
    result = fit_variational(
        model,
        epochs=50,
        lr=1e-6,  # no measurable progress
        early_stopping_patience=2,
        min_delta=0.01,
        progress=lambda epoch, info: seen.append((epoch, sorted(info))),
        seed=0,
    )
    assert result.stopped_early and result.num_epochs == 3
    assert seen == [(e, ["elbo", "elbo_per_answer", "seconds"]) for e in range(3)]
    assert len(result.seconds) == 3 and 0 <= result.best_epoch < 3
    fit_variational(model, epochs=2, progress=True, early_stopping_patience=None)
    err = capsys.readouterr().err  # the tqdm bar, finished
    assert "fit_variational" in err and "2/2" in err and "ELBO/answer" in err


def test_fit_typed_errors():
    data, _ = _pairwise(n=10, m=20)
    model = VariationalPreferenceGP(data, inducing_points=4)
    with pytest.raises(
        InputTypeError, match="model must be a VariationalPreferenceGP; got str"
    ):
        fit_variational("model")
    with pytest.raises(
        InputDataError, match="batch_size must be an int >= 1; got batch_size=0"
    ):
        fit_variational(model, batch_size=0)
    with pytest.raises(
        InputTypeError, match="epochs must be an int >= 1; got float 1.5"
    ):
        fit_variational(model, epochs=1.5)
    with pytest.raises(
        InputDataError, match="lr must be a finite float > 0; got lr=-1.0"
    ):
        fit_variational(model, lr=-1.0)
    with pytest.raises(InputTypeError, match="lr must be a finite float > 0; got str"):
        fit_variational(model, lr="0.01")
    with pytest.raises(
        InputDataError,
        match="early_stopping_patience must be None or an int >= 1; got "
        "early_stopping_patience=0",
    ):
        fit_variational(model, early_stopping_patience=0)
    with pytest.raises(
        InputDataError,
        match=r"final_lr must be None or a float in \(0, 0\.01\]; got final_lr=1\.0",
    ):
        fit_variational(model, lr=0.01, final_lr=1.0)
    with pytest.raises(
        InputDataError,
        match="min_delta must be a finite float >= 0; got min_delta=-1.0",
    ):
        fit_variational(model, min_delta=-1)
    with pytest.raises(InputDataError, match="got min_delta=inf"):
        fit_variational(model, min_delta=float("inf"))
    with pytest.raises(
        InputTypeError, match="seed must be None or an int; got str '1'"
    ):
        fit_variational(model, seed="1")
    with pytest.raises(InputTypeError, match="progress must be a bool or a callable"):
        fit_variational(model, progress="yes")
    empty = VariationalPreferenceGP(inducing_points=data.datapoints[:3])
    with pytest.raises(InputDataError, match="the model has no data"):
        fit_variational(empty)
