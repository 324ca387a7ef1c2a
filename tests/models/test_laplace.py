import math
import warnings

import pytest
import torch
from botorch.acquisition.max_value_entropy_search import qMaxValueEntropy
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    PairwiseBayesianActiveLearningByDisagreement,
    qExpectedUtilityOfBestOption,
)
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP
from botorch.models.likelihoods.pairwise import (
    PairwiseLogitLikelihood as BoTorchLogit,
)
from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.kernels import RBFKernel

from prefbo import PairwiseLaplaceGP, PairwiseLaplaceMLL
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.testing import make_pairwise_data, set_scale_kernel


@pytest.mark.parametrize("likelihood", [None, BoTorchLogit()])
def test_posterior_and_evidence_equal_botorch(likelihood):
    X, comp = make_pairwise_data(25, 40, seed=1)[:2]
    bt = PairwiseGP(X, comp, likelihood=likelihood)
    pb = PairwiseLaplaceGP(X, comp, likelihood=likelihood)
    for model in (bt, pb):
        set_scale_kernel(model, 1.3, torch.tensor([[0.3, 0.5]], dtype=torch.float64))
    bt.set_train_data(X, comp, update_model=True)  # BoTorch needs a manual refresh
    zmax = (
        ((pb.utility[comp[:, 0]] - pb.utility[comp[:, 1]]) / math.sqrt(2)).abs().max()
    )
    assert zmax < 3  # inside BoTorch's clamp, so both are the exact Laplace
    Xt = torch.rand(4, 3, 2, dtype=torch.float64)
    post_bt, post_pb = bt.posterior(Xt), pb.posterior(Xt)
    torch.testing.assert_close(post_pb.mean, post_bt.mean, rtol=0, atol=1e-6)
    torch.testing.assert_close(
        post_pb.covariance_matrix, post_bt.covariance_matrix, rtol=0, atol=1e-6
    )
    bt.train(), pb.train()
    ev_bt = PairwiseLaplaceMarginalLogLikelihood(bt.likelihood, bt)(
        bt(*bt.train_inputs), bt.train_targets
    )
    ev_pb = PairwiseLaplaceMLL(pb.likelihood, pb)(
        pb(*pb.train_inputs), pb.train_targets
    )
    assert ev_pb.item() == pytest.approx(ev_bt.item(), abs=1e-6)


def test_fit_matches_botorch_hyperparameters():
    X, comp = make_pairwise_data(30, 60, seed=2)[:2]
    bt, pb = PairwiseGP(X, comp), PairwiseLaplaceGP(X, comp)
    with warnings.catch_warnings():  # BoTorch's own jitter warnings
        warnings.simplefilter("ignore")
        fit_gpytorch_mll(PairwiseLaplaceMarginalLogLikelihood(bt.likelihood, bt))
    fit_gpytorch_mll(PairwiseLaplaceMLL(pb.likelihood, pb))
    torch.testing.assert_close(
        pb.covar_module.outputscale, bt.covar_module.outputscale, rtol=2e-3, atol=1e-4
    )
    torch.testing.assert_close(
        pb.covar_module.base_kernel.lengthscale,
        bt.covar_module.base_kernel.lengthscale,
        rtol=2e-3,
        atol=1e-4,
    )


def test_batched_fit_equals_loop_of_fits():
    X, comp = make_pairwise_data(15, 30, batch_shape=torch.Size([2]), seed=4)[:2]
    batched = PairwiseLaplaceGP(X, comp)
    fit_gpytorch_mll(PairwiseLaplaceMLL(batched.likelihood, batched))
    for b in range(2):
        single = PairwiseLaplaceGP(X[b], comp[b])
        fit_gpytorch_mll(PairwiseLaplaceMLL(single.likelihood, single))
        torch.testing.assert_close(
            batched.covar_module.outputscale[b],
            single.covar_module.outputscale,
            rtol=5e-3,
            atol=1e-3,
        )


def test_botorch_acquisition_functions_run_and_agree(tkwargs64):
    X, comp = make_pairwise_data(20, 30, **tkwargs64)[:2]
    bt, pb = PairwiseGP(X, comp), PairwiseLaplaceGP(X, comp)
    cand = torch.rand(6, 2, 2, **tkwargs64)
    eubo_bt = AnalyticExpectedUtilityOfBestOption(pref_model=bt)(cand)
    eubo_pb = AnalyticExpectedUtilityOfBestOption(pref_model=pb)(cand)
    torch.testing.assert_close(eubo_pb, eubo_bt, rtol=0, atol=1e-6)
    sampler = SobolQMCNormalSampler(torch.Size([256]), seed=0)
    q = qExpectedUtilityOfBestOption(pref_model=pb, sampler=sampler)(cand)
    assert torch.isfinite(q).all() and (q >= eubo_pb - 0.05).all()
    bald = PairwiseBayesianActiveLearningByDisagreement(pref_model=pb)(cand)
    assert torch.isfinite(bald).all() and (bald >= -1e-6).all()
    mes = qMaxValueEntropy(pb, candidate_set=torch.rand(100, 2, **tkwargs64))
    val = mes(torch.rand(5, 1, 2, **tkwargs64))
    assert val.shape == (5,) and torch.isfinite(val).all()


