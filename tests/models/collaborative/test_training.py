import pytest
import torch

from prefbo.exceptions import InputTypeError
from prefbo.models.collaborative import CollaborativePreferenceGP, shared, training
from prefbo.models.collaborative.shared import COLLAPSED, SCALE_BOUNDS
from prefbo.models.collaborative.training import full_elbo, minibatch_elbo


def test_elbo_gradients_match_finite_differences(population):
    X, answers, _, _ = population(P=20)
    U = torch.randn(
        20, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3)
    )
    model = CollaborativePreferenceGP(
        X,
        answers,
        person_features=U,
        num_inducing=10,
        num_residual=3,
        item_effects=True,
    )
    model.fit(steps=5)
    with torch.no_grad():
        model.feature_map.normal_()
    people = torch.arange(0, 20, 2)
    model.update_people(people)

    def elbo():
        return minibatch_elbo(model, people, 20, answers.shape[0])

    model.zero_grad()
    elbo().backward()
    g = torch.Generator().manual_seed(0)
    checked = 0
    for name, p in model.named_parameters():
        flat = p.data.view(-1)
        for i in torch.randperm(flat.numel(), generator=g)[:3].tolist():
            old, h = float(flat[i]), 1e-6
            with torch.no_grad():
                flat[i] = old + h
                up = float(elbo())
                flat[i] = old - h
                down = float(elbo())
                flat[i] = old
            fd = (up - down) / (2 * h)
            got = float(p.grad.view(-1)[i])
            assert abs(got - fd) <= 1e-5 * max(1.0, abs(fd)), (name, i, got, fd)
            checked += 1
    assert checked >= 15


def principal_cosines(A, B):
    Qa, _ = torch.linalg.qr(A - A.mean(0))
    Qb, _ = torch.linalg.qr(B - B.mean(0))
    return torch.linalg.svdvals(Qa.T @ Qb)


def test_planted_tastes_are_recovered(population):
    r"""The span of the fitted shared and taste functions holds the planted
    ones: the principal angles between the two column spaces at the designs
    are small (cosines near 1), and a spare taste shrinks away."""
    X, answers, F, H = population(P=150, n=30, answers=15, seed=2)
    model = CollaborativePreferenceGP(
        X, answers, num_tastes=3, num_inducing=30, num_residual=0
    )
    history = model.fit(steps=250)
    assert sum(history[-20:]) > sum(history[:20])
    with torch.no_grad():
        mean = model.shared.means(model.shared.basis(X), model.item_ids(X))
    scales = model.shared.scale.detach()[1:]
    kept = scales > 0.2 * scales.max()
    assert int(kept.sum()) == 2, scales
    fitted = torch.cat([mean[:1], mean[1:][kept]]).T  # n x 3
    cosines = principal_cosines(H, fitted)
    assert cosines.min() > 0.9, cosines
    # and the people are told apart: each one's utility is predicted
    agree = [
        torch.corrcoef(torch.stack([model.utility_mean(p), F[p]]))[0, 1]
        for p in range(150)
    ]
    assert torch.stack(agree).median() > 0.85


def test_fits_are_reproducible_and_continue(population):
    X, answers, _, _ = population(P=20)
    a = CollaborativePreferenceGP(X, answers, num_inducing=10)
    b = CollaborativePreferenceGP(X, answers, num_inducing=10)
    torch.testing.assert_close(
        torch.tensor(a.fit(steps=8)), torch.tensor(b.fit(steps=8))
    )
    more = a.fit(steps=3)
    assert len(more) == 3
    assert a.fit(steps=0) == []


