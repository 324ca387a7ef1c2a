import pytest
import torch
from linear_operator import to_dense

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.models.collaborative.shared import (
    SCALE_BOUNDS,
    START_CHOLESKY,
    START_SCALES,
    START_TASTE_MEANS,
    SharedFunctions,
    choose_inducing,
)


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
    lo, hi = SCALE_BOUNDS
    # the constraint's bounds are float32's: 1.00000001e-3 lies below its floor
    for bad in (lo, 1.00000001e-3, hi, 0.0, float("nan")):
        with pytest.raises(InputDataError, match="scale must lie strictly between"):
            shared.scale = torch.tensor([2.0, bad, 0.5], dtype=torch.float64)
    with pytest.raises(UnsupportedError, match=r"no residual \(num_residual=0\)"):
        shared.residual_scale = torch.tensor(0.5)
    with pytest.raises(UnsupportedError, match="no item effects"):
        shared.item_scale = torch.tensor(0.5)
    shared = SharedFunctions(
        torch.rand(4, 2, dtype=torch.float64), num_tastes=2, num_residual=2
    )
    with pytest.raises(InputDataError, match="residual_scale"):
        shared.residual_scale = torch.tensor(0.0)


def any_collapsed(shared):
    return any(bool(mask.any()) for mask in shared.collapsed().values())


def test_revive_restarts_the_collapsed_parts_only():
    shared = SharedFunctions(
        torch.rand(6, 2, dtype=torch.float64),
        num_tastes=3,
        num_items=4,
        num_residual=3,
    )
    lo, hi = 1.001 * SCALE_BOUNDS[0], 0.999 * SCALE_BOUNDS[1]
    with torch.no_grad():
        shared.scale = torch.tensor([hi, lo, 0.7, lo], dtype=torch.float64)
        shared.item_scale = torch.tensor([lo, 0.4, lo, 0.4], dtype=torch.float64)
        shared.residual_scale = torch.tensor(lo, dtype=torch.float64)
        shared.mean.zero_()
        shared.mean[2] = 0.25
        shared.chol.mul_(0.1)
    parts = shared.collapsed()
    assert parts["raw_scale"].tolist() == [False, True, False, True]
    assert parts["raw_item_scale"].tolist() == [True, False, True, False]
    assert bool(parts["raw_residual_scale"])
    kept_chol = shared.chol[[0, 2]].detach().clone()
    kept_raw = shared.raw_scale.detach()[[0, 2]].clone()
    shared.revive(parts, seed=5)
    assert not any_collapsed(shared)
    # the others' raw values untouched (a scale near its ceiling too)
    assert torch.equal(shared.raw_scale.detach()[[0, 2]], kept_raw)
    taste, item = START_SCALES["taste"], START_SCALES["item"]
    expect = torch.tensor([hi, taste, 0.7, taste], dtype=torch.float64)
    torch.testing.assert_close(shared.scale.detach(), expect)
    expect = torch.tensor([item, 0.4, item, 0.4], dtype=torch.float64)
    torch.testing.assert_close(shared.item_scale.detach(), expect)
    residual = torch.tensor(START_SCALES["residual"], dtype=torch.float64)
    torch.testing.assert_close(shared.residual_scale.detach(), residual)
    mean = shared.mean.detach()
    assert torch.equal(mean[0], torch.zeros_like(mean[0]))  # not collapsed
    assert torch.equal(mean[2], torch.full_like(mean[2], 0.25))
    for j in (1, 3):  # drawn anew, at the starting spread
        assert 0.1 < float(mean[j].std()) / START_TASTE_MEANS < 10
    torch.testing.assert_close(shared.chol[[0, 2]].detach(), kept_chol)
    eye = START_CHOLESKY * torch.eye(10, dtype=torch.float64)
    for j in (1, 3):
        torch.testing.assert_close(shared.chol[j].detach(), eye)


def test_revive_restarts_the_parts_it_is_given_whatever_their_scale_now():
    r"""A fit revives what collapsed by its end, at the state it started
    from, where those scales may not be collapsed yet."""
    shared = SharedFunctions(torch.rand(4, 2, dtype=torch.float64), num_tastes=2)
    shared.scale = torch.tensor([1.0, 0.012, 0.012], dtype=torch.float64)
    parts = {"raw_scale": torch.tensor([False, True, False])}
    shared.revive(parts, seed=0)
    expect = torch.tensor([1.0, START_SCALES["taste"], 0.012], dtype=torch.float64)
    torch.testing.assert_close(shared.scale.detach(), expect)


def test_revived_means_are_not_the_starting_ones():
    r"""A fit's seed is often the model's: the revived draw must differ."""
    shared = SharedFunctions(
        torch.rand(16, 2, dtype=torch.float64), num_tastes=1, seed=3
    )
    start = shared.mean.detach()[1].clone()
    shared.revive({"raw_scale": torch.tensor([False, True])}, seed=3)
    assert not torch.allclose(shared.mean.detach()[1], start)


def test_nothing_collapsed_nothing_revived():
    shared = SharedFunctions(torch.rand(4, 2, dtype=torch.float64), num_tastes=2)
    before = {k: v.clone() for k, v in shared.state_dict().items()}
    assert not any_collapsed(shared)
    shared.revive(shared.collapsed(), seed=0)
    for k, v in shared.state_dict().items():
        assert torch.equal(v, before[k]), k