def test_float32_agrees_with_float64():
    X, comp = make_pairwise_data(20, 40)[:2]
    m64 = PairwiseLaplaceGP(X, comp)
    m32 = PairwiseLaplaceGP(X.float(), comp)
    Xt = torch.rand(5, 2, dtype=torch.float64)
    p64, p32 = m64.posterior(Xt), m32.posterior(Xt.float())
    assert p32.mean.dtype == torch.float32
    torch.testing.assert_close(p32.mean.double(), p64.mean, rtol=0, atol=2e-3)
    torch.testing.assert_close(p32.variance.double(), p64.variance, rtol=0, atol=2e-3)


@pytest.mark.parametrize(
    "datapoints, comparisons, error, match",
    [
        (
            "x",
            torch.tensor([[0, 1]]),
            InputTypeError,
            "datapoints must be a torch.Tensor",
        ),
        (
            torch.rand(3, 2).long(),
            torch.tensor([[0, 1]]),
            InputTypeError,
            "floating tensor",
        ),
        (
            torch.tensor([[0.0, float("nan")], [1, 1]]),
            torch.tensor([[0, 1]]),
            InputDataError,
            "datapoints must be finite; got nan at index \\(0, 1\\)",
        ),
        (
            torch.rand(0, 2),
            torch.tensor([[0, 1]]),
            InputDataError,
            "at least one design",
        ),
        (
            torch.rand(3, 2),
            torch.tensor([[0, 3]]),
            InputDataError,
            r"indices into datapoints in \[0, 2\] \(n=3\); got min 0, max 3",
        ),
        (torch.rand(3, 2), torch.tensor([[0, -1]]), InputDataError, "got min -1"),
        (
            torch.rand(3, 2),
            torch.tensor([[0.0, 1.5]]),
            InputDataError,
            "non-integer value 1.5",
        ),
        (
            torch.rand(3, 2),
            torch.tensor([[0, 1, 2]]),
            InputDataError,
            r"shape batch_shape x m x 2 \(rows \[winner, loser\]\); got \(1, 3\)",
        ),
        (
            torch.rand(3, 2),
            torch.zeros(0, 2, dtype=torch.long),
            InputDataError,
            "at least one comparison",
        ),
        (
            torch.rand(3, 2),
            torch.tensor([[0, 1], [2, 2]]),
            InputDataError,
            r"row \(1,\) compares design 2 with itself",
        ),
        (
            torch.rand(2, 3, 2),
            torch.tensor([[0, 1]]).expand(3, 1, 2),
            InputDataError,
            "broadcastable batch shapes",
        ),
        (
            torch.rand(3, 2),
            torch.tensor([[True, False]]),
            InputTypeError,
            "integer tensor",
        ),
        (torch.rand(3, 2), None, InputDataError, "both be tensors"),
    ],
)
def test_bad_input_raises_typed_errors(datapoints, comparisons, error, match):
    if isinstance(datapoints, torch.Tensor) and datapoints.is_floating_point():
        datapoints = datapoints.double()
    with pytest.raises(error, match=match):
        PairwiseLaplaceGP(datapoints, comparisons)


@pytest.mark.parametrize(
    "options, error, match",
    [
        (
            {"max_iter": 0},
            InputDataError,
            r"max_iter must be an int >= 1; got max_iter=0",
        ),
        (
            {"max_iter": 2.5},
            InputTypeError,
            r"max_iter must be an int >= 1; got float 2\.5",
        ),
        (
            {"maxfev": True},
            InputTypeError,
            r"maxfev must be an int >= 1; got bool True",
        ),
        (
            {"tol": -1e-3},
            InputDataError,
            r"tol must be None or a finite float >= 0; got tol=-0\.001",
        ),
        (
            {"xtol": float("nan")},
            InputDataError,
            r"xtol must be None or a finite float >= 0",
        ),
        (
            {"fit_tol": -1.0},
            InputDataError,
            r"fit_tol must be None or a finite float >= 0",
        ),
        (
            {"nugget": -1e-8},
            InputDataError,
            r"nugget must be None or a finite float >= 0",
        ),
        (
            {"jitter": float("inf")},
            InputDataError,
            r"jitter must be None or a finite float >= 0",
        ),
        (
            {"consolidate_atol": None},
            InputTypeError,
            r"consolidate_atol must be a finite float >= 0; got None",
        ),
    ],
)
def test_bad_newton_and_numerical_options_are_named(options, error, match):
    X = torch.rand(3, 2, dtype=torch.float64)
    with pytest.raises(error, match=match):
        PairwiseLaplaceGP(X, torch.tensor([[0, 1], [1, 2]]), **options)


