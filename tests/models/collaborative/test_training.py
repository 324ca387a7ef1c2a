import torch

from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.models.collaborative.training import minibatch_elbo


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
        mean, _ = model.shared.moments(model.shared.basis(X))
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
