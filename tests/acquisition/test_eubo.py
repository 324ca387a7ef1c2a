import math

import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.pairwise_gp import PairwiseGP
from botorch.models.transforms.input import Normalize
from botorch.optim import optimize_acqf
from gpytorch.kernels import MaternKernel, ScaleKernel

from prefbo import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.acquisition import eubo_values, maximize_eubo
from prefbo.acquisition.eubo import PairMoments, pair_moments
from prefbo.data import PairwiseComparisons
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.loop.optimizer import expected_fit_warnings
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.models import SkewGP
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.utils.testing import make_pairwise_data

UNIT2 = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
MODELS = {"laplace": PairwiseLaplaceGP, "ep": PairwiseEPGP}


def _model(name, n=15, m=30, d=2, seed=0, **kwargs):
    X, comp, _ = make_pairwise_data(n, m, d=d, seed=seed)
    if name == "skew":
        return SkewGP(X, comp, num_samples=64, seed=0, **kwargs)
    if name == "variational":
        model = VariationalPreferenceGP(
            PairwiseComparisons(X, comp), inducing_points=8, **kwargs
        )
        # a q(u) away from the prior: mean and covariance of a Laplace fit
        Z = model.base_variational_strategy.inducing_points
        post = PairwiseLaplaceGP(X, comp).posterior(Z)
        with torch.no_grad():
            model.set_inducing_distribution(
                post.mean.squeeze(-1), post.distribution.covariance_matrix
            )
        return model.eval()
    return MODELS[name](X, comp, **kwargs).eval()


def _fitted(name, n, m, d, seed):
    model = _model(name, n, m, d, seed)
    mll_cls = PairwiseLaplaceMLL if name == "laplace" else PairwiseEPMLL
    with expected_fit_warnings():
        fit_gpytorch_mll(mll_cls(model.likelihood, model))
    return model.eval()


def _botorch(model, bounds, winner=None, **kwargs):
    r"""optimize_acqf's EUBO maximiser (the loop's previous default)."""
    acqf = AnalyticExpectedUtilityOfBestOption(
        pref_model=model, previous_winner=None if winner is None else winner[None]
    )
    with expected_fit_warnings():
        X, value = optimize_acqf(
            acqf, bounds=bounds, q=1 if winner is not None else 2, **kwargs
        )
    return acqf, X, value


# --------------------------------------------------------------- closed form
@pytest.mark.parametrize("name", ["laplace", "ep", "skew", "variational"])
@pytest.mark.parametrize("with_winner", [False, True])
def test_closed_form_equals_botorch_eubo(name, with_winner):
    model = _model(name, d=3, seed=1)
    assert type(pair_moments(model)) is not PairMoments  # the fast path
    g = torch.Generator().manual_seed(3)
    winner = torch.rand(3, generator=g, dtype=torch.float64) if with_winner else None
    q = 1 if with_winner else 2
    X = torch.rand(4, 5, q, 3, generator=g, dtype=torch.float64)
    X[0, 0, -1] = X[0, 0, 0]  # a pair with zero variance (BoTorch's clamp)
    acqf = AnalyticExpectedUtilityOfBestOption(
        pref_model=model, previous_winner=None if winner is None else winner[None]
    )
    with torch.no_grad():
        expected = acqf(X.reshape(-1, q, 3)).reshape(4, 5)
        got = eubo_values(model, X, previous_winner=winner)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        # not the closed-form kernel: the fast path through covar_module
        lambda: _model("laplace", covar_module=ScaleKernel(MaternKernel(nu=2.5))),
        # an input transform: through model.posterior
        lambda: _model("ep", input_transform=Normalize(d=2)),
        lambda: PairwiseGP(*make_pairwise_data(15, 30, seed=2)[:2]).eval(),
    ],
    ids=["matern", "input-transform", "botorch-pairwise-gp"],
)
def test_closed_form_on_other_kernels_and_models(make):
    model = make()
    through_posterior = isinstance(model, PairwiseGP) or hasattr(
        model, "input_transform"
    )
    assert (type(pair_moments(model)) is PairMoments) == through_posterior
    X = torch.rand(6, 2, 2, dtype=torch.float64)
    acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    with torch.no_grad():
        torch.testing.assert_close(
            eubo_values(model, X), acqf(X), rtol=1e-10, atol=1e-12
        )


