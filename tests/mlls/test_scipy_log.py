import math
import re
import warnings

import pytest
import torch
from botorch.exceptions.errors import ModelFittingError
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP
from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood
from botorch.optim.closures import get_loss_closure_with_grads
from botorch.optim.fit import fit_gpytorch_mll_scipy
from gpytorch.kernels import MaternKernel, PeriodicKernel, RBFKernel, ScaleKernel

import prefbo.mlls.scipy_log as scipy_log
from prefbo import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.exceptions import InputTypeError, NumericalError
from prefbo.fit import fit_mll_scipy
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.utils.testing import make_pairwise_data, random_answers

LS = "model.covar_module.base_kernel.raw_lengthscale"
OS = "model.covar_module.raw_outputscale"


def _data(n=40, m=120, d=3, seed=0, batch=()):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(*batch, n, d, generator=g, dtype=torch.float64)
    u = torch.sin(3 * X).sum(-1) - 2 * (X - 0.5).pow(2).sum(-1)
    pairs = torch.stack([torch.randperm(n, generator=g)[:2] for _ in range(m)]).expand(
        *batch, m, 2
    )
    uw = u.gather(-1, pairs[..., 0])
    ul = u.gather(-1, pairs[..., 1])
    p = torch.special.ndtr((uw - ul) / math.sqrt(2))
    first = torch.rand(p.shape, generator=g, dtype=torch.float64) < p
    return X, torch.where(first.unsqueeze(-1), pairs, pairs.flip(-1))


def _mll(model_cls=PairwiseLaplaceGP, mll_cls=PairwiseLaplaceMLL, **kw):
    model = model_cls(*_data(**kw))
    return mll_cls(model.likelihood, model)


def _loss_and_grads(mll):
    mll.train()
    params = dict(mll.named_parameters())
    for p in params.values():
        p.grad = None
    model = mll.model
    loss = -mll(model(*model.train_inputs), model.train_targets).sum()
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in params.items()}


@pytest.mark.parametrize(
    "model_cls, mll_cls",
    [(PairwiseLaplaceGP, PairwiseLaplaceMLL), (PairwiseEPGP, PairwiseEPMLL)],
)
def test_same_optimum_as_botorchs_raw_coordinates(model_cls, mll_cls):
    ours, ref = _mll(model_cls, mll_cls), _mll(model_cls, mll_cls)
    tight = {"ftol": 1e-13, "gtol": 1e-9}
    ours.train()
    ref.train()
    a = fit_mll_scipy(ours, options=tight)
    b = fit_gpytorch_mll_scipy(ref, options=tight)
    assert a.fval == pytest.approx(b.fval, rel=1e-9, abs=1e-9)
    for name, p in ours.named_parameters():
        q = dict(ref.named_parameters())[name]
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)


def test_log_coordinate_gradient_matches_finite_differences():
    mll = _mll()
    mll.train()
    params = dict(mll.named_parameters())
    shift = torch.tensor(1e-4, dtype=torch.float64).expand(params[LS].shape)
    coords = {LS: (params[LS].detach() - shift).log(), OS: params[OS]}
    closure = get_loss_closure_with_grads(mll, parameters=params)
    log_closure, write_back = scipy_log._log_coordinate_closure(
        closure, params, coords, {LS: shift}
    )
    _, (_, g_ls) = log_closure()
    base, eps = coords[LS].clone(), 1e-5
    for k in range(g_ls.numel()):
        vals = []
        for sign in (1, -1):
            coords[LS] = base.clone()
            coords[LS].view(-1)[k] += sign * eps
            vals.append(log_closure()[0].item())
        fd = (vals[0] - vals[1]) / (2 * eps)
        assert g_ls.view(-1)[k].item() == pytest.approx(fd, rel=1e-5, abs=1e-7)
    coords[LS] = base
    write_back()
    torch.testing.assert_close(params[LS].detach(), coords[LS].exp() + shift)


