import pytest
import torch

from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.serve.answered import Told
from prefbo.serve.collaborative_favourites import (
    favourites_of,
    told_designs,
    told_means,
    utility,
)
from prefbo.space import Continuous, Space


@pytest.fixture(scope="module")
def fitted():
    r"""A model of 3 people, each preferring designs near their own point."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(24, 2, generator=g, dtype=torch.float64)
    centres = torch.tensor([[0.2, 0.2], [0.8, 0.8], [0.5, 0.5]], dtype=torch.float64)
    rows = []
    for p in range(3):
        u = -((X - centres[p]) ** 2).sum(-1)
        for _ in range(8):
            i, j = torch.randperm(24, generator=g)[:2].tolist()
            rows.append((p, i, j) if u[i] > u[j] else (p, j, i))
    model = CollaborativePreferenceGP(
        X, torch.tensor(rows), num_tastes=1, num_inducing=16, num_residual=4
    )
    model.fit(steps=30, seed=0)
    return model, X, rows


def _told(X, rows, p):
    return [
        Told((f"{p}-{n}", float(n)), X[w], X[lo])
        for n, (q, w, lo) in enumerate(rows)
        if q == p
    ]


def test_utility_and_told_means_match_the_botorch_posterior(fitted):
    # cross-check: the model's BoTorch posterior, one person at a time
    model, X, rows = fitted
    Z = X[:5]
    mean, sd = utility(model, [None, 1], Z)
    for b, person in enumerate([None, 1]):
        with torch.no_grad():
            post = model.posterior(Z.unsqueeze(-2), person=person)
        torch.testing.assert_close(mean[b], post.mean.reshape(-1), atol=1e-9, rtol=0)
        torch.testing.assert_close(
            sd[b], post.variance.reshape(-1).sqrt(), atol=1e-9, rtol=0
        )
    population, own = told_means(model, X[:6], [0, 2], [4, 2])
    with torch.no_grad():
        pop = model.posterior(X[:6].unsqueeze(-2)).mean.reshape(-1)
        p0 = model.posterior(X[:4].unsqueeze(-2), person=0).mean.reshape(-1)
        p2 = model.posterior(X[4:6].unsqueeze(-2), person=2).mean.reshape(-1)
    torch.testing.assert_close(population, pop, atol=1e-9, rtol=0)
    torch.testing.assert_close(own, torch.cat([p0, p2]), atol=1e-9, rtol=0)


def test_each_favourite_is_the_told_design_of_highest_mean(fitted):
    model, X, rows = fitted
    space = Space([Continuous("x", 0.0, 1.0), Continuous("y", 0.0, 1.0)])
    told = {7: _told(X, rows, 0), 9: _told(X, rows, 1)}
    out = favourites_of(model, space, told, {7: 0, 9: 1})
    for pid, person in ((7, 0), (9, 1)):
        designs = told_designs(told[pid])
        assert len(designs) <= 16 and len(designs) == len(designs.unique(dim=0))
        with torch.no_grad():
            mean = model.posterior(designs.unsqueeze(-2), person=person).mean
        i = int(mean.reshape(-1).argmax())
        got = out["participants"][str(pid)]
        assert got["mean"] == pytest.approx(float(mean.reshape(-1)[i]), abs=1e-9)
        assert got["values"] == space.decode(designs[i : i + 1])[0]
    assert out["population"] is not None and len(out["slices"]) == 2