@pytest.mark.parametrize("name", ["laplace", "skew", "variational"])
def test_written_out_gradient_equals_autograd(name):
    moments = pair_moments(_model(name, d=3))
    assert type(moments) is not PairMoments  # the fast path applies
    X = torch.rand(7, 2, 3, dtype=torch.float64)
    X[0, 1] = X[0, 0]
    for add in (True, False):
        v, g = moments.eubo_and_grad(X, add)
        v_ref, g_ref = PairMoments.eubo_and_grad(moments, X, add)
        torch.testing.assert_close(v, v_ref, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", ["laplace", "skew", "variational"])
def test_joint_moments_equal_the_posterior(name):
    model = _model(name, d=3)
    X = torch.rand(9, 3, dtype=torch.float64)
    mean, cov = pair_moments(model).joint(X)
    with torch.no_grad():
        post = model.posterior(X)
        torch.testing.assert_close(mean, post.mean.reshape(-1))
        torch.testing.assert_close(cov, post.covariance_matrix)


# --------------------------------------------------------------- maximiser
@pytest.mark.parametrize(
    "name, n, m, d, seed",
    [("laplace", 20, 20, 2, 0), ("ep", 30, 30, 3, 1), ("laplace", 40, 30, 4, 2)],
)
@pytest.mark.parametrize("with_winner", [False, True])
def test_at_least_as_good_as_optimize_acqf(name, n, m, d, seed, with_winner):
    model = _fitted(name, n, m, d, seed)
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).double()
    winner = model.datapoints[0] if with_winner else None
    acqf, _, ref = _botorch(
        model,
        bounds,
        winner,
        num_restarts=4,
        raw_samples=128,
        options={"seed": seed, "maxiter": 100},
    )
    X, value = maximize_eubo(
        model, bounds, previous_winner=winner, seed=seed, return_value=True
    )
    assert X.shape == (1 if with_winner else 2, d)
    with torch.no_grad():
        torch.testing.assert_close(value, acqf(X[None])[0], rtol=1e-12, atol=1e-12)
    assert value >= ref - 1e-6


def test_reaches_the_grid_maximum_in_one_dimension():
    model = _fitted("laplace", 12, 20, 1, 4)
    bounds = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    g = torch.linspace(0, 1, 401, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2, 1)
    with torch.no_grad():
        grid_max = eubo_values(model, grid).max()
    X, value = maximize_eubo(model, bounds, seed=0, return_value=True)
    assert value >= grid_max - 1e-9
    # and with the previous winner fixed: a 1-d search
    w = model.datapoints[3]
    with torch.no_grad():
        line_max = eubo_values(model, g.reshape(-1, 1, 1), previous_winner=w).max()
    _, value = maximize_eubo(
        model, bounds, previous_winner=w, seed=0, return_value=True
    )
    assert value >= line_max - 1e-9


