import math

import pytest
import torch
from botorch.models import SingleTaskGP, SingleTaskVariationalGP
from botorch.models.utils.inducing_point_allocators import (
    GreedyVarianceReduction,
    InducingPointAllocator,
)

from prefbo import PairwiseLaplaceGP
from prefbo.exceptions import (
    InputDataError,
    InputTypeError,
    NumericalWarning,
    UnsupportedError,
)
from prefbo.inducing import (
    ConditionalVarianceReduction,
    EntropyDPP,
    KMeans,
    RandomSubset,
    greedy_dpp_map,
)
from prefbo.utils.testing import make_pairwise_data


@pytest.mark.parametrize("kind", ["rbf", "matern"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_cvr_selects_what_botorch_selects(kind, seed, make_kernel):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(150, 3, generator=g, dtype=torch.float64)
    kernel = make_kernel(kind, d=3, lengthscale=[0.2, 0.4, 0.3], dtype=torch.float64)
    ours = ConditionalVarianceReduction().allocate_inducing_points(
        X, kernel, 40, torch.Size()
    )
    theirs = GreedyVarianceReduction().allocate_inducing_points(
        X, kernel, 40, torch.Size()
    )
    assert ours.shape == (40, 3)
    assert torch.equal(ours, theirs)


def test_allocators_are_botorch_allocators(make_pref_model):
    model = make_pref_model(dtype=torch.float64)
    for allocator in (
        ConditionalVarianceReduction(),
        EntropyDPP(model),
        RandomSubset(),
        KMeans(),
    ):
        assert isinstance(allocator, InducingPointAllocator)


@pytest.mark.parametrize("batch_shape", [torch.Size(), torch.Size([2])])
def test_entropy_dpp_alpha_one_is_cvr(
    tkwargs, batch_shape, make_kernel, make_pref_model
):
    X = torch.rand(batch_shape + (60, 2), **tkwargs)
    kernel = make_kernel(**tkwargs)
    model = make_pref_model(**tkwargs)
    ent = EntropyDPP(model, alpha=1.0, num_max_samples=8, num_candidates=20)
    cvr = ConditionalVarianceReduction()
    quality = ent._get_quality_function()(X, 12)
    assert torch.equal(quality, torch.ones_like(quality))
    a = ent.allocate_inducing_points(X, kernel, 12, batch_shape)
    b = cvr.allocate_inducing_points(X, kernel, 12, batch_shape)
    assert torch.equal(a, b)


def test_batch_equals_loop(tkwargs, make_kernel, make_pref_model):
    X = torch.rand(2, 80, 2, **tkwargs)
    kernel = make_kernel(batch_shape=torch.Size([2]), **tkwargs)
    with torch.no_grad():
        kernel.base_kernel.lengthscale = torch.tensor(
            [[[0.2, 0.3]], [[0.4, 0.25]]], **tkwargs
        )
    model = make_pref_model(**tkwargs)
    max_samples = 2.0 + torch.randn(16, 2, **tkwargs)
    batched = [
        ConditionalVarianceReduction(),
        EntropyDPP(model, alpha=0.3, max_samples=max_samples),
    ]
    for b in range(2):
        single_kernel = make_kernel(
            lengthscale=kernel.base_kernel.lengthscale[b, 0].tolist(), **tkwargs
        )
        single = [
            ConditionalVarianceReduction(),
            EntropyDPP(model, alpha=0.3, max_samples=max_samples[:, b]),
        ]
        for alloc_batched, alloc_single in zip(batched, single):
            idx, num = alloc_batched.select_indices(X, kernel, 15)
            idx_b, num_b = alloc_single.select_indices(X[b], single_kernel, 15)
            assert torch.equal(idx[b], idx_b)
            assert num[b] == num_b == 15


def test_vanishing_residual_returns_fewer_points(tkwargs, make_kernel):
    distinct = torch.tensor([[0.1, 0.2], [0.8, 0.5], [0.4, 0.9]], **tkwargs)
    perm = torch.randperm(12)
    X = distinct.repeat(4, 1)[perm]  # 12 inputs, 3 distinct
    kernel = make_kernel(**tkwargs)
    with pytest.warns(NumericalWarning, match=r"only 3 of num_inducing=5 inputs"):
        Z = ConditionalVarianceReduction().allocate_inducing_points(
            X, kernel, 5, torch.Size()
        )
    assert Z.shape == (3, 2)
    assert {tuple(z) for z in Z.tolist()} == {tuple(x) for x in distinct.tolist()}
    if tkwargs["dtype"] == torch.float64:  # BoTorch's fixed 1e-6 suits float64
        theirs = GreedyVarianceReduction().allocate_inducing_points(
            X, kernel, 5, torch.Size()
        )
        assert torch.equal(Z, theirs)
    # batched: one degenerate batch element, one full-rank one
    Xb = torch.stack([X, torch.rand(12, 2, **tkwargs)])
    idx, num = greedy_dpp_map(Xb, kernel, 5)
    assert num.tolist() == [3, 5]
    assert all(len(set(row)) == 5 for row in idx.tolist())  # padding is distinct
    with pytest.warns(NumericalWarning, match=r"padded with redundant inputs"):
        Zb = ConditionalVarianceReduction().allocate_inducing_points(
            Xb, kernel, 5, torch.Size([2])
        )
    assert Zb.shape == (2, 5, 2)
    assert torch.equal(Zb[0, :3], Z)


@pytest.mark.parametrize("num_outputs", [1, 2])
@pytest.mark.parametrize("batch_shape", [torch.Size(), torch.Size([2])])
def test_single_task_variational_gp(tkwargs64, num_outputs, batch_shape):
    train_X = torch.rand(batch_shape + (40, 2), **tkwargs64)
    train_Y = torch.randn(batch_shape + (40, num_outputs), **tkwargs64)
    gp = SingleTaskGP(train_X, train_Y[..., :1])
    allocators = [
        ConditionalVarianceReduction(),
        EntropyDPP(gp, num_max_samples=8, num_candidates=20),
        RandomSubset(seed=0),
        KMeans(seed=0),
    ]
    for allocator in allocators:
        if num_outputs > 1 and isinstance(allocator, EntropyDPP):
            continue
        model = SingleTaskVariationalGP(
            train_X,
            num_outputs=num_outputs,
            inducing_points=8,
            inducing_point_allocator=allocator,
            learn_inducing_points=False,
        )
        Z = model.model.variational_strategy
        Z = getattr(Z, "base_variational_strategy", Z).inducing_points
        assert Z.shape == batch_shape + (8, 2)
        if isinstance(allocator, ConditionalVarianceReduction):
            expected = allocator.allocate_inducing_points(
                train_X, model.model.covar_module, 8, batch_shape
            )
            assert torch.equal(Z, expected)
        post = model.posterior(torch.rand(batch_shape + (5, 2), **tkwargs64))
        assert post.mean.shape == batch_shape + (5, num_outputs)
        assert torch.isfinite(post.variance).all()


def test_entropy_dpp_prefers_high_utility(tkwargs64, make_kernel, make_pref_model):
    model = make_pref_model(n=20, m=60, **tkwargs64)
    X = torch.rand(300, 2, **tkwargs64)
    kernel = make_kernel(lengthscale=0.15, **tkwargs64)
    with torch.no_grad():
        mean = model.posterior(X).mean.squeeze(-1)

    def mean_at(allocator):
        idx, _ = allocator.select_indices(X, kernel, 20)
        return mean[idx].mean()

    cvr = mean_at(ConditionalVarianceReduction())
    ent = mean_at(EntropyDPP(model, alpha=0.02))
    ent_min = mean_at(EntropyDPP(model, alpha=0.02, maximize=False))
    assert ent > cvr > ent_min


def test_errors(make_kernel, make_pref_model):
    X = torch.rand(10, 2, dtype=torch.float64)
    kernel = make_kernel(dtype=torch.float64)
    cvr = ConditionalVarianceReduction()
    with pytest.raises(InputDataError, match=r"num_inducing must be in \[1, n\] "):
        cvr.allocate_inducing_points(X, kernel, 11, torch.Size())
    with pytest.raises(InputDataError, match=r"n=10 .*got num_inducing=0\."):
        cvr.allocate_inducing_points(X, kernel, 0, torch.Size())
    with pytest.raises(InputTypeError, match=r"num_inducing must be an int; got float"):
        cvr.allocate_inducing_points(X, kernel, 3.0, torch.Size())
    with pytest.raises(
        InputDataError, match=r"batch_shape x n x d .*got shape \(10,\)"
    ):
        cvr.allocate_inducing_points(X[:, 0], kernel, 3, torch.Size())
    with pytest.raises(InputTypeError, match=r"floating-point .*dtype torch.int64"):
        cvr.allocate_inducing_points(X.long(), kernel, 3, torch.Size())
    with pytest.raises(InputDataError, match=r"inputs must be finite"):
        cvr.allocate_inducing_points(X / 0, kernel, 3, torch.Size())
    with pytest.raises(InputDataError, match=r"do not broadcast with input_batch"):
        cvr.allocate_inducing_points(X.expand(2, 10, 2), kernel, 3, torch.Size([3]))
    with pytest.raises(InputTypeError, match=r"covar_module must be a GPyTorch Kern"):
        cvr.allocate_inducing_points(X, lambda x: x, 3, torch.Size())
    with pytest.raises(
        InputDataError, match=r"quality must be .* \(10,\) .*got \(9,\)"
    ):
        greedy_dpp_map(X, kernel, 3, quality=torch.ones(9, dtype=torch.float64))
    with pytest.raises(InputDataError, match=r"quality must be finite and >= 0; got"):
        greedy_dpp_map(X, kernel, 3, quality=-torch.ones(10, dtype=torch.float64))
    with pytest.raises(
        InputDataError, match=r"tol must be None or a float in \[0, 1\); got tol=1\.5"
    ):
        ConditionalVarianceReduction(tol=1.5)
    model = make_pref_model(dtype=torch.float64)
    for alpha in (0.0, -0.1, 1.5, math.nan):
        with pytest.raises(
            InputDataError, match=r"alpha must be a float in \(0, 1\]; got alpha="
        ):
            EntropyDPP(model, alpha=alpha)
    with pytest.raises(InputDataError, match=r"num_max_samples must be an int >= 2"):
        EntropyDPP(model, num_max_samples=1)
    with pytest.raises(InputDataError, match=r"num_samples >= 2; got shape \(1,\)"):
        EntropyDPP(model, max_samples=torch.zeros(1))
    with pytest.raises(InputDataError, match=r"batch_shape \(2,\) of the inputs"):
        EntropyDPP(model, max_samples=torch.zeros(4, 3)).allocate_inducing_points(
            X.expand(2, 10, 2), kernel, 3, torch.Size([2])
        )
    with pytest.raises(InputTypeError, match=r"BoTorch Model with a posterior"):
        EntropyDPP(object())
    two_outputs = SingleTaskGP(X, torch.randn(10, 2, dtype=torch.float64))
    with pytest.raises(UnsupportedError, match=r"one output; got num_outputs=2"):
        EntropyDPP(two_outputs)
    with pytest.raises(UnsupportedError, match=r"shape \(3, 10\); expected \(10,\)"):
        EntropyDPP(_batched_model()).allocate_inducing_points(X, kernel, 3)
    with pytest.raises(InputDataError, match=r"max_value_method must be one of"):
        EntropyDPP(model, max_value_method="gumble")
    with pytest.raises(InputDataError, match=r"num_iters must be an int >= 0"):
        KMeans(num_iters=-1)


def _batched_model():
    X, comp, _ = make_pairwise_data(12, 20, batch_shape=torch.Size([3]))
    return PairwiseLaplaceGP(X, comp)
