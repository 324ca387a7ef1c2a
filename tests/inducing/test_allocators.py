import itertools
import math

import pytest
import torch
from botorch.models import SingleTaskGP, SingleTaskVariationalGP
from botorch.models.utils.inducing_point_allocators import (
    GreedyVarianceReduction,
    InducingPointAllocator,
)
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from scipy.stats import norm

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
    MaxValueEntropyQuality,
    RandomSubset,
    greedy_dpp_map,
    gumbel_max_moments,
    max_value_information_gain,
)
from prefbo.utils.testing import make_pairwise_data, tolerance


def _kernel(kind="rbf", d=2, batch_shape=torch.Size(), lengthscale=0.3, **tkwargs):
    base = (
        RBFKernel(ard_num_dims=d, batch_shape=batch_shape)
        if kind == "rbf"
        else MaternKernel(nu=2.5, ard_num_dims=d, batch_shape=batch_shape)
    )
    kernel = ScaleKernel(base, batch_shape=batch_shape).to(**tkwargs)
    with torch.no_grad():
        kernel.outputscale = torch.full(batch_shape, 1.7, **tkwargs)
        base.lengthscale = torch.as_tensor(lengthscale, **tkwargs).expand(
            base.lengthscale.shape
        )
    return kernel


def _pref_model(n=15, m=30, d=2, seed=0, **tkwargs):
    X, comp, _ = make_pairwise_data(n, m, d=d, seed=seed, **tkwargs)
    return PairwiseLaplaceGP(X, comp)