def test_prior_only_model_asks_opposite_corners():
    # no data: μ = 0 and EUBO = √(Var(f1 - f2) / 2π), largest for the two
    # designs farthest apart (lengthscales are equal): opposite corners
    kernel = ScaleKernel(MaternKernel()).double()
    kernel.base_kernel.lengthscale = 5.0
    model = PairwiseLaplaceGP(None, None, covar_module=kernel).eval()
    bounds = torch.tensor([[-1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    X, value = maximize_eubo(model, bounds, seed=0, return_value=True)
    corners = {(-1.0, 2.0, 3.0, 4.0), (3.0, 4.0, -1.0, 2.0)}
    corners |= {(-1.0, 4.0, 3.0, 2.0), (3.0, 2.0, -1.0, 4.0)}
    assert tuple(X.reshape(-1).tolist()) in corners
    with torch.no_grad():
        K = model.covar_module(X).to_dense()
    expected = math.sqrt((K[0, 0] + K[1, 1] - 2 * K[0, 1]).item() / (2 * math.pi))
    assert value.item() == pytest.approx(expected, rel=1e-12)


def test_bounds_respected_and_deterministic():
    model = _model("ep", d=2)
    # the model lives on the unit square; this box cuts through it
    bounds = torch.tensor([[0.3, -2.0], [0.45, 0.2]], dtype=torch.float64)
    X = maximize_eubo(model, bounds, seed=7)
    assert ((X >= bounds[0]) & (X <= bounds[1])).all()
    state = torch.get_rng_state()
    assert torch.equal(maximize_eubo(model, bounds, seed=7), X)
    assert torch.equal(torch.get_rng_state(), state)  # a given seed draws nothing
    w = torch.tensor([0.4, 0.0], dtype=torch.float64)
    Y = maximize_eubo(model, bounds, previous_winner=w, seed=7)
    assert Y.shape == (1, 2) and ((Y >= bounds[0]) & (Y <= bounds[1])).all()
    assert torch.equal(maximize_eubo(model, bounds, previous_winner=w[None], seed=7), Y)
    # no ascent: the best raw pair; with one, never worse
    _, v0 = maximize_eubo(model, bounds, seed=7, num_steps=0, return_value=True)
    _, v1 = maximize_eubo(model, bounds, seed=7, return_value=True)
    assert v1 >= v0


@pytest.mark.parametrize("name", ["skew", "variational", "botorch"])
def test_other_models(name):
    if name == "botorch":  # through model.posterior and autograd
        model = PairwiseGP(*make_pairwise_data(12, 20, seed=5)[:2]).eval()
    else:
        model = _model(name, 12, 20, seed=5)
    acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    pair, value = maximize_eubo(
        model, UNIT2, raw_samples=32, num_restarts=2, seed=0, return_value=True
    )
    with torch.no_grad():
        torch.testing.assert_close(value, acqf(pair[None])[0])
        g = torch.Generator().manual_seed(0)
        raw = eubo_values(model, torch.rand(64, 2, 2, generator=g).double())
    assert value >= raw.max()


# --------------------------------------------------------------- errors
def test_errors_name_the_argument():
    model = _model("laplace")
    with pytest.raises(InputDataError, match="bounds must be a 2 x d"):
        maximize_eubo(model, torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(InputDataError, match="lower < upper"):
        maximize_eubo(model, torch.tensor([[0.0, 1.0], [1.0, 1.0]]).double())
    with pytest.raises(InputDataError, match=r"one column per model input \(d=2\)"):
        maximize_eubo(model, torch.tensor([[0.0], [1.0]]).double())
    with pytest.raises(InputDataError, match="finite"):
        maximize_eubo(model, torch.tensor([[0.0, 0.0], [1.0, math.inf]]).double())
    with pytest.raises(InputTypeError, match="floating"):
        maximize_eubo(model, torch.tensor([[0, 0], [1, 1]]))
    with pytest.raises(InputDataError, match=r"previous_winner must have shape \(2,\)"):
        maximize_eubo(model, UNIT2, previous_winner=torch.zeros(3).double())
    with pytest.raises(InputTypeError, match="previous_winner must be a torch"):
        maximize_eubo(model, UNIT2, previous_winner=[0.0, 0.0])
    with pytest.raises(InputDataError, match="num_restarts must be at most the 6"):
        maximize_eubo(model, UNIT2, raw_samples=4, num_restarts=7)
    with pytest.raises(InputDataError, match="num_restarts must be at most the 4"):
        maximize_eubo(
            model, UNIT2, raw_samples=4, num_restarts=5, previous_winner=UNIT2[0]
        )
    with pytest.raises(InputDataError, match="raw_samples must be an int >= 2"):
        maximize_eubo(model, UNIT2, raw_samples=1, num_restarts=1)
    with pytest.raises(InputDataError, match="num_steps must be an int >= 0"):
        maximize_eubo(model, UNIT2, num_steps=-1)
    with pytest.raises(InputDataError, match="num_restarts must be an int >= 1"):
        maximize_eubo(model, UNIT2, num_restarts=2.0)
    with pytest.raises(InputDataError, match="X must have q=1"):
        eubo_values(model, torch.rand(3, 2, 2).double(), previous_winner=UNIT2[0])
    two = SingleTaskGP(UNIT2, torch.rand(2, 2, dtype=torch.float64))
    with pytest.raises(UnsupportedError, match="num_outputs=2"):
        maximize_eubo(two, UNIT2)
    X, comp, _ = make_pairwise_data(8, 10, batch_shape=torch.Size([3]))
    with pytest.raises(UnsupportedError, match=r"batch_shape=\(3,\)"):
        maximize_eubo(PairwiseLaplaceGP(X, comp), UNIT2)


# ------------------------------------------------------ FastAnalyticEUBO
@pytest.mark.parametrize("name", ["laplace", "ep", "skew", "variational"])
@pytest.mark.parametrize("with_winner", [False, True])
def test_fast_acqf_values_and_gradients_equal_botorch(name, with_winner):
    from prefbo.acquisition import FastAnalyticEUBO

    model = _model(name, d=3, seed=2)
    g = torch.Generator().manual_seed(4)
    winner = torch.rand(1, 3, generator=g, dtype=torch.float64) if with_winner else None
    q = 1 if with_winner else 2
    X = torch.rand(6, q, 3, generator=g, dtype=torch.float64)
    ref = AnalyticExpectedUtilityOfBestOption(pref_model=model, previous_winner=winner)
    fast = FastAnalyticEUBO(model, previous_winner=winner)
    grads = []
    for acqf in (ref, fast):
        Xg = X.clone().requires_grad_(True)
        values = acqf(Xg)
        (grad,) = torch.autograd.grad(values.sum(), Xg)
        grads.append((values.detach(), grad))
    torch.testing.assert_close(grads[1][0], grads[0][0], rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(grads[1][1], grads[0][1], rtol=1e-7, atol=1e-9)
    # a q x d input is one question (t-batch mode, as BoTorch's)
    torch.testing.assert_close(fast(X[0]), ref(X[0]), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("with_winner", [False, True])
def test_fast_acqf_second_derivatives_and_torch_func_equal_botorch(with_winner):
    # the written-out first derivative must not cut higher ones off: Hessians
    # (double backward), torch.func and a winner that requires grad all match
    # BoTorch's class, differentiated by autograd
    from prefbo.acquisition import FastAnalyticEUBO

    model = _model("laplace", d=3, seed=2)
    g = torch.Generator().manual_seed(5)
    q = 1 if with_winner else 2
    winner = torch.rand(1, 3, generator=g, dtype=torch.float64) if with_winner else None
    X = torch.rand(1, q, 3, generator=g, dtype=torch.float64)
    ref = AnalyticExpectedUtilityOfBestOption(pref_model=model, previous_winner=winner)
    fast = FastAnalyticEUBO(model, previous_winner=winner)
    hessians = [
        torch.autograd.functional.hessian(lambda x, a=acqf: a(x).sum(), X)
        for acqf in (ref, fast)
    ]
    assert hessians[0].abs().max() > 1e-3  # a real curvature to compare
    torch.testing.assert_close(hessians[1], hessians[0], rtol=1e-7, atol=1e-9)
    grads = [torch.func.grad(lambda x, a=acqf: a(x).sum())(X) for acqf in (ref, fast)]
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-7, atol=1e-9)
    if with_winner:  # gradient in the winner itself
        out = []
        for cls in (AnalyticExpectedUtilityOfBestOption, FastAnalyticEUBO):
            w = winner.clone().requires_grad_(True)
            acqf = cls(model, previous_winner=w)
            (gw,) = torch.autograd.grad(acqf(X.clone().requires_grad_(True)).sum(), w)
            out.append(gw)
        torch.testing.assert_close(out[1], out[0], rtol=1e-7, atol=1e-9)


def test_fast_acqf_takes_botorchs_path_in_optimize_acqf():
    from prefbo.acquisition import FastAnalyticEUBO

    model = _fitted("laplace", 30, 60, 3, 5)
    bounds = torch.tensor([[0.0] * 3, [1.0] * 3], dtype=torch.float64)
    out = []
    for acqf in (
        AnalyticExpectedUtilityOfBestOption(pref_model=model),
        FastAnalyticEUBO(model),
    ):
        torch.manual_seed(0)
        X, value = optimize_acqf(
            acqf,
            bounds=bounds,
            q=2,
            num_restarts=3,
            raw_samples=64,
            options={"seed": 1, "maxiter": 60},
        )
        out.append((X, value))
    torch.testing.assert_close(out[1][0], out[0][0], rtol=0, atol=1e-8)
    torch.testing.assert_close(out[1][1], out[0][1], rtol=1e-10, atol=1e-10)


def test_fast_acqf_errors():
    from prefbo.acquisition import FastAnalyticEUBO

    model32 = PairwiseLaplaceGP(
        torch.rand(6, 2, dtype=torch.float32), torch.tensor([[0, 1], [2, 3]])
    )
    with pytest.raises(
        InputTypeError, match="model's dtype torch.float32; got torch.float64"
    ):
        FastAnalyticEUBO(model32.eval())(torch.rand(4, 2, 2, dtype=torch.float64))

    model = _model("laplace", d=2)
    with pytest.raises(UnsupportedError, match="q=2"):
        FastAnalyticEUBO(model)(torch.rand(4, 3, 2, dtype=torch.float64))
    wrong_d = torch.rand(4, 2, 3, dtype=torch.float64)
    with pytest.raises(InputDataError, match=r"X must have d=2 features .*\(4, 2, 3\)"):
        FastAnalyticEUBO(model)(wrong_d)
    with pytest.raises(InputDataError, match=r"X must have d=2 features"):
        eubo_values(model, wrong_d)
    with pytest.raises(UnsupportedError, match="q=1"):
        FastAnalyticEUBO(model, previous_winner=torch.rand(2, dtype=torch.float64))(
            torch.rand(4, 2, 2, dtype=torch.float64)
        )
    with pytest.raises(InputDataError, match=r"previous_winner must have shape"):
        FastAnalyticEUBO(model, previous_winner=torch.rand(3, dtype=torch.float64))
