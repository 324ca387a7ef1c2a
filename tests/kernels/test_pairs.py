import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.kernels.pairs import (
    NonTransitivePreferenceKernel,
    PreferenceKernel,
    concatenate_pairs,
)


def _base(**tkwargs):
    k = ScaleKernel(RBFKernel(ard_num_dims=2))
    k.base_kernel.lengthscale = torch.tensor([[0.4, 0.7]])
    k.outputscale = 1.5
    return k.to(**tkwargs)


def _pairs(seed, m, **tkwargs):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(m, 4, generator=g, dtype=torch.float64).to(**tkwargs)


def _swap(x):
    return torch.cat([x[..., 2:], x[..., :2]], dim=-1)


@pytest.mark.parametrize("cls", [PreferenceKernel, NonTransitivePreferenceKernel])
def test_kernel_matrices_are_psd_and_symmetric(cls, tkwargs):
    k = cls(_base(**tkwargs))
    x = _pairs(0, 12, **tkwargs)
    K = k(x).to_dense()
    torch.testing.assert_close(K, K.T)
    tol = 1e-10 if tkwargs["dtype"] == torch.float64 else 1e-4
    assert torch.linalg.eigvalsh(K.double()).min().item() > -tol
    torch.testing.assert_close(k(x, diag=True), K.diagonal())


def test_preference_kernel_matches_its_formula_and_is_antisymmetric(tkwargs):
    base = _base(**tkwargs)
    k = PreferenceKernel(base)
    x1, x2 = _pairs(1, 5, **tkwargs), _pairs(2, 4, **tkwargs)
    a, b, c, d = x1[:, :2], x1[:, 2:], x2[:, :2], x2[:, 2:]
    B = lambda u, v: base(u, v).to_dense()  # noqa: E731
    expected = B(a, c) + B(b, d) - B(a, d) - B(b, c)
    torch.testing.assert_close(k(x1, x2).to_dense(), expected)
    # g(y) − g(x) = −(g(x) − g(y)): swapping a pair negates its row
    torch.testing.assert_close(k(_swap(x1), x2).to_dense(), -expected)


def test_preference_kernel_is_the_covariance_of_utility_differences():
    """k_pref([x,y],[x',y']) = Cov(g(x) − g(y), g(x') − g(y')), g ~ GP(0, k)."""
    base = _base(dtype=torch.float64)
    x = _pairs(3, 6, dtype=torch.float64)
    points = torch.cat([x[:, :2], x[:, 2:]])  # 12 designs: first the x's, then the y's
    K = base(points).to_dense() + 1e-10 * torch.eye(12, dtype=torch.float64)
    g = torch.Generator().manual_seed(4)
    num = 100_000
    samples = (
        torch.randn(num, 12, generator=g, dtype=torch.float64)
        @ torch.linalg.cholesky(K).T
    )
    diffs = samples[:, :6] - samples[:, 6:]
    empirical = diffs.T @ diffs / num
    kernel = PreferenceKernel(base)(x).to_dense()
    se = (
        kernel.diagonal().unsqueeze(0) * kernel.diagonal().unsqueeze(1) / num
    ).sqrt() * 1.5
    assert bool(((empirical - kernel).abs() <= 4 * se).all())


def test_non_transitive_kernel_is_skew_symmetric_and_half_a_feature_covariance():
    base = _base(dtype=torch.float64)
    k = NonTransitivePreferenceKernel(base)
    x1, x2 = _pairs(5, 5, dtype=torch.float64), _pairs(6, 3, dtype=torch.float64)
    K = k(x1, x2).to_dense()
    torch.testing.assert_close(k(_swap(x1), x2).to_dense(), -K)
    torch.testing.assert_close(k(x1, _swap(x2)).to_dense(), -K)
    # h(x, y) = g1(x) g2(y) − g1(y) g2(x), g1, g2 ~ GP(0, k) iid: Cov(h) = 2 k_nt
    x = x1
    points = torch.cat([x[:, :2], x[:, 2:]])
    L = torch.linalg.cholesky(
        base(points).to_dense() + 1e-10 * torch.eye(10, dtype=torch.float64)
    )
    g = torch.Generator().manual_seed(7)
    num = 200_000
    g1 = torch.randn(num, 10, generator=g, dtype=torch.float64) @ L.T
    g2 = torch.randn(num, 10, generator=g, dtype=torch.float64) @ L.T
    h = g1[:, :5] * g2[:, 5:] - g1[:, 5:] * g2[:, :5]
    empirical = h.T @ h / num / 2
    kernel = k(x).to_dense()
    assert (
        empirical - kernel
    ).abs().max().item() < 0.05 * kernel.diagonal().max().item()


def test_kernels_batch_and_wrap_any_base_kernel():
    base = MaternKernel(nu=2.5, batch_shape=torch.Size([3])).double()
    k = NonTransitivePreferenceKernel(base)
    assert k.batch_shape == torch.Size([3])
    x = torch.rand(3, 7, 6, dtype=torch.float64)
    K = k(x).to_dense()
    assert K.shape == (3, 7, 7)
    torch.testing.assert_close(
        K[1],
        NonTransitivePreferenceKernel(MaternKernel(nu=2.5).double())(x[1]).to_dense(),
    )


def test_concatenate_pairs():
    X = torch.arange(8.0).reshape(4, 2)
    out = concatenate_pairs(X, torch.tensor([[0, 3], [2, 1]]))
    assert out.tolist() == [[0.0, 1.0, 6.0, 7.0], [4.0, 5.0, 2.0, 3.0]]


def test_errors():
    with pytest.raises(InputTypeError, match="base_kernel must be a gpytorch Kernel"):
        PreferenceKernel("rbf")
    with pytest.raises(InputDataError, match="x1 must hold pairs .* got 3 columns"):
        PreferenceKernel(RBFKernel())(torch.rand(4, 3)).to_dense()