def test_a_zero_fit_tolerance_is_used_not_replaced_by_the_default(monkeypatch):
    import prefbo.inference.evidence as inference

    tols = []
    real = inference.find_mode

    def recording(*args, **kwargs):
        tols.append(kwargs.get("tol"))
        return real(*args, **kwargs)

    monkeypatch.setattr(inference, "find_mode", recording)
    X = torch.rand(
        6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    comps = torch.tensor([[0, 1], [1, 2], [3, 2], [4, 5], [5, 0]])
    for fit_tol, expected in ((0.0, 0.0), (None, 1e-6), (1e-3, 1e-3)):
        model = PairwiseLaplaceGP(X, comps, fit_tol=fit_tol).train()
        model(*model.train_inputs)
        assert tols[-1] == expected


def test_warm_start_from_the_mode_of_fewer_designs():
    # the loop's models: designs appended, the mode of the first ones a start
    X0, comp0, _ = make_pairwise_data(38, 76, seed=5)
    X = torch.cat([X0, torch.tensor([[0.1, 0.9], [0.8, 0.3]], dtype=torch.float64)])
    comp = torch.cat([comp0, torch.tensor([[38, 39]])])  # one new answer
    first = PairwiseLaplaceGP(X0, comp0)
    assert first.last_mode is None  # nothing computed yet
    first.posterior(X[:2])
    mode = first.last_mode
    torch.testing.assert_close(mode, first.laplace_state.mode)
    same = PairwiseLaplaceGP(X0, comp0)
    same.warm_start(mode)  # at the mode already: one Newton step confirms it
    assert same.laplace_state.iterations == 1 < first.laplace_state.iterations
    cold = PairwiseLaplaceGP(X, comp)
    warm = PairwiseLaplaceGP(X, comp)
    warm.warm_start(mode)
    torch.testing.assert_close(warm.laplace_state.mode, cold.laplace_state.mode)
    Xt = torch.rand(5, 2, dtype=torch.float64)
    pc, pw = cold.posterior(Xt), warm.posterior(Xt)
    torch.testing.assert_close(pw.mean, pc.mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(
        pw.covariance_matrix, pc.covariance_matrix, rtol=0, atol=1e-8
    )
    # a fit's evidence starts there too, and reaches the same value
    fits = []
    for model in (PairwiseLaplaceGP(X, comp), PairwiseLaplaceGP(X, comp)):
        if fits:
            model.warm_start(first.laplace_state)  # a state is accepted as well
        model.train()
        mll = PairwiseLaplaceMLL(model.likelihood, model)
        out = model(*model.train_inputs)
        fits.append(mll(out, model.train_targets).detach())
    # (to the fit's Newton tolerance, fit_tol = 1e-6: first order in the evidence)
    torch.testing.assert_close(fits[1], fits[0], rtol=1e-6, atol=0)
    # the previous model itself: its latest mode, the same start
    from_model, from_mode = PairwiseLaplaceGP(X, comp), PairwiseLaplaceGP(X, comp)
    from_model.warm_start(first)
    from_mode.warm_start(mode)
    assert torch.equal(from_model.last_mode, from_mode.last_mode)
    untouched = PairwiseLaplaceGP(X, comp)
    untouched.warm_start(PairwiseLaplaceGP(X0, comp0))  # no mode yet: no start
    assert untouched.last_mode is None
    with pytest.raises(InputDataError, match="at most n=40 entries"):
        warm.warm_start(torch.zeros(41, dtype=torch.float64))
    with pytest.raises(InputDataError, match="batch_shape x n0 tensor"):
        warm.warm_start([0.0])
    with pytest.raises(InputDataError, match=r"batch_shape \(\)"):
        warm.warm_start(torch.zeros(3, 30, dtype=torch.float64))
    with pytest.raises(InputDataError, match="needs training data"):
        prior_only = PairwiseLaplaceGP(None, None, covar_module=RBFKernel())
        prior_only.warm_start(mode)
