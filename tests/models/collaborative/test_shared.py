import torch
from linear_operator import to_dense

from prefbo.models.collaborative.shared import SharedFunctions, choose_inducing


def test_inducing_points_are_all_designs_when_few_and_cvr_otherwise():
    X = torch.rand(12, 2, dtype=torch.float64)
    Z = choose_inducing(torch.cat([X, X[:3]]), 20, seed=0)
    assert Z.shape == (12, 2)
    Z = choose_inducing(X, 5, seed=0)
    assert Z.shape == (5, 2)
    assert all(bool((X == z).all(-1).any()) for z in Z)
    assert choose_inducing(X.float(), 5, seed=0).dtype == torch.float32


def test_at_the_inducing_points_the_nystrom_kernel_is_the_kernel():
    X = torch.rand(10, 3, dtype=torch.float64)
    shared = SharedFunctions(X, num_tastes=2)
    basis = shared.basis(X)  # J x n x R
    K = to_dense(shared.kernel(X))
    scale = shared.scale.detach()
    for j in range(3):
        torch.testing.assert_close(
            basis[j] @ basis[j].T, scale[j] ** 2 * K, atol=1e-5, rtol=0
        )
    assert shared.residual_basis(X).shape == (10, 0)


def test_item_effects_and_residual_basis():
    X = torch.rand(6, 2, dtype=torch.float64)
    shared = SharedFunctions(X[:4], num_tastes=1, num_items=6, num_residual=2)
    items = torch.tensor([0, 5, -1])
    basis = shared.basis(X[:3], items)
    assert basis.shape == (2, 3, 4 + 6)
    t = shared.item_scale.detach()
    torch.testing.assert_close(
        basis[:, 0, 4:], t[:, None] * torch.eye(6, dtype=torch.float64)[0]
    )
    assert bool((basis[:, 2, 4:] == 0).all())
    r = shared.residual_basis(X)
    assert r.shape == (6, 2)
    torch.testing.assert_close(
        r[:2] @ r[:2].T,
        shared.residual_scale.detach() ** 2 * to_dense(shared.kernel(X[:2])),
        atol=1e-6,
        rtol=0,
    )


def test_kl_is_zero_at_the_prior_and_matches_torch():
    X = torch.rand(5, 2, dtype=torch.float64)
    shared = SharedFunctions(X, num_tastes=1)
    with torch.no_grad():
        shared.mean.zero_()
        shared.chol.copy_(torch.eye(5, dtype=torch.float64).expand(2, 5, 5))
    assert abs(float(shared.kl().detach())) < 1e-12
    with torch.no_grad():
        shared.mean.normal_()
        shared.chol.mul_(0.5).add_(
            0.1 * torch.randn(2, 5, 5, dtype=torch.float64).tril(-1)
        )
    q = torch.distributions.MultivariateNormal(
        shared.mean, scale_tril=shared.chol.tril()
    )
    p = torch.distributions.MultivariateNormal(
        torch.zeros(5, dtype=torch.float64), torch.eye(5, dtype=torch.float64)
    )
    torch.testing.assert_close(
        shared.kl(), torch.distributions.kl_divergence(q, p).sum()
    )


def test_scales_are_settable_and_bounded():
    shared = SharedFunctions(torch.rand(4, 2, dtype=torch.float64), num_tastes=2)
    shared.scale = torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    torch.testing.assert_close(
        shared.scale.detach(), torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    )
