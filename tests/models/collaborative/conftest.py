import copy
import math

import pytest
import torch

from prefbo.models.collaborative import CollaborativePreferenceGP, shared


def planted(P=60, n=20, d=2, K=2, answers=12, noise=0.3, seed=0, **tkwargs):
    r"""A small population with ``K`` planted tastes: ``(X, answers, F, H)``
    with ``F`` the ``P x n`` true utilities and ``H`` the ``n x (K + 1)``
    true shared and taste functions."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64)

    def smooth():
        W = torch.randn(d, 40, generator=g, dtype=torch.float64) / 0.3
        b = 2 * math.pi * torch.rand(40, generator=g, dtype=torch.float64)
        a = torch.randn(40, generator=g, dtype=torch.float64)
        return torch.cos(X @ W + b) @ a * math.sqrt(2 / 40)

    H = torch.stack([smooth() for _ in range(K + 1)], -1)
    weights = torch.randn(P, K, generator=g, dtype=torch.float64)
    F = H[:, 0] + weights @ H[:, 1:].T
    rows = []
    for p in range(P):
        for _ in range(answers):
            i, j = torch.randperm(n, generator=g)[:2].tolist()
            prob = torch.special.ndtr((F[p, i] - F[p, j]) / (math.sqrt(2) * noise))
            win = bool(torch.rand(1, generator=g, dtype=torch.float64) < prob)
            rows.append((p, i, j) if win else (p, j, i))
    device = tkwargs.get("device", "cpu")
    dtype = tkwargs.get("dtype", torch.float64)
    return X.to(device, dtype), torch.tensor(rows, device=device), F, H


@pytest.fixture
def population():
    return planted


@pytest.fixture
def twins(tkwargs64, monkeypatch):
    r"""One fitted model in float64 and in float32 at the same jitter
    (float32's), so that they differ by float32's rounding only, and
    ``cluster(C, spread)``: ``C`` candidates about ``spread`` around a design."""
    monkeypatch.setitem(shared.JITTER, torch.float64, shared.JITTER[torch.float32])
    X, answers, _, _ = planted(**tkwargs64)
    m64 = CollaborativePreferenceGP(X, answers, num_inducing=16, num_residual=4)
    m64.fit(steps=30)
    m32 = copy.deepcopy(m64).float()

    def cluster(C, spread, seed=1):
        g = torch.Generator().manual_seed(seed)
        step = torch.randn(C, 2, generator=g, dtype=torch.float64).to(X.device)
        return (X[:1] + spread * step).clamp(0, 1)

    return m64, m32, cluster


@pytest.fixture
def small_fitted():
    r"""A model fitted briefly on :func:`planted`'s population (16 inducing
    points, a residual of 4)."""
    X, answers, _, _ = planted()
    m = CollaborativePreferenceGP(X, answers, num_inducing=16, num_residual=4)
    m.fit(steps=30)
    return m


def _dense_basis(shared, X, items):
    r"""The ``J x n x (M + N)`` basis ``[s_j a(x); t_j 1_{i(x)}]`` written out,
    the items' one-hot columns built here, not by the model."""
    onehot = torch.zeros(X.shape[0], shared.num_items, dtype=X.dtype)
    for row, item in enumerate(items.tolist()):
        if item >= 0:
            onehot[row, item] = 1.0
    t = shared.item_scale.detach().view(-1, 1, 1)
    return torch.cat([shared.basis(X).detach(), t * onehot.expand(len(t), -1, -1)], -1)


@pytest.fixture
def dense_basis():
    return _dense_basis
