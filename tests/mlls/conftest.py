import pytest
import torch


@pytest.fixture
def separable_data():
    r"""Noiseless answers about a linear utility on 15 designs: the exact
    evidence keeps rising with the outputscale, to the box prior's edge."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(15, 2, generator=g, dtype=torch.float64)
    u = X @ torch.tensor([1.0, 2.0], dtype=torch.float64)
    pairs = torch.randint(0, 15, (30, 2), generator=g)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    first = (u[pairs[:, 0]] > u[pairs[:, 1]]).unsqueeze(-1)
    return X, torch.where(first, pairs, pairs.flip(-1))
