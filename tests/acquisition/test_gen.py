import warnings

import numpy as np
import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.exceptions.errors import BotorchError
from botorch.fit import fit_gpytorch_mll
from botorch.generation.gen import gen_candidates_scipy
from botorch.optim import optimize_acqf
from gpytorch.kernels import MaternKernel, ScaleKernel

from prefbo import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.acquisition import FastAnalyticEUBO, gen_candidates_eubo
from prefbo.exceptions import UnsupportedError
from prefbo.loop.optimizer import expected_fit_warnings
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.utils.testing import make_pairwise_data

D = 3
BOUNDS = torch.tensor([[0.0] * D, [1.0] * D], dtype=torch.float64)
MODELS = {
    "laplace": (PairwiseLaplaceGP, PairwiseLaplaceMLL),
    "ep": (PairwiseEPGP, PairwiseEPMLL),
}


def _fitted(name, seed=5, dtype=torch.float64):
    X, comp, _ = make_pairwise_data(25, 50, d=D, seed=seed)
    cls, mll_cls = MODELS[name]
    model = cls(X.to(dtype), comp)
    with expected_fit_warnings():
        fit_gpytorch_mll(mll_cls(model.likelihood, model))
    return model.eval()


def _optimize(acqf, gen, q=2, bounds=BOUNDS, **options):
    torch.manual_seed(0)
    with expected_fit_warnings():
        return optimize_acqf(
            acqf,
            bounds=bounds,
            q=q,
            num_restarts=3,
            raw_samples=64,
            options={"seed": 1, "maxiter": 60, **options},
            gen_candidates=gen,
        )


class _Delegated:
    r"""Counts the calls gen_candidates_eubo hands to gen_candidates_scipy."""

    def __init__(self, monkeypatch):
        import prefbo.acquisition.gen as gen

        self.n = 0
        original = gen.gen_candidates_scipy

        def counted(*args, **kwargs):
            self.n += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(gen, "gen_candidates_scipy", counted)


@pytest.mark.parametrize("name", ["laplace", "ep"])
@pytest.mark.parametrize("with_winner", [False, True])
def test_same_question_as_botorchs_gen_candidates_scipy(name, with_winner, monkeypatch):
    # the same L-BFGS-B iterates (the objective in NumPy: equal to rounding),
    # with BoTorch's own tolerance options passed through (ftol with
    # factr=None: the batched path)
    model = _fitted(name)
    winner = torch.full((1, D), 0.4, dtype=torch.float64) if with_winner else None
    q = 1 if with_winner else 2
    delegated = _Delegated(monkeypatch)
    for options in ({}, {"ftol": 1e-6, "factr": None}):
        acqf = FastAnalyticEUBO(model, previous_winner=winner)
        X_ref, v_ref = _optimize(acqf, None, q=q, **options)
        X, v = _optimize(acqf, gen_candidates_eubo, q=q, **options)
        assert delegated.n == 0  # L-BFGS-B ran on value_and_grad
        torch.testing.assert_close(X, X_ref, rtol=0, atol=1e-9)
        torch.testing.assert_close(v, v_ref, rtol=1e-12, atol=1e-12)
    # and the question is BoTorch's EUBO maximiser's (its own class, autograd)
    botorch_acqf = AnalyticExpectedUtilityOfBestOption(
        pref_model=model, previous_winner=winner
    )
    X_bt, v_bt = _optimize(botorch_acqf, None, q=q)
    X, v = _optimize(
        FastAnalyticEUBO(model, previous_winner=winner), gen_candidates_eubo, q=q
    )
    torch.testing.assert_close(X, X_bt, rtol=0, atol=1e-8)
    torch.testing.assert_close(v, v_bt, rtol=1e-10, atol=1e-10)


def test_float32_model_same_question_to_the_bit(monkeypatch):
    # float32 is evaluated in torch: the very numbers autograd's path sees
    model = _fitted("laplace", dtype=torch.float32)
    bounds = BOUNDS.to(torch.float32)
    delegated = _Delegated(monkeypatch)
    with warnings.catch_warnings():  # float32 line searches end "ABNORMAL"
        warnings.simplefilter("ignore", RuntimeWarning)  # both arms: a retry
        X_ref, v_ref = _optimize(FastAnalyticEUBO(model), None, bounds=bounds)
        X, v = _optimize(FastAnalyticEUBO(model), gen_candidates_eubo, bounds=bounds)
    assert delegated.n == 0 and X.dtype == torch.float32
    assert torch.equal(X, X_ref) and torch.equal(v, v_ref)


