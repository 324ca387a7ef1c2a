import pytest
import torch

from prefbo.inference.cache import COMPARISON_CACHE, MAX_ENTRIES, cached_for
from prefbo.inference.laplacian import comparison_laplacian, laplacian_matmul


def test_cached_for_builds_once_per_tensor_and_key():
    comp = torch.tensor([[0, 1], [2, 1]])
    calls = []

    def build():
        calls.append(1)
        return len(calls)

    assert cached_for(comp, "a", build) == 1
    assert cached_for(comp, "a", build) == 1  # a hit
    assert cached_for(comp, "b", build) == 2  # another key
    assert cached_for(comp.clone(), "a", build) == 3  # another tensor
    comp[0, 0] = 2  # in place: a new version drops the tensor's entries
    assert cached_for(comp, "a", build) == 4


def test_cache_is_bounded_per_tensor_and_freed_with_it():
    comp = torch.tensor([[0, 1], [2, 1]])
    for k in range(3 * MAX_ENTRIES):
        cached_for(comp, k, lambda: None)
        assert len(COMPARISON_CACHE[comp][1]) <= MAX_ENTRIES + 1
    size = len(COMPARISON_CACHE)
    del comp
    assert len(COMPARISON_CACHE) == size - 1


@pytest.mark.parametrize("n", [40, 140])  # dense and sparse paths
def test_comparison_cache_follows_in_place_changes(n):
    # the CSR pattern and the Laplacian index are cached per comparisons tensor;
    # an in-place edit (version bump), a view of another layout and a new
    # tensor at a reused address must all give the current W
    g = torch.Generator().manual_seed(2)
    m = 50
    comp = torch.randint(0, n, (m, 2), generator=g)
    w = torch.rand(m, generator=g, dtype=torch.float64)
    M = torch.randn(n, 3, generator=g, dtype=torch.float64)

    def dense(c: torch.Tensor, om: torch.Tensor) -> torch.Tensor:
        # independent of prefbo's assembly: a plain loop over the answers
        W = torch.zeros(n, n, dtype=torch.float64)
        for (i, j), o in zip(c.tolist(), om.tolist()):
            W[i, i] += o
            W[j, j] += o
            W[i, j] -= o
            W[j, i] -= o
        return W

    torch.testing.assert_close(laplacian_matmul(w, comp, M), dense(comp, w) @ M)
    comp[3] = comp[7].flip(-1)  # in place: same tensor, new version
    comp[5, 0] = (comp[5, 1] + 1) % n
    torch.testing.assert_close(laplacian_matmul(w, comp, M), dense(comp, w) @ M)
    torch.testing.assert_close(comparison_laplacian(w, comp, n), dense(comp, w))
    half = comp[::2]  # a strided view of the same storage
    torch.testing.assert_close(
        laplacian_matmul(w[::2], half, M), dense(half, w[::2]) @ M
    )
    for seed in range(3):  # fresh tensors (addresses may be reused)
        c = torch.randint(0, n, (m, 2), generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(laplacian_matmul(w, c, M), dense(c, w) @ M)
    # edits the version counter does not see: .data assignment (same object,
    # new storage, possibly at a reused address) and writes through NumPy
    for seed in range(5):
        comp.data = torch.randint(
            0, n, (m, 2), generator=torch.Generator().manual_seed(9 + seed)
        )
        torch.testing.assert_close(laplacian_matmul(w, comp, M), dense(comp, w) @ M)
    comp.numpy()[2] = (comp[2] + 1).numpy() % n
    torch.testing.assert_close(laplacian_matmul(w, comp, M), dense(comp, w) @ M)
    with torch.inference_mode():  # no version counter: computed, not cached
        c = torch.randint(0, n, (m, 2), generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(laplacian_matmul(w, c, M), dense(c, w) @ M)
