import pytest
import torch

from prefbo.inference.cholesky import cholesky_solve, jittered_cholesky, row_major


def _rbf(X, lengthscale, outputscale):
    return outputscale * torch.exp(-torch.cdist(X, X).pow(2) / (2 * lengthscale**2))


def test_jittered_cholesky_warns_and_factorises():
    X = torch.zeros(4, 1, dtype=torch.float64)  # identical rows: singular K
    K = _rbf(X, 1.0, 1.0)
    with pytest.warns(UserWarning, match="added jitter"):
        L = jittered_cholesky(K, name="K")
    assert torch.isfinite(L).all()
    with pytest.raises(RuntimeError, match="non-finite"):
        jittered_cholesky(K * float("nan"), name="K")


def test_cholesky_solve_equals_torch():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(3, 5, 5, generator=g, dtype=torch.float64)
    L = torch.linalg.cholesky(A @ A.mT + torch.eye(5, dtype=torch.float64))
    b = torch.randn(3, 5, 2, generator=g, dtype=torch.float64)
    torch.testing.assert_close(cholesky_solve(b, L), torch.cholesky_solve(b, L))


def test_row_major_keeps_the_values_of_a_symmetric_matrix():
    A = torch.randn(4, 4, dtype=torch.float64)
    S = torch.cholesky_inverse(torch.linalg.cholesky(A @ A.T + torch.eye(4)))
    R = row_major(S)
    assert R.is_contiguous()
    assert torch.equal(R, S)
