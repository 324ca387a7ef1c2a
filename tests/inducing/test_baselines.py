import pytest
import torch

from prefbo.exceptions import (
    InputDataError,
    InputTypeError,
)
from prefbo.inducing import (
    KMeans,
    RandomSubset,
)


def test_baselines(tkwargs):
    X = torch.rand(2, 30, 3, **tkwargs)
    Z = RandomSubset(seed=3).allocate_inducing_points(X, None, 7, torch.Size([2]))
    assert Z.shape == (2, 7, 3)
    for b in range(2):  # distinct rows of the inputs
        hits = (Z[b, :, None] == X[b, None]).all(-1)
        assert (hits.sum(-1) == 1).all() and hits.any(0).sum() == 7
    Z2 = RandomSubset(seed=3).allocate_inducing_points(X, None, 7, torch.Size([2]))
    assert torch.equal(Z, Z2)
    centres = torch.tensor([[0.0, 0.0], [5.0, 5.0], [0.0, 5.0]], **tkwargs)
    blobs = centres.repeat_interleave(20, 0) + 0.05 * torch.randn(60, 2, **tkwargs)
    C = KMeans(seed=0).allocate_inducing_points(blobs, None, 3, torch.Size())
    err = (C[:, None] - centres[None]).norm(dim=-1).min(0).values
    assert err.max() < 0.1


@pytest.mark.parametrize("cls", [RandomSubset, KMeans])
def test_baseline_seeds_are_checked_at_construction(cls):
    for bad, got in (("a", "str 'a'"), (1.5, "float 1.5"), (True, "bool True")):
        with pytest.raises(
            InputTypeError, match=rf"seed must be None or an int; got {got}"
        ):
            cls(seed=bad)
    with pytest.raises(InputDataError, match=r"seed must be in \[-2\*\*63"):
        cls(seed=2**64)
    X = torch.rand(10, 2, dtype=torch.float64)
    a = cls(seed=3).allocate_inducing_points(X, None, 4)
    assert torch.equal(a, cls(seed=3).allocate_inducing_points(X, None, 4))