def test_fitted_point_is_stationary_in_the_raw_parameters():
    mll = _mll()
    _, g0 = _loss_and_grads(mll)
    mll.train()
    fit_mll_scipy(mll)
    _, grads = _loss_and_grads(mll)
    for name in (LS, OS):
        assert grads[name].abs().max() < 1e-3 * g0[name].abs().max()


def test_fit_gpytorch_mll_routes_through_custom_fit(monkeypatch):
    calls = []

    def spy(mll, **kwargs):
        calls.append(kwargs)
        return fit_mll_scipy(mll, **kwargs)

    monkeypatch.setattr(scipy_log, "fit_mll_scipy", spy)
    mll = _mll()
    out = fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": 50}})
    assert out is mll and not mll.training
    assert len(calls) == 1
    assert calls[0]["closure"] is None and calls[0]["options"] == {"maxiter": 50}
    assert set(calls[0]["bounds"]) == {OS}  # the box prior's, by default
    # the fit moved the lengthscales away from the prior mode
    assert not torch.allclose(
        mll.model.covar_module.base_kernel.lengthscale,
        PairwiseLaplaceGP(*_data()).covar_module.base_kernel.lengthscale,
    )


def test_an_explicit_optimizer_replaces_it(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("fit_mll_scipy must not run")

    monkeypatch.setattr(scipy_log, "fit_mll_scipy", fail)
    used = []

    def botorch_raw(mll, **kwargs):
        used.append(True)
        return fit_gpytorch_mll_scipy(mll, **kwargs)

    mll = _mll()
    fit_gpytorch_mll(mll, optimizer=botorch_raw)
    assert used == [True]


def test_upper_bounded_parameter_keeps_raw_coordinates_and_its_bound():
    mll = _mll()
    mll.train()
    fit_mll_scipy(mll, bounds={LS: (None, 0.3)})
    ls = mll.model.covar_module.base_kernel.lengthscale
    assert (ls <= 0.3 + 1e-12).all()
    assert (ls >= 1e-4).all()


def test_parameter_at_its_lower_bound_is_not_sent_to_minus_infinity():
    mll = _mll()
    with torch.no_grad():
        mll.model.covar_module.base_kernel.raw_lengthscale[..., 0] = 1e-4
    raw = mll.model.covar_module.base_kernel.raw_lengthscale
    bound = (torch.tensor(1e-4, dtype=torch.float64), None)
    assert scipy_log._log_shift(raw, bound) is None
    mll.train()
    res = fit_mll_scipy(mll)
    assert math.isfinite(res.fval)
    assert torch.isfinite(raw).all() and (raw >= 1e-4).all()


def test_callback_sees_the_models_parameters():
    mll = _mll()
    mll.train()
    seen = []

    def callback(parameters, result):
        seen.append((set(parameters), parameters[LS].detach().clone(), result.fval))

    fit_mll_scipy(mll, callback=callback, options={"maxiter": 5})
    assert seen and all(names == {LS, OS} for names, _, _ in seen)
    # the values passed are lengthscales (near 0.1-3), not their logarithms
    assert all((ls > 0).all() for _, ls, _ in seen)
    loss, _ = _loss_and_grads(mll)
    assert seen[-1][2] == pytest.approx(loss, rel=1e-8)


def test_batched_model_fits_each_element_like_a_separate_fit():
    opts = {"options": {"ftol": 1e-13, "gtol": 1e-9}}
    X, comps = _data(n=25, m=60, batch=(2,))
    X[1] = X[1].flip(0)  # a different data set in the second element
    model = PairwiseLaplaceGP(X, comps)
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    fit_gpytorch_mll(mll, optimizer_kwargs=opts)
    for b in range(2):
        single = PairwiseLaplaceGP(X[b], comps[b])
        fit_gpytorch_mll(
            PairwiseLaplaceMLL(single.likelihood, single), optimizer_kwargs=opts
        )
        torch.testing.assert_close(
            model.covar_module.base_kernel.lengthscale[b],
            single.covar_module.base_kernel.lengthscale,
            rtol=1e-3,
            atol=1e-5,
        )


def test_rejects_what_is_not_an_mll():
    with pytest.raises(InputTypeError, match="mll must be"):
        fit_mll_scipy(torch.nn.Linear(2, 2))


def test_default_fit_bounds_the_outputscale_to_its_box_and_user_bounds_win(
    separable_data,
):
    # the evidence keeps rising with the outputscale, past the box prior's
    # edge at 100 unless bounded
    X, comps = separable_data
    model = PairwiseLaplaceGP(X, comps)
    fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    assert model.covar_module.outputscale.item() == pytest.approx(100.0, rel=1e-9)
    model = PairwiseLaplaceGP(X, comps)
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    constraint = model.covar_module.raw_outputscale_constraint
    cap = constraint.inverse_transform(torch.tensor(20.0, dtype=torch.float64))
    fit_gpytorch_mll(mll, optimizer_kwargs={"bounds": {OS: (None, cap)}})
    assert model.covar_module.outputscale.item() == pytest.approx(20.0, rel=1e-9)


def test_a_failed_evaluation_backs_off_instead_of_ending_the_fit(separable_data):
    # separable answers and no prior: the evidence keeps rising with the
    # outputscale, and the line search tries ever larger ones; past 1e3 the
    # prior covariance overflows (a stand-in for a kernel's overflow at
    # extreme hyperparameters)
    X, C = separable_data
    kernel = ScaleKernel(RBFKernel(ard_num_dims=2)).to(X)
    model = PairwiseLaplaceGP(X, C, covar_module=kernel)
    prior_covariance = model._prior_covariance

    def overflowing(Z):
        K = prior_covariance(Z)
        if float(model.covar_module.outputscale.detach()) > 1e3:
            K = K * float("inf")
        return K

    model._prior_covariance = overflowing
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    fit_gpytorch_mll(mll)  # NumericalError ("non-finite entries") before
    assert 10.0 < float(model.covar_module.outputscale.detach()) <= 1e3
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_backing_off_returns_a_loss_above_every_finite_one_and_no_gradient():
    param = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    outcomes = iter([1.5, -3.0, "error", float("nan"), 0.5])

    def closure():
        out = next(outcomes)
        if out == "error":
            raise NumericalError("prior covariance K has non-finite entries")
        return torch.tensor(out, dtype=torch.float64), (torch.ones(2),)

    guarded = scipy_log.backing_off(closure, {"p": param})
    assert float(guarded()[0]) == 1.5
    assert float(guarded()[0]) == -3.0
    for _ in range(2):  # the error, then the NaN: 1.5 + 1 + 1.5
        value, grads = guarded()
        assert float(value) == 4.0 and torch.equal(grads[0], torch.zeros(2))
    assert float(guarded()[0]) == 0.5
    # nothing to back off to: the first evaluation's error stands
    with pytest.raises(NumericalError, match="non-finite"):
        outcomes = iter(["error"])
        scipy_log.backing_off(closure, {"p": param})()


def test_prefbo_fits_a_prior_free_periodic_kernel():
    # a prior-free periodic kernel: the line search tries a period near 0,
    # where K is not positive definite even with jitter; that ended the fit.
    # (BoTorch's PairwiseGP fits these data too, but near the same edge: on
    # a loaded machine its fit ended in NotPSDError after its five tries.)
    X, C, _ = make_pairwise_data(12, 60, d=2, seed=4, noise_std=0.1)
    model = PairwiseLaplaceGP(X, C, covar_module=ScaleKernel(PeriodicKernel()).to(X))
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    fit_gpytorch_mll(mll)
    loss, _ = _loss_and_grads(mll)
    assert math.isfinite(loss)
    assert torch.isfinite(model.posterior(X).mean).all()


@pytest.mark.parametrize(
    "model_cls, mll_cls",
    [(PairwiseLaplaceGP, PairwiseLaplaceMLL), (PairwiseEPGP, PairwiseEPMLL)],
)
def test_float32_model_is_fitted_in_float64_and_keeps_its_dtype(model_cls, mll_cls):
    X, comp = _data()
    m32 = model_cls(X.float(), comp)
    m64 = model_cls(X, comp)
    fit_mll_scipy(mll_cls(m32.likelihood, m32))
    fit_mll_scipy(mll_cls(m64.likelihood, m64))
    # the float32 model's parameters stay float32, at the float64 fit's
    # optimum (the same optimiser path, rounded)
    for (name, p32), (_, p64) in zip(m32.named_parameters(), m64.named_parameters()):
        assert p32.dtype == torch.float32, name
        torch.testing.assert_close(p32, p64.float(), rtol=1e-5, atol=1e-6)
    assert m32.datapoints.dtype == torch.float32
    m32.train()
    with torch.no_grad():
        out = m32(*m32.train_inputs)
        assert torch.isfinite(mll_cls(m32.likelihood, m32)(out, m32.train_targets))


def test_float32_fit_with_its_own_closure_runs_on_the_model_itself():
    X, comp = _data()
    model = PairwiseLaplaceGP(X.float(), comp)
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    params = {n: p for n, p in mll.named_parameters() if p.requires_grad}
    closure = get_loss_closure_with_grads(mll, parameters=params)
    seen = []
    fit_mll_scipy(mll, closure=closure, callback=lambda p, r: seen.append(p))
    # the callback saw the model's own float32 parameters, not a copy's
    assert seen and all(p.dtype == torch.float32 for p in seen[0].values())
    assert seen[0][OS] is dict(mll.named_parameters())[OS]


@pytest.mark.parametrize(
    "model_cls, mll_cls",
    [(PairwiseLaplaceGP, PairwiseLaplaceMLL), (PairwiseEPGP, PairwiseEPMLL)],
)
def test_float32_model_whose_evidence_was_evaluated_fits(model_cls, mll_cls):
    # the evaluation leaves a float32 state to warm-start from; the float64
    # copy that is fitted carries it along, and the warm start must take it
    # in the copy's dtype (the Laplace mode's first-order prediction did not)
    X, comp = _data()
    model = model_cls(X.float(), comp)
    fresh = model_cls(X.float(), comp)
    model.train()
    mll = mll_cls(model.likelihood, model)
    with torch.no_grad():
        mll(model(*model.train_inputs), model.train_targets)
    fit_gpytorch_mll(mll)
    fit_gpytorch_mll(mll_cls(fresh.likelihood, fresh))
    for (name, p), (_, q) in zip(model.named_parameters(), fresh.named_parameters()):
        assert p.dtype == torch.float32, name
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_a_fit_failing_on_a_collapsed_period_says_where_it_ended():
    # an outside trial's data (seed 45: 8 designs in [0, 1]^3, 97 random
    # answers) under a prior-free Matérn-1/2 x periodic kernel: the period runs
    # to 1e-13, where the kernel changes faster than the designs are apart and
    # the evidence is not smooth (its gradient 1e12, finite differences of any
    # step unrelated to it): L-BFGS-B's line search fails (ABNORMAL). BoTorch's
    # PairwiseGP with the same kernel (an outputscale fixed at 1) fails on it
    # too; prefbo's error says where the attempts ended
    X, comp = random_answers(45)

    def kernel():
        return (MaternKernel(nu=0.5) * PeriodicKernel()).double()

    scaled = ScaleKernel(kernel()).double()
    scaled.raw_outputscale.requires_grad_(False)
    scaled.outputscale = 1.0
    reference = PairwiseGP(X, comp, covar_module=scaled)
    with pytest.raises(ModelFittingError), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # L-BFGS-B's ABNORMAL, jitter
        fit_gpytorch_mll(
            PairwiseLaplaceMarginalLogLikelihood(reference.likelihood, reference),
            max_attempts=1,
        )
    model = PairwiseLaplaceGP(X, comp, covar_module=kernel())
    with pytest.raises(ModelFittingError) as failed, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model), max_attempts=1)
    (note,) = failed.value.__notes__
    assert "ABNORMAL" in note and "give it a prior" in note
    period = re.search(r"kernels\.1\.period_length = (\S+);?", note).group(1)
    assert float(period.rstrip(";.")) < 1e-6
