import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.models.collaborative.questions import (
    believed_answers,
    imagined_posteriors,
    next_questions,
    pair_eubo,
)


def copy_module(model):
    import copy

    return copy.deepcopy(model)


@pytest.fixture
def model(small_fitted):
    return small_fitted


def test_pair_eubo_matches_botorch_and_monte_carlo(model):
    X = model.designs[:6]
    post = model.posterior(X, person=2)
    mean, cov = post.mean.squeeze(-1)[None], post.mvn.covariance_matrix[None]
    table = pair_eubo(mean, cov)[0]
    acq = AnalyticExpectedUtilityOfBestOption(pref_model=model.person_model(2))
    pairs = torch.tensor([[0, 1], [2, 5], [4, 3]])
    torch.testing.assert_close(table[pairs[:, 0], pairs[:, 1]], acq(X[pairs]))
    with torch.no_grad():
        draws = post.rsample(torch.Size([200_000])).squeeze(-1)
    mc = torch.maximum(draws[:, 0], draws[:, 1]).mean()
    assert abs(float(mc - table[0, 1].detach())) < 0.01
    torch.testing.assert_close(table, table.T)


def test_each_person_gets_the_best_pair_of_their_own(model):
    X = model.designs[:8]
    people = torch.tensor([0, 5, 9])
    pairs = next_questions(model, people, X)
    assert pairs.shape == (3, 2) and bool((pairs[:, 0] != pairs[:, 1]).all())
    for p, (a, b) in zip(people.tolist(), pairs.tolist(), strict=True):
        with torch.no_grad():
            post = model.posterior(X, person=p)
        table = pair_eubo(
            post.mean.squeeze(-1)[None], post.mvn.covariance_matrix[None]
        )[0]
        assert float(table[a, b]) >= float(table.triu(1).max()) - 1e-9


def test_a_newcomers_first_question_comes_from_the_population(model):
    new = model.add_person()
    X = model.designs[:8]
    pair = next_questions(model, torch.tensor([new]), X)[0]
    with torch.no_grad():
        post = model.posterior(X)
    table = pair_eubo(post.mean.squeeze(-1)[None], post.mvn.covariance_matrix[None])[0]
    assert float(table[pair[0], pair[1]]) == pytest.approx(float(table.triu(1).max()))


def test_thompson_pairs_are_distinct_and_seeded(model):
    X, people = model.designs[:8], torch.arange(10)
    a = next_questions(model, people, X, strategy="thompson", seed=3)
    b = next_questions(model, people, X, strategy="thompson", seed=3)
    assert torch.equal(a, b) and bool((a[:, 0] != a[:, 1]).all())


def test_chunks_give_the_same_questions(model, monkeypatch):
    X, people = model.designs[:8], torch.arange(12)
    whole = next_questions(model, people, X)
    monkeypatch.setattr("prefbo.models.collaborative.questions.CHUNK_ENTRIES", 64 * 5)
    assert torch.equal(next_questions(model, people, X), whole)


def test_errors(model):
    X = model.designs[:4]
    with pytest.raises(InputDataError, match="strategy must be one of"):
        next_questions(model, torch.tensor([0]), X, strategy="ucb")
    for bad in (torch.tensor([0.0]), torch.tensor([True]), torch.tensor([[0]])):
        with pytest.raises(InputTypeError, match="people must be a 1-d integer"):
            next_questions(model, bad, X)
    with pytest.raises(InputDataError, match="candidates must be a C x 2 floating"):
        next_questions(model, torch.tensor([0]), torch.rand(4, 3, dtype=torch.float64))
    bad = X.clone()
    bad[1, 0] = float("nan")
    with pytest.raises(InputDataError, match="candidates must be finite"):
        next_questions(model, torch.tensor([0]), bad)
    assert next_questions(model, torch.tensor([0]), X.float()).shape == (1, 2)
    with pytest.raises(InputDataError, match="exclude must be 1 x 2 candidate"):
        next_questions(model, torch.tensor([0]), X, exclude=torch.tensor([[0, 4]]))
    with pytest.raises(InputDataError, match="exclude must be 1 x 2 candidate"):
        next_questions(model, torch.tensor([0]), X, exclude=torch.tensor([0, 1]))
    with pytest.raises(InputDataError, match="at least 2 designs; got 1"):
        next_questions(model, torch.tensor([0]), X[:1])
    with pytest.raises(
        InputDataError, match=r"person ids, in \[0, 60\); got values from 0 to 60"
    ):
        next_questions(model, torch.tensor([0, 60]), X)