def test_options_reach_lbfgsb():
    model = _fitted("laplace")
    acqf = FastAnalyticEUBO(model)
    ics = torch.rand(
        3, 2, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )
    seen = []
    for maxiter in (1, 40):
        ref = gen_candidates_scipy(
            ics, acqf, BOUNDS[0], BOUNDS[1], options={"maxiter": maxiter}
        )
        out = gen_candidates_eubo(
            ics,
            acqf,
            BOUNDS[0],
            BOUNDS[1],
            options={"maxiter": maxiter, "callback": lambda x: seen.append(x)},
        )
        torch.testing.assert_close(out[0], ref[0], rtol=0, atol=1e-9)
        torch.testing.assert_close(out[1], ref[1], rtol=1e-12, atol=1e-12)
    assert not torch.allclose(
        gen_candidates_eubo(ics, acqf, BOUNDS[0], BOUNDS[1], options={"maxiter": 1})[0],
        gen_candidates_eubo(ics, acqf, BOUNDS[0], BOUNDS[1], options={"maxiter": 40})[
            0
        ],
    )
    assert len(seen) > 3  # the callback is L-BFGS-B's, called per iteration
    # a single q x d start comes back as gen_candidates_scipy returns it
    X, v = gen_candidates_eubo(ics[0], acqf, BOUNDS[0], BOUNDS[1])
    X_ref, v_ref = gen_candidates_scipy(ics[0], acqf, BOUNDS[0], BOUNDS[1])
    assert X.shape == (2, D) and v.shape == v_ref.shape
    torch.testing.assert_close(X, X_ref, rtol=0, atol=1e-9)
    # a start outside the box is refused
    with pytest.raises(BotorchError, match="out of bounds"):
        gen_candidates_eubo(ics + 2.0, acqf, BOUNDS[0], BOUNDS[1])


def test_everything_else_goes_to_gen_candidates_scipy(monkeypatch):
    model = _fitted("laplace")
    ics = torch.rand(
        2, 2, D, dtype=torch.float64, generator=torch.Generator().manual_seed(3)
    )
    delegated = _Delegated(monkeypatch)
    fast = FastAnalyticEUBO(model)
    botorch_acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    matern = PairwiseLaplaceGP(
        model.datapoints, model.comparisons, covar_module=ScaleKernel(MaternKernel())
    ).eval()
    cases = [
        (botorch_acqf, {}, {}),  # not prefbo's class
        (FastAnalyticEUBO(matern), {}, {}),  # no written-out gradient
        (fast, {"fixed_features": {0: 0.5}}, {}),
        (fast, {"use_parallel_mode": False}, {}),
        (fast, {}, {"method": "SLSQP"}),  # off BoTorch's batched path
        (fast, {"timeout_sec": 100.0}, {}),
    ]
    for acqf, kwargs, options in cases:
        ref = gen_candidates_scipy(
            ics,
            acqf,
            BOUNDS[0],
            BOUNDS[1],
            options={"maxiter": 20, **options},
            **kwargs,
        )
        out = gen_candidates_eubo(
            ics,
            acqf,
            BOUNDS[0],
            BOUNDS[1],
            options={"maxiter": 20, **options},
            **kwargs,
        )
        torch.testing.assert_close(out[0], ref[0], rtol=0, atol=0)
        torch.testing.assert_close(out[1], ref[1], rtol=0, atol=0)
    assert delegated.n == len(cases)
    constraint = [
        (torch.tensor([0, 1]), torch.tensor([1.0, 1.0], dtype=torch.float64), 0.5)
    ]
    out = gen_candidates_eubo(
        ics,
        fast,
        BOUNDS[0],
        BOUNDS[1],
        options={"maxiter": 20},
        inequality_constraints=constraint,
    )
    assert delegated.n == len(cases) + 1
    assert bool((out[0][..., 0] + out[0][..., 1] >= 0.5 - 1e-6).all())


