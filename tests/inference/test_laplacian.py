import pytest
import torch

from prefbo.inference import laplacian
from prefbo.inference.laplacian import (
    DENSE_BELOW,
    DENSE_BELOW_ACCELERATOR,
    cholesky_plus_laplacian,
    comparison_laplacian,
    dense_below,
    laplacian_index,
    laplacian_matmul,
    laplacian_sandwich,
    pair_diff,
    pair_quadratic,
    scatter_pairs,
)
from prefbo.utils.testing import make_pairwise_data


def _difference_operator(comp: torch.Tensor, n: int) -> torch.Tensor:
    r"""The m x n matrix D of the comparisons, row by row."""
    D = torch.zeros(comp.shape[0], n, dtype=torch.float64)
    for k, (w, l) in enumerate(comp.tolist()):
        D[k, w] += 1.0
        D[k, l] -= 1.0
    return D


def test_laplacian_is_the_weighted_difference_operator_product():
    g = torch.Generator().manual_seed(3)
    n, m = 7, 12
    comp = torch.randint(0, n, (m, 2), generator=g)
    comp[1] = comp[0]  # a repeated pair counts twice
    comp[2] = comp[0].flip(-1)  # and its reverse
    w = torch.rand(m, generator=g, dtype=torch.float64)
    f = torch.randn(n, generator=g, dtype=torch.float64)
    S = torch.randn(n, n, generator=g, dtype=torch.float64)
    S = S @ S.T
    D = _difference_operator(comp, n)
    W = D.T @ torch.diag(w) @ D
    torch.testing.assert_close(comparison_laplacian(w, comp, n), W)
    torch.testing.assert_close(scatter_pairs(w, comp, n), D.T @ w)
    torch.testing.assert_close(pair_diff(f, comp), D @ f)
    torch.testing.assert_close(pair_quadratic(S, comp), torch.diag(D @ S @ D.T))
    base = torch.eye(n, dtype=torch.float64)
    torch.testing.assert_close(comparison_laplacian(w, comp, n, base), base + W)
    torch.testing.assert_close(base, torch.eye(n, dtype=torch.float64))
    WS, WSW = laplacian_sandwich(w, comp, S)
    torch.testing.assert_close(WS, W @ S)
    torch.testing.assert_close(WSW, W @ S @ W)


def test_cholesky_plus_laplacian_restores_its_input():
    g = torch.Generator().manual_seed(4)
    n, m = 6, 9
    comp = torch.randint(0, n, (m, 2), generator=g)
    w = torch.rand(m, generator=g, dtype=torch.float64)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    Kinv = A @ A.T + torch.eye(n, dtype=torch.float64)
    before = Kinv.clone()
    C, info = cholesky_plus_laplacian(Kinv, w, laplacian_index(comp, n))
    assert int(info) == 0
    torch.testing.assert_close(C @ C.T, before + comparison_laplacian(w, comp, n))
    assert torch.equal(Kinv, before)  # restored exactly


def test_sparse_laplacian_products_equal_dense(tkwargs64, monkeypatch):
    # n above the dense threshold (on accelerators too: lowered there); a
    # batch of 2 with a repeated pair and both orientations of another, so
    # the CSR assembly must sum duplicates
    n = DENSE_BELOW + 22
    monkeypatch.setattr(laplacian, "DENSE_BELOW_ACCELERATOR", DENSE_BELOW)
    _, comp, _ = make_pairwise_data(n, 3 * n, d=2, seed=11)
    comp = torch.stack([comp, comp.flip(0)])  # 2 x m x 2
    comp[0, 1] = comp[0, 0]
    comp[1, 2] = comp[1, 3].flip(-1)
    g = torch.Generator().manual_seed(0)
    omega = torch.rand(comp.shape[:-1], generator=g, dtype=torch.float64)
    M = torch.randn(2, n, 5, generator=g, dtype=torch.float64)
    comp, omega, M = (
        comp.to(tkwargs64["device"]),
        omega.to(**tkwargs64),
        M.to(**tkwargs64),
    )
    dense = comparison_laplacian(omega, comp, n)
    torch.testing.assert_close(
        laplacian_matmul(omega, comp, M), dense @ M, rtol=1e-12, atol=1e-12
    )
    S = M @ M.transpose(-1, -2)
    WS, WSW = laplacian_sandwich(omega, comp, S)
    torch.testing.assert_close(WS, dense @ S, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(WSW, dense @ S @ dense, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("n", [40, 140])  # dense and sparse paths
def test_laplacian_matmul_broadcasts_weights_comparisons_and_M(n):
    g = torch.Generator().manual_seed(1)
    m, B = 60, 3
    c1 = torch.randint(0, n, (m, 2), generator=g)
    cB = torch.randint(0, n, (B, m, 2), generator=g)
    w1 = torch.rand(m, generator=g, dtype=torch.float64)
    wB = torch.rand(B, m, generator=g, dtype=torch.float64)
    M1 = torch.randn(n, 4, generator=g, dtype=torch.float64)
    MB = torch.randn(B, n, 4, generator=g, dtype=torch.float64)
    for w, c, M in [
        (w1, c1, MB),  # M batched only
        (wB, c1, M1),  # weights batched only
        (w1, cB, M1),  # comparisons batched only
        (wB, cB, MB),
        (w1[:0], c1[:0], MB),  # no comparisons: W = 0
    ]:
        batch = torch.broadcast_shapes(w.shape[:-1], c.shape[:-2], M.shape[:-2])
        W = comparison_laplacian(
            w.expand(batch + w.shape[-1:]), c.expand(batch + c.shape[-2:]), n
        )
        torch.testing.assert_close(
            laplacian_matmul(w, c, M), W @ M, rtol=1e-12, atol=1e-12
        )


def test_the_sparse_threshold_is_higher_on_accelerators():
    # a batched dense product beats the sparse assembly on a GPU (the
    # benchmarks/gpu.py profile), not on the CPU
    assert dense_below(torch.device("cpu")) == DENSE_BELOW == 128
    assert dense_below(torch.device("cuda")) == DENSE_BELOW_ACCELERATOR == 1024
    assert dense_below(torch.device("meta")) == DENSE_BELOW_ACCELERATOR