@pytest.mark.parametrize("items", [True, False])
def test_questions_on_every_device_and_dtype(population, tkwargs, items):
    X, answers, _, _ = population(**tkwargs)
    m = CollaborativePreferenceGP(
        X, answers, num_inducing=12, num_residual=3, item_effects=items
    )
    assert m.num_items == (20 if items else 0)
    m.fit(steps=5)
    new = m.add_person()
    people = torch.tensor([0, 7, new], device=X.device)
    for strategy in ("eubo", "thompson"):
        pairs = next_questions(m, people, X[:10], strategy=strategy)
        assert pairs.shape == (3, 2) and pairs.device == X.device
        assert bool((pairs[:, 0] != pairs[:, 1]).all())


def test_a_float32_model_asks_the_best_eubo_pair_of_near_candidates(twins):
    # candidates ~1e-4 apart: their pairs' difference variances
    # v_a + v_b - 2 c_ab are ~2e-7 of v ~ 2.6, float32's rounding of v; from
    # float32 tables the float32 model asked 8 of the 60 people a pair up to
    # 1.4e-4 worse in EUBO than the best (the median gap between the best
    # pair and the next is 4.3e-5)
    m64, m32, cluster = twins
    X, people = cluster(16, 1e-4), torch.arange(60, device=m64.designs.device)
    pairs = next_questions(m32, people, X.float())
    with torch.no_grad():
        posts = [m64.posterior(X, person=p).mvn for p in people.tolist()]
    mean = torch.stack([post.mean for post in posts])  # 60 x 16
    cov = torch.stack([post.covariance_matrix for post in posts])  # 60 x 16 x 16
    table = pair_eubo(mean, cov)  # the float64 model's
    upper = torch.ones(16, 16, dtype=torch.bool, device=X.device).triu(1)
    best = table.masked_fill(~upper, float("-inf")).amax((-2, -1))
    regret = best - table[people, pairs[:, 0], pairs[:, 1]]
    assert float(regret.max()) < 1e-6
    assert torch.equal(pairs, next_questions(m64, people, X))


def test_a_float32_models_thompson_draws_follow_the_posterior(twins):
    # Thompson's first design is the maximum of a posterior draw: over 4000
    # draws for one person, its frequencies match the float64 model's
    # posterior (an eigendecomposition's draws); from float32 tables the
    # Cholesky factor of the near-singular table failed and the float32
    # model's frequencies were 0.83 away in total variation
    m64, m32, cluster = twins
    X, N, p = cluster(24, 1e-2), 4000, 3
    with torch.no_grad():
        post = m64.posterior(X, person=p)
    vals, vecs = torch.linalg.eigh(post.mvn.covariance_matrix)
    g = torch.Generator().manual_seed(9)
    z = torch.randn(100_000, 24, generator=g, dtype=torch.float64).to(X.device)
    draws = post.mean.reshape(-1) + (z * vals.clamp_min(0).sqrt()) @ vecs.T
    reference = torch.bincount(draws.argmax(-1), minlength=24) / len(draws)
    people = torch.full((N,), p, device=X.device)
    for model in (m64, m32):
        first = next_questions(
            model, people, X.to(model.designs), strategy="thompson", seed=1
        )[:, 0]
        freq = torch.bincount(first, minlength=24) / N
        assert 0.5 * float((freq - reference).abs().sum()) < 0.08


def test_believed_answers_are_the_likelier_option(model):
    people = torch.tensor([0, 3, 7])
    options = model.designs[torch.tensor([[0, 1], [2, 3], [4, 5]])]
    with torch.no_grad():
        means = [
            model.posterior(o, person=int(p)).mean.reshape(-1)
            for p, o in zip(people, options, strict=True)
        ]
    expected = torch.stack([m.argmax() for m in means])
    assert torch.equal(believed_answers(model, people, options), expected)


def test_imagined_posteriors_equal_an_observed_answer_on_a_copy(model):
    # the look-ahead posterior after one more answer is what observe()
    # stores, without storing it
    people = torch.tensor([1, 4])
    winners, losers = torch.tensor([3, 6]), torch.tensor([8, 2])
    before = model.latent_mean.clone()
    imagined = imagined_posteriors(model, people, winners, losers)
    assert torch.equal(model.latent_mean, before)
    assert int(model.answers.counts()[1]) == 12
    for b, p in enumerate(people.tolist()):
        copy = copy_module(model)
        post = copy.observe(p, winners[b : b + 1], losers[b : b + 1])
        torch.testing.assert_close(imagined.mean[b], post.mean[0], atol=1e-6, rtol=0)
        torch.testing.assert_close(
            imagined.precision_chol[b], post.precision_chol[0], atol=1e-6, rtol=0
        )