@pytest.mark.parametrize("kind", ["rbf", "matern"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_cvr_selects_what_botorch_selects(kind, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(150, 3, generator=g, dtype=torch.float64)
    kernel = _kernel(kind, d=3, lengthscale=[0.2, 0.4, 0.3], dtype=torch.float64)
    ours = ConditionalVarianceReduction().allocate_inducing_points(
        X, kernel, 40, torch.Size()
    )
    theirs = GreedyVarianceReduction().allocate_inducing_points(
        X, kernel, 40, torch.Size()
    )
    assert ours.shape == (40, 3)
    assert torch.equal(ours, theirs)


def test_allocators_are_botorch_allocators():
    model = _pref_model(dtype=torch.float64)
    for allocator in (
        ConditionalVarianceReduction(),
        EntropyDPP(model),
        RandomSubset(),
        KMeans(),
    ):
        assert isinstance(allocator, InducingPointAllocator)


@pytest.mark.parametrize("batch_shape", [torch.Size(), torch.Size([2])])
def test_entropy_dpp_alpha_one_is_cvr(tkwargs, batch_shape):
    X = torch.rand(batch_shape + (60, 2), **tkwargs)
    kernel = _kernel(**tkwargs)
    model = _pref_model(**tkwargs)
    ent = EntropyDPP(model, alpha=1.0, num_max_samples=8, num_candidates=20)
    cvr = ConditionalVarianceReduction()
    quality = ent._get_quality_function()(X, 12)
    assert torch.equal(quality, torch.ones_like(quality))
    a = ent.allocate_inducing_points(X, kernel, 12, batch_shape)
    b = cvr.allocate_inducing_points(X, kernel, 12, batch_shape)
    assert torch.equal(a, b)


def test_batch_equals_loop(tkwargs):
    X = torch.rand(2, 80, 2, **tkwargs)
    kernel = _kernel(batch_shape=torch.Size([2]), **tkwargs)
    with torch.no_grad():
        kernel.base_kernel.lengthscale = torch.tensor([[[0.2, 0.3]], [[0.4, 0.25]]])
    model = _pref_model(**tkwargs)
    max_samples = 2.0 + torch.randn(16, 2, **tkwargs)
    batched = [
        ConditionalVarianceReduction(),
        EntropyDPP(model, alpha=0.3, max_samples=max_samples),
    ]
    for b in range(2):
        single_kernel = _kernel(
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


def _logdet(L, subset):
    idx = torch.tensor(subset)
    return torch.linalg.slogdet(L[idx][:, idx].double())[1].item()


@pytest.mark.parametrize("with_quality", [False, True])
def test_greedy_steps_are_optimal_by_brute_force(tkwargs, with_quality):
    """Each greedy step maximises log det L_S over all subsets extending the prefix.

    Independent of the incremental Cholesky: dense ``L = diag(q) K diag(q)`` and
    ``slogdet`` over every subset, and the conditional variance by a solve.
    """
    n, m = 7, 4
    X = torch.rand(n, 2, **tkwargs)
    kernel = _kernel(lengthscale=0.5, **tkwargs)
    q = 0.5 + torch.rand(n, **tkwargs) if with_quality else None
    idx, num = greedy_dpp_map(X, kernel, m, quality=q)
    assert num == m
    chosen = idx.tolist()
    assert len(set(chosen)) == m
    if q is None:  # stationary kernel: all prior variances tie, lowest index wins
        assert chosen[0] == 0
    with torch.no_grad():
        K = kernel(X).to_dense().double()
    qq = torch.ones(n, dtype=torch.float64) if q is None else q.double()
    L = qq[:, None] * K * qq[None, :]
    atol = tolerance(tkwargs["dtype"], 1e-9, 1e-4)
    for step in range(1, m + 1):
        prefix = set(chosen[: step - 1])
        best = max(
            _logdet(L, s)
            for s in itertools.combinations(range(n), step)
            if prefix <= set(s)
        )
        assert _logdet(L, chosen[:step]) >= best - atol
        # the same step as "largest q² x conditional variance", by a solve
        S = torch.tensor(chosen[: step - 1], dtype=torch.long)
        cond = K.diagonal().clone()
        if step > 1:
            KSx = K[S]  # (step-1) x n
            cond -= (KSx * torch.linalg.solve(K[S][:, S], KSx)).sum(0)
        score = qq.square() * cond
        score[S] = -math.inf
        assert score[chosen[step - 1]] >= score.max() - atol


def test_vanishing_residual_returns_fewer_points(tkwargs):
    distinct = torch.tensor([[0.1, 0.2], [0.8, 0.5], [0.4, 0.9]], **tkwargs)
    perm = torch.randperm(12)
    X = distinct.repeat(4, 1)[perm]  # 12 inputs, 3 distinct
    kernel = _kernel(**tkwargs)
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


def test_float32_low_rank_kernel_stops_cleanly(tkwargs):
    # a very long lengthscale: the kernel matrix has a tiny numerical rank
    X = torch.linspace(0, 1, 200, **tkwargs).unsqueeze(-1)
    kernel = _kernel(d=1, lengthscale=5.0, **tkwargs)
    idx, num = greedy_dpp_map(X, kernel, 50)
    assert 2 <= num < 50
    assert len(set(idx.tolist())) == 50
    chosen = X[idx[:num]]
    with torch.no_grad():
        Kzz = kernel(chosen).to_dense().double() / 1.7
    # the genuine choices keep K_ZZ factorisable without extra jitter
    assert torch.linalg.cholesky_ex(Kzz).info == 0


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


def test_information_gain_matches_closed_form():
    gamma = torch.tensor([-30.0, -5.5, -4.0, -1.0, 0.0, 0.7, 3.0, 8.0])
    g = gamma.double().numpy()
    expected = g * norm.pdf(g) / (2 * norm.cdf(g)) - norm.logcdf(g)
    torch.testing.assert_close(
        max_value_information_gain(gamma.double()),
        torch.from_numpy(expected),
        rtol=1e-9,
        atol=1e-12,
    )
    far = torch.tensor([-1e3, -1e6], dtype=torch.float64)  # log|γ| + ½log2π − ½
    asym = far.abs().log() + 0.5 * math.log(2 * math.pi) - 0.5 + 2 / far.square()
    torch.testing.assert_close(max_value_information_gain(far), asym)
    assert torch.isfinite(max_value_information_gain(torch.tensor([-1e30, 1e30]))).all()


def test_entropy_quality_sign_convention(tkwargs):
    model = _pref_model(**tkwargs)
    X = torch.rand(50, 2, **tkwargs)
    with torch.no_grad():
        mean = model.posterior(X).mean.squeeze(-1)
    samples = mean.max() + 0.3 * torch.randn(64, **tkwargs)
    q = MaxValueEntropyQuality(model, alpha=0.2, max_samples=samples)(X, 10)
    # IG decreases in γ = (μ* − ŷ)/σ*: the quality grows with the mean
    assert q.argmax() == mean.argmax() and q.max() == 1.0
    order = mean.argsort()
    assert (q[order].diff() >= 0).all()
    q_min = MaxValueEntropyQuality(
        model, alpha=0.2, max_samples=-samples, maximize=False
    )(X, 10)
    assert q_min.argmax() == mean.argmin()
    # the Gumbel fit (default) gives the same ordering
    q_gumbel = MaxValueEntropyQuality(model, alpha=0.2)(X, 10)
    assert (q_gumbel[order].diff() >= 0).all()


def test_thompson_max_moments(tkwargs64):
    model = _pref_model(**tkwargs64)
    # few, well-separated candidates: a well-conditioned joint covariance
    X = torch.tensor([[0.1, 0.1], [0.9, 0.2], [0.5, 0.5], [0.2, 0.9]], **tkwargs64)
    quality = MaxValueEntropyQuality(
        model, max_value_method="thompson", num_max_samples=4096
    )
    with torch.no_grad():
        post = model.posterior(X)
        mean = post.mean.squeeze(-1)
        mu, sd = quality.max_moments(X, mean)
        f = post.rsample(torch.Size([4096])).squeeze(-1).amax(-1)
    assert mu.shape == sd.shape == (1,)
    assert mu > mean.max()  # E[max] ≥ max E
    torch.testing.assert_close(mu, f.mean().view(1), rtol=0, atol=5 * f.std() / 64)
    torch.testing.assert_close(sd, f.std().view(1), rtol=0.1, atol=0)


def test_gumbel_moments_match_monte_carlo(tkwargs):
    mean = torch.randn(2, 200, **tkwargs)
    sd = 0.2 + torch.rand(2, 200, **tkwargs)
    mu, s = gumbel_max_moments(mean, sd)
    f = (mean + sd * torch.randn(20000, 2, 200, **tkwargs)).amax(-1)  # 20000 x 2
    torch.testing.assert_close(mu, f.mean(0), rtol=0.03, atol=0)
    torch.testing.assert_close(s, f.std(0), rtol=0.1, atol=0)


def test_entropy_dpp_prefers_high_utility(tkwargs64):
    model = _pref_model(n=20, m=60, **tkwargs64)
    X = torch.rand(300, 2, **tkwargs64)
    kernel = _kernel(lengthscale=0.15, **tkwargs64)
    with torch.no_grad():
        mean = model.posterior(X).mean.squeeze(-1)

    def mean_at(allocator):
        idx, _ = allocator.select_indices(X, kernel, 20)
        return mean[idx].mean()

    cvr = mean_at(ConditionalVarianceReduction())
    ent = mean_at(EntropyDPP(model, alpha=0.02))
    ent_min = mean_at(EntropyDPP(model, alpha=0.02, maximize=False))
    assert ent > cvr > ent_min


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


def test_errors():
    X = torch.rand(10, 2, dtype=torch.float64)
    kernel = _kernel(dtype=torch.float64)
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
    model = _pref_model(dtype=torch.float64)
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


def test_greedy_dpp_map_argument_types_raise_typed_errors():
    X = torch.rand(10, 2, dtype=torch.float64)
    kernel = _kernel(dtype=torch.float64)
    for bad in ("rbf", lambda a, b=None, diag=False: a):
        with pytest.raises(
            InputTypeError, match=r"covar_module must be a GPyTorch Kernel; got"
        ):
            greedy_dpp_map(X, bad, 3)
    with pytest.raises(
        InputTypeError, match=r"tol must be None or a float in \[0, 1\); got str 'a'"
    ):
        greedy_dpp_map(X, kernel, 3, tol="a")
    with pytest.raises(InputTypeError, match=r"tol must be None or a float .*got bool"):
        greedy_dpp_map(X, kernel, 3, tol=True)
    for bad in (-1.0, 1.0, math.nan):
        with pytest.raises(
            InputDataError, match=r"tol must be None or a float in \[0, 1\); got tol="
        ):
            greedy_dpp_map(X, kernel, 3, tol=bad)
    with pytest.raises(InputTypeError, match=r"tol must be None or a float .*got str"):
        ConditionalVarianceReduction(tol="a")
    # an integer tolerance 0 is a valid float tolerance
    idx, _ = greedy_dpp_map(X, kernel, 3, tol=0)
    assert idx.shape == (3,)


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


def _batched_model():
    X, comp, _ = make_pairwise_data(12, 20, batch_shape=torch.Size([3]))
    return PairwiseLaplaceGP(X, comp)