def test_uneven_answer_counts_give_finite_gradients():
    r"""People with fewer answers are padded: the padding must not poison the
    gradient (a zero variance under a square root)."""
    X = torch.rand(5, 2, dtype=torch.float64)
    answers = torch.tensor([[0, 0, 1], [0, 2, 3], [1, 4, 0]])
    model = CollaborativePreferenceGP(X, answers, num_inducing=5)
    model.fit(steps=3)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def two_groups(P=6, answers=10, seed=0):
    r"""``P`` people on 40 random designs of the unit square, alternately of
    two groups whose favourites are at ``x_0 = 0.15`` and ``0.85``, each
    answering ``answers`` random pairs without noise."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(40, 2, generator=g, dtype=torch.float64)
    favourite = torch.tensor([0.15, 0.85], dtype=torch.float64)
    rows = []
    for _ in range(answers):
        for p in range(P):
            i, j = torch.randperm(40, generator=g)[:2].tolist()
            u = -((X[:, 0] - favourite[p % 2]) ** 2) - (X[:, 1] - 0.5) ** 2
            rows.append((p, i, j) if u[i] > u[j] else (p, j, i))
    return X, torch.tensor(rows)


def collapsed_taste(X, rows, scale=1.001 * SCALE_BOUNDS[0]):
    r"""A one-taste model whose taste has collapsed: its scale at the
    bound (or ``scale``) and its mean zero, where the people's weights on
    it are zero too (a saddle of the ELBO)."""
    model = CollaborativePreferenceGP(
        X, rows, num_tastes=1, num_inducing=16, num_residual=0
    )
    with torch.no_grad():
        model.shared.scale = torch.tensor([1.0, scale], dtype=torch.float64)
        model.shared.mean[1] = 0.0
    return model


def group_gaps(model, X):
    r"""Each person's mean utility near ``x_0 = 0.15`` less near ``0.85``."""
    with torch.no_grad():
        u = torch.stack([model.utility_mean(p) for p in range(model.num_people)])
    return u[:, X[:, 0] < 0.3].mean(1) - u[:, X[:, 0] > 0.7].mean(1)


def test_a_collapsed_taste_is_revived_and_tells_the_groups_apart():
    r"""From a collapsed taste a plain fit cannot move (the taste stays at
    its bound, everyone alike); the fit that also runs revived keeps the
    revived run, whose ELBO is higher by more than ten nats, and each
    person prefers their own group's favourite."""
    X, rows = two_groups()
    everyone, m = torch.arange(6), rows.shape[0]
    stuck = collapsed_taste(X, rows)
    stuck.fit(steps=200, revive=False)
    assert float(stuck.shared.scale.detach()[1]) < COLLAPSED
    gaps = group_gaps(stuck, X)
    assert float(gaps.max() - gaps.min()) < 1e-6
    revived = collapsed_taste(X, rows)
    revived.fit(steps=200, revive=True)
    assert float(revived.shared.scale.detach()[1]) > 0.5
    gain = full_elbo(revived, everyone, m, 6) - full_elbo(stuck, everyone, m, 6)
    assert gain * m > 10
    gaps = group_gaps(revived, X)
    assert (gaps[0::2] > 1).all() and (gaps[1::2] < -1).all(), gaps


def test_a_revived_run_that_loses_leaves_the_plain_fit(monkeypatch):
    X, rows = two_groups()
    plain = collapsed_taste(X, rows)
    plain.fit(steps=50, revive=False)
    scores = iter([0.0, -1.0])  # the plain run's ELBO, then the revived one's
    monkeypatch.setattr(training, "full_elbo", lambda *args: next(scores))
    kept = collapsed_taste(X, rows)
    kept.fit(steps=50, revive=True)
    assert next(scores, None) is None  # both runs were scored
    for (name, a), b in zip(
        plain.state_dict().items(), kept.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12, msg=name)


def test_a_part_that_collapses_during_the_fit_is_revived(monkeypatch):
    r"""The parts revived are those collapsed at the end of the first run,
    restarted at the state the fit started from (where they were not
    collapsed yet). The own share's prior, which holds such a part up, is
    made flat here: the test is of the revival."""
    monkeypatch.setattr(shared.SharedFunctions, "own_share", lambda self: None)
    X, rows = two_groups()
    model = collapsed_taste(X, rows, scale=2 * COLLAPSED)
    seen = []
    revive = type(model.shared).revive

    def spy(shared, parts, seed):
        seen.append((parts["raw_scale"].tolist(), float(shared.scale.detach()[1])))
        revive(shared, parts, seed)

    monkeypatch.setattr(type(model.shared), "revive", spy)
    model.fit(steps=100, revive=True)
    assert seen == [([False, True], pytest.approx(2 * COLLAPSED))]


def test_revive_must_be_a_bool():
    X, rows = two_groups(answers=2)
    model = CollaborativePreferenceGP(X, rows, num_inducing=8)
    for bad in ("no", 1, None):
        with pytest.raises(InputTypeError, match="revive must be a bool"):
            model.fit(steps=1, revive=bad)
