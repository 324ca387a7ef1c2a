import math

import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.models import SingleTaskGP
from botorch.models.pairwise_gp import PairwiseGP
from botorch.optim import optimize_acqf
from gpytorch.kernels import MaternKernel, ScaleKernel

from prefbo import PairwiseLaplaceGP
from prefbo.acquisition import eubo_values, maximize_eubo
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.loop.optimizer import expected_fit_warnings
from prefbo.utils.testing import make_pairwise_data

UNIT2 = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)


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


@pytest.mark.parametrize(
    "name, n, m, d, seed",
    [("laplace", 20, 20, 2, 0), ("ep", 30, 30, 3, 1), ("laplace", 40, 30, 4, 2)],
)
@pytest.mark.parametrize("with_winner", [False, True])
def test_at_least_as_good_as_optimize_acqf(
    make_fitted, name, n, m, d, seed, with_winner
):
    model = make_fitted(name, n, m, d, seed)
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


def test_reaches_the_grid_maximum_in_one_dimension(make_fitted):
    model = make_fitted("laplace", 12, 20, 1, 4)
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


def test_bounds_respected_and_deterministic(make_model):
    model = make_model("ep", d=2)
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
def test_other_models(make_model, name):
    if name == "botorch":  # through model.posterior and autograd
        model = PairwiseGP(*make_pairwise_data(12, 20, seed=5)[:2]).eval()
    else:
        model = make_model(name, 12, 20, seed=5)
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
def test_errors_name_the_argument(make_model):
    model = make_model("laplace")
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
    with pytest.raises(
        InputDataError, match="raw_samples must be an int >= 2; got raw_samples=1"
    ):
        maximize_eubo(model, UNIT2, raw_samples=1, num_restarts=1)
    with pytest.raises(
        InputDataError, match="num_steps must be an int >= 0; got num_steps=-1"
    ):
        maximize_eubo(model, UNIT2, num_steps=-1)
    with pytest.raises(
        InputTypeError, match="num_restarts must be an int >= 1; got float 2.0"
    ):
        maximize_eubo(model, UNIT2, num_restarts=2.0)
    two = SingleTaskGP(UNIT2, torch.rand(2, 2, dtype=torch.float64))
    with pytest.raises(UnsupportedError, match="num_outputs=2"):
        maximize_eubo(two, UNIT2)
    X, comp, _ = make_pairwise_data(8, 10, batch_shape=torch.Size([3]))
    with pytest.raises(UnsupportedError, match=r"batch_shape=\(3,\)"):
        maximize_eubo(PairwiseLaplaceGP(X, comp), UNIT2)