def test_questions_from_given_posteriors(model):
    # next_questions on imagined posteriors = on a copy that observed them
    X, people = model.designs[:8], torch.tensor([2, 5])
    winners, losers = torch.tensor([0, 1]), torch.tensor([1, 0])
    latent = imagined_posteriors(model, people, winners, losers)
    pairs = next_questions(model, people, X, latent=latent)
    copy = copy_module(model)
    for b, p in enumerate(people.tolist()):
        copy.observe(p, winners[b : b + 1], losers[b : b + 1])
    assert torch.equal(pairs, next_questions(copy, people, X))
    with pytest.raises(InputDataError, match="latent"):
        next_questions(
            model,
            people,
            X,
            latent=imagined_posteriors(model, people[:1], winners[:1], losers[:1]),
        )


def test_an_excluded_pair_is_not_asked_again(model):
    # the question on screen is not asked again: its pair is excluded, and
    # the best other pair comes instead
    X, people = model.designs[:8], torch.tensor([2, 5])
    best = next_questions(model, people, X)
    again = next_questions(model, people, X, exclude=best)
    second = next_questions(model, people, X, exclude=best.flip(-1))  # either order
    assert torch.equal(again, second)
    for b, p in enumerate(people.tolist()):
        assert set(again[b].tolist()) != set(best[b].tolist())
        with torch.no_grad():
            post = model.posterior(X, person=p)
        table = pair_eubo(post.mean.reshape(1, -1), post.mvn.covariance_matrix[None])[0]
        table = table.triu(1)
        i, j = sorted(best[b].tolist())
        table[i, j] = float("-inf")
        assert float(
            table[again[b, 0], again[b, 1]].max(table[again[b, 1], again[b, 0]])
        ) == pytest.approx(float(table.max()))
    none = torch.full((2, 2), -1)
    assert torch.equal(next_questions(model, people, X, exclude=none), best)
    ts = next_questions(model, people, X, strategy="thompson", seed=4)
    ts_again = next_questions(model, people, X, strategy="thompson", seed=4, exclude=ts)
    for b in range(2):
        assert set(ts_again[b].tolist()) != set(ts[b].tolist())


def test_thompson_draws_from_a_table_without_a_cholesky_factor():
    # a rank-one table that rounding made slightly indefinite: Cholesky
    # fails, and the draws must still be the rank-one posterior's, whose
    # maximum is design 0 (z > 0) or design 3 (z < 0), each half the time
    from prefbo.models.collaborative.questions import _thompson_pairs

    v = torch.tensor([1.0, 0.5, -0.2, -1.0], dtype=torch.float64)
    cov = torch.outer(v, v) - 1e-6 * torch.eye(4, dtype=torch.float64)
    assert torch.linalg.cholesky_ex(cov)[1] > 0
    B = 4000
    g = torch.Generator().manual_seed(0)
    pairs = _thompson_pairs(
        torch.zeros(B, 4, dtype=torch.float64),
        cov.expand(B, 4, 4),
        g,
        torch.full((B, 2), -1),
    )
    first = torch.bincount(pairs[:, 0], minlength=4)
    assert first[1] + first[2] <= 0.01 * B
    assert abs(int(first[0]) - B / 2) < 0.05 * B


def test_imagined_posteriors_of_several_answers_each_equal_observed_ones(model):
    # k answers per person (B x k rows), as a question's virtual comparisons
    people = torch.tensor([0, 3])
    winners = torch.tensor([[3, 5, 7], [6, 1, 2]])
    losers = torch.tensor([[8, 2, 9], [2, 4, 0]])
    imagined = imagined_posteriors(model, people, winners, losers)
    assert int(model.answers.counts()[0]) == 12  # nothing stored
    for b, p in enumerate(people.tolist()):
        copy = copy_module(model)
        post = copy.observe(p, winners[b], losers[b])
        torch.testing.assert_close(imagined.mean[b], post.mean[0], atol=1e-6, rtol=0)
        torch.testing.assert_close(
            imagined.precision_chol[b], post.precision_chol[0], atol=1e-6, rtol=0
        )