def test_value_and_grad_matches_forward_and_finite_differences():
    model = _fitted("ep")
    for winner in (None, torch.full((1, D), 0.3, dtype=torch.float64)):
        acqf = FastAnalyticEUBO(model, previous_winner=winner)
        q = 1 if winner is not None else 2
        X = torch.rand(
            4, q, D, dtype=torch.float64, generator=torch.Generator().manual_seed(4)
        )
        values, grad = acqf.value_and_grad(X)
        torch.testing.assert_close(values, acqf(X), rtol=1e-12, atol=1e-12)
        h = 1e-6
        fd = torch.zeros_like(X)
        for i in range(q):
            for j in range(D):
                E = torch.zeros_like(X)
                E[:, i, j] = h
                fd[:, i, j] = (acqf(X + E) - acqf(X - E)) / (2 * h)
        torch.testing.assert_close(grad, fd, rtol=1e-5, atol=1e-7)
    matern = PairwiseLaplaceGP(
        model.datapoints, model.comparisons, covar_module=ScaleKernel(MaternKernel())
    ).eval()
    slow = FastAnalyticEUBO(matern)
    assert not slow.closed_form_gradient and acqf.closed_form_gradient
    with pytest.raises(UnsupportedError, match="value_and_grad needs the written-out"):
        slow.value_and_grad(X)
    with pytest.raises(UnsupportedError, match="q=2"):
        FastAnalyticEUBO(model).value_and_grad(torch.rand(4, 3, D, dtype=torch.float64))


@pytest.mark.parametrize("name", ["laplace", "ep"])
def test_numpy_evaluation_equals_torch(name):
    # Ŵ Σ Ŵ - Ŵ for the pairwise GPs' M: the torch path's triangular solves
    model = _fitted(name)
    g = torch.Generator().manual_seed(6)
    for winner in (None, torch.rand(1, D, dtype=torch.float64, generator=g)):
        acqf = FastAnalyticEUBO(model, previous_winner=winner)
        assert acqf.numpy_ready
        q = 1 if winner is not None else 2
        X = torch.rand(7, q, D, dtype=torch.float64, generator=g)
        X[0, -1] = X[0, 0] if q == 2 else winner[0]  # zero variance (clamped)
        values, grad = acqf.value_and_grad(X)
        v_np, g_np = acqf.numpy_value_and_grad(X.numpy())
        assert isinstance(v_np, np.ndarray) and g_np.shape == (7, q, D)
        torch.testing.assert_close(
            torch.from_numpy(v_np), values, rtol=1e-12, atol=1e-12
        )
        torch.testing.assert_close(torch.from_numpy(g_np), grad, rtol=1e-9, atol=1e-10)
    with pytest.raises(UnsupportedError, match=r"b x 2 x d arrays"):
        FastAnalyticEUBO(model).numpy_value_and_grad(np.zeros((4, 3, D)))
    model32 = _fitted(name, dtype=torch.float32)
    acqf32 = FastAnalyticEUBO(model32)
    assert acqf32.closed_form_gradient and not acqf32.numpy_ready
    with pytest.raises(UnsupportedError, match="float64 model on the CPU"):
        acqf32.numpy_value_and_grad(np.zeros((4, 2, D)))


def test_numpy_evaluation_with_an_explicit_M():
    # SkewGP's moments carry M itself (the draws' covariance minus Q)
    from prefbo.models import SkewGP

    X, comp, _ = make_pairwise_data(15, 30, d=D, seed=1)
    acqf = FastAnalyticEUBO(SkewGP(X, comp, num_samples=64, seed=0))
    assert acqf.numpy_ready
    Q = torch.rand(
        5, 2, D, dtype=torch.float64, generator=torch.Generator().manual_seed(7)
    )
    values, grad = acqf.value_and_grad(Q)
    v_np, g_np = acqf.numpy_value_and_grad(Q.numpy())
    torch.testing.assert_close(torch.from_numpy(v_np), values, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.from_numpy(g_np), grad, rtol=1e-9, atol=1e-10)


def test_delegated_questions_are_found_under_no_grad():
    # BoTorch's gen_candidates_scipy needs autograd: a caller inside
    # torch.no_grad() (the loop's ask() in a user's no_grad block) still gets
    # the question, the same one
    model = _fitted("laplace")
    matern = PairwiseLaplaceGP(
        model.datapoints, model.comparisons, covar_module=ScaleKernel(MaternKernel())
    ).eval()
    ics = torch.rand(
        2, 2, D, dtype=torch.float64, generator=torch.Generator().manual_seed(3)
    )
    acqf = FastAnalyticEUBO(matern)  # no written-out gradient: delegated
    args = (ics, acqf, BOUNDS[0], BOUNDS[1])
    with torch.no_grad():
        X, v = gen_candidates_eubo(*args, options={"maxiter": 20})
    X_ref, v_ref = gen_candidates_eubo(*args, options={"maxiter": 20})
    assert torch.equal(X, X_ref) and torch.equal(v, v_ref)
