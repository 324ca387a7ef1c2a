import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.models.pairwise_gp import PairwiseGP
from botorch.models.transforms.input import Normalize
from botorch.optim import optimize_acqf
from gpytorch.kernels import MaternKernel, ScaleKernel

from prefbo import PairwiseLaplaceGP
from prefbo.acquisition import FastAnalyticEUBO, PairMoments, eubo_values
from prefbo.acquisition.pair_moments import pair_moments
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.utils.testing import make_pairwise_data


# --------------------------------------------------------------- closed form
@pytest.mark.parametrize("name", ["laplace", "ep", "skew", "variational"])
@pytest.mark.parametrize("with_winner", [False, True])
def test_closed_form_equals_botorch_eubo(make_model, name, with_winner):
    model = make_model(name, d=3, seed=1)
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
        lambda m: m("laplace", covar_module=ScaleKernel(MaternKernel(nu=2.5))),
        # an input transform: through model.posterior
        lambda m: m("ep", input_transform=Normalize(d=2)),
        lambda m: PairwiseGP(*make_pairwise_data(15, 30, seed=2)[:2]).eval(),
    ],
    ids=["matern", "input-transform", "botorch-pairwise-gp"],
)
def test_closed_form_on_other_kernels_and_models(make_model, make):
    model = make(make_model)
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


# ------------------------------------------------------ FastAnalyticEUBO
@pytest.mark.parametrize("name", ["laplace", "ep", "skew", "variational"])
@pytest.mark.parametrize("with_winner", [False, True])
def test_fast_acqf_values_and_gradients_equal_botorch(make_model, name, with_winner):
    model = make_model(name, d=3, seed=2)
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
def test_fast_acqf_second_derivatives_and_torch_func_equal_botorch(
    make_model, with_winner
):
    # the written-out first derivative must not cut higher ones off: Hessians
    # (double backward), torch.func and a winner that requires grad all match
    # BoTorch's class, differentiated by autograd
    model = make_model("laplace", d=3, seed=2)
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


def test_fast_acqf_takes_botorchs_path_in_optimize_acqf(make_fitted):
    model = make_fitted("laplace", 30, 60, 3, 5)
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


def test_fast_acqf_errors(make_model):
    model32 = PairwiseLaplaceGP(
        torch.rand(6, 2, dtype=torch.float32), torch.tensor([[0, 1], [2, 3]])
    )
    with pytest.raises(
        InputTypeError, match="model's dtype torch.float32; got torch.float64"
    ):
        FastAnalyticEUBO(model32.eval())(torch.rand(4, 2, 2, dtype=torch.float64))

    model = make_model("laplace", d=2)
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


def test_eubo_values_errors(make_model):
    model = make_model("laplace")
    winner = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(InputDataError, match="X must have q=1"):
        eubo_values(model, torch.rand(3, 2, 2).double(), previous_winner=winner)
    with pytest.raises(InputDataError, match="X must be a batch_shape x q x d"):
        eubo_values(model, torch.rand(2).double())
    with pytest.raises(InputDataError, match=r"previous_winner must have shape \(2,\)"):
        eubo_values(model, torch.rand(3, 1, 2).double(), previous_winner=winner[:1])
    with pytest.raises(InputTypeError, match="previous_winner must be a torch"):
        eubo_values(model, torch.rand(3, 1, 2).double(), previous_winner=[0.0, 0.0])
    with pytest.raises(InputDataError, match="previous_winner must be finite"):
        eubo_values(model, torch.rand(3, 1, 2).double(), previous_winner=winner / 0.0)


@pytest.mark.parametrize("name", ["laplace", "ep", "skew"])
def test_nan_questions_are_an_error_not_nan(make_model, name):
    model = make_model(name)
    X = torch.rand(3, 2, 2, dtype=torch.float64)
    X[2, 1, 0] = float("nan")
    acqf = FastAnalyticEUBO(model)
    with pytest.raises(InputDataError, match=r"X must be finite.*row \(2, 1\)"):
        acqf(X)
    with pytest.raises(InputDataError, match=r"X must be finite.*row \(2, 1\)"):
        eubo_values(model, X)
    if acqf.closed_form_gradient:
        with pytest.raises(InputDataError, match=r"X must be finite"):
            acqf.value_and_grad(X)
