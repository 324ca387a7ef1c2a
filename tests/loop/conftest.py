"""Shared helpers of the loop's tests."""

import pytest


def _ask_and_tell(opt, answers, problem=None):
    asked = []
    for a in answers:
        X = opt.ask()
        asked.append(X)
        opt.tell(int(problem(X).argmax()) if problem is not None else a)
    return asked


@pytest.fixture
def ask_and_tell():
    r"""``ask_and_tell(opt, answers, problem=None)``: ask, then tell each of
    ``answers`` (or, given ``problem``, the option of highest utility);
    returns the questions asked."""
    return _ask_and_tell


@pytest.fixture(scope="package")
def collaborative():
    r"""A small fitted collaborative model on the unit square: 4 people, 6
    answers each (utilities peaking near ``(0.7, 0.3)``, each tilted)."""
    import torch

    from prefbo.models.collaborative import CollaborativePreferenceGP

    g = torch.Generator().manual_seed(0)
    X = torch.rand(20, 2, generator=g, dtype=torch.float64)
    peak = torch.tensor([0.7, 0.3], dtype=torch.float64)
    tilts = torch.randn(4, 2, generator=g, dtype=torch.float64)
    rows = []
    for p in range(4):
        u = -4 * ((X - peak) ** 2).sum(-1) + X @ tilts[p]
        for _ in range(6):
            i, j = torch.randperm(20, generator=g)[:2].tolist()
            rows.append((p, i, j) if u[i] > u[j] else (p, j, i))
    model = CollaborativePreferenceGP(
        X, torch.tensor(rows), num_tastes=2, num_inducing=16, num_residual=4
    )
    model.fit(steps=20, seed=0)
    return model
