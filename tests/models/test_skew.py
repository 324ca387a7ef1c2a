import math
import time

import pytest
import torch
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from gpytorch.kernels import RBFKernel, ScaleKernel
from scipy import integrate, special

import prefbo.models.skew as skew_module
from prefbo import PairwiseEPGP, SkewGP
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.sampling import GibbsSampler, InfeasibleConstraintsError, LinESS
from prefbo.utils.testing import make_pairwise_data

X2 = torch.tensor([[0.0], [1.0]], dtype=torch.float64)


def _independent_kernel(outputscale=0.5):
    k = ScaleKernel(RBFKernel()).double()
    k.outputscale, k.base_kernel.lengthscale = outputscale, 1e-3
    return k


@pytest.mark.parametrize("sigma", [1.0, 0.1, 0.01])
def test_one_answer_matches_the_exact_skew_normal(sigma):
    """Prior Var(Δ) = 1, one answer: mean, sd and P(Δ < 0) by closed form and
    quadrature; a few thousand draws are within 0.03."""
    model = SkewGP(
        X2,
        torch.tensor([[1, 0]]),
        covar_module=_independent_kernel(),
        noise_std=sigma,
        num_samples=4096,
        seed=0,
    )
    post = model.posterior(X2)
    d = post.locations[:, 1] - post.locations[:, 0]
    R = post.residual_covariance
    r = R[0, 0] + R[1, 1] - 2 * R[0, 1]
    s2 = 2 * sigma**2
    exact_mean = math.sqrt(2 / math.pi) / math.sqrt(1 + s2)
    s = math.sqrt(s2)
    exact_p = (
        integrate.quad(
            lambda x: math.exp(-0.5 * x * x + special.log_ndtr(x / s)), -40, 0
        )[0]
        / math.sqrt(2 * math.pi)
        / 0.5
    )
    assert d.mean().item() == pytest.approx(exact_mean, abs=0.03)
    assert math.sqrt(d.var().item() + r.item()) == pytest.approx(
        math.sqrt(1 - exact_mean**2), abs=0.03
    )
    p_neg = torch.special.ndtr(-d / r.sqrt()).mean().item()
    assert p_neg == pytest.approx(exact_p, abs=0.03)


def test_moments_converge_as_samples_grow():
    """Seed-to-seed spread of the estimated mean shrinks with the number of draws,
    and the estimate is close to the exact value."""
    exact = math.sqrt(2 / math.pi) / math.sqrt(1 + 2 * 0.09)
    spread, error = {}, {}
    for s in (128, 4096):
        means = []
        for seed in range(4):
            model = SkewGP(
                X2,
                torch.tensor([[1, 0]]),
                covar_module=_independent_kernel(),
                noise_std=0.3,
                num_samples=s,
                seed=seed,
                num_chains=16,
            )
            loc = model.posterior(X2).locations
            means.append((loc[:, 1] - loc[:, 0]).mean().item())
        means = torch.tensor(means)
        spread[s], error[s] = means.std().item(), abs(means.mean().item() - exact)
    assert spread[4096] < spread[128]
    assert error[4096] < 0.02


@pytest.mark.parametrize("noise", ["none", "jnd", "shared"])
def test_hard_constraint_samples_satisfy_every_constraint(noise):
    X, comp, _ = make_pairwise_data(8, 10, seed=2, noise_std=1e-6)
    extra = {"jnd_threshold": 0.1} if noise == "jnd" else {}
    if noise == "jnd":
        extra["indiscernible"] = torch.tensor([[0, 1]])
    model = SkewGP(X, comp, noise=noise, num_samples=512, seed=0, **extra)
    n = X.shape[0]
    f = model.latent_samples[:, :n]
    diff = f[:, comp[:, 0]] - f[:, comp[:, 1]]
    if noise == "none":
        assert (diff > 0).all()
    elif noise == "jnd":
        assert (diff > 0.1 - 1e-9).all()
        assert ((f[:, 0] - f[:, 1]).abs() <= 0.1 + 1e-9).all()
    else:
        v = model.latent_samples[:, n:]
        assert (diff + v[:, comp[:, 0]] - v[:, comp[:, 1]] > 0).all()
    # predictions at the designs reproduce the sampled utilities
    loc = model.posterior(X).locations
    torch.testing.assert_close(loc, f, rtol=0, atol=1e-3)


def test_cycle_under_consistent_preferences_is_infeasible():
    X = torch.rand(3, 2, dtype=torch.float64)
    with pytest.raises(InfeasibleConstraintsError, match="cycle 0 ≻ 1 ≻ 2 ≻ 0"):
        SkewGP(X, torch.tensor([[0, 1], [1, 2], [2, 0]]), noise="none")


def test_mc_acquisitions_run_on_the_sample_posterior():
    X, comp, _ = make_pairwise_data(15, 25, seed=3)
    model = SkewGP(X, comp, num_samples=1024, seed=0)
    cand = torch.rand(4, 2, 2, dtype=torch.float64)
    q = qExpectedUtilityOfBestOption(pref_model=model)(cand)
    eubo = AnalyticExpectedUtilityOfBestOption(pref_model=model)(cand)
    assert q.shape == (4,) and torch.isfinite(q).all()
    # the skew posterior is not Gaussian, but the two agree roughly
    torch.testing.assert_close(q, eubo, rtol=0.1, atol=0.1)
    samples = model.posterior(cand).rsample(torch.Size([7]))
    assert samples.shape == (7, 4, 2, 1)


def test_fit_hyperparameters_by_ep_and_predict_preference():
    X, comp, u = make_pairwise_data(20, 60, seed=4)
    model = SkewGP(X, comp, num_samples=512, seed=0)
    model.fit_hyperparameters("ep")
    ep = PairwiseEPGP(X, comp, covar_module=model.covar_module)
    X1, X2_ = torch.rand(2, 5, 2, dtype=torch.float64).unbind(0)
    p_skew = model.predict_preference(X1.unsqueeze(-2), X2_.unsqueeze(-2))
    p_ep = ep.predict_preference(X1.unsqueeze(-2), X2_.unsqueeze(-2))
    torch.testing.assert_close(p_skew, p_ep.detach(), rtol=0, atol=0.08)


def test_skew_gp_errors():
    X = torch.rand(4, 2, dtype=torch.float64)
    comp = torch.tensor([[0, 1]])
    with pytest.raises(InputDataError, match="noise must be one of"):
        SkewGP(X, comp, noise="gaussian")
    with pytest.raises(InputDataError, match="needs jnd_threshold > 0"):
        SkewGP(X, comp, noise="jnd")
    with pytest.raises(InputDataError, match="apply to noise='jnd' only"):
        SkewGP(X, comp, jnd_threshold=0.1)
    with pytest.raises(UnsupportedError, match="unbatched data"):
        SkewGP(X.expand(2, 4, 2), comp.expand(2, 1, 2))


@pytest.mark.parametrize("sampler", ["gibbs", "lin_ess"])
def test_exactly_num_samples_draws_are_stored(sampler):
    """num_samples is exact, not rounded up to whole chains."""
    X = torch.rand(5, 1, dtype=torch.float64)
    comp = torch.tensor([[0, 1], [2, 3]])
    model = SkewGP(X, comp, num_samples=20, num_chains=16, sampler=sampler, seed=0)
    assert model.weights.shape == (20, 5) and model.latent_samples.shape[0] == 20
    model.resample(num_samples=7)
    assert model.weights.shape == (7, 5) and model.num_samples == 7


_X5 = torch.rand(5, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
_C5 = torch.tensor([[0, 1], [2, 3]])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"num_samples": 0},
            InputDataError,
            r"num_samples must be an int >= 1; got "
            r"num_samples=0\.",
        ),
        (
            {"num_samples": 2.7},
            InputTypeError,
            r"num_samples must be an int >= 1; got float 2\.7\.",
        ),
        (
            {"num_samples": True},
            InputTypeError,
            r"num_samples must be an int >= 1; got bool True\.",
        ),
        (
            {"num_chains": 0},
            InputDataError,
            r"num_chains must be an int >= 1; got num_chains=0\.",
        ),
        (
            {"num_chains": 4.0},
            InputTypeError,
            r"num_chains must be an int >= 1; got float 4\.0\.",
        ),
        (
            {"burnin": -5},
            InputDataError,
            r"burnin must be an int >= 0; got burnin=-5\.",
        ),
        (
            {"burnin": 1.5},
            InputTypeError,
            r"burnin must be an int >= 0; got float 1\.5\.",
        ),
        (
            {"thinning": 1.5},
            InputTypeError,
            r"thinning must be an int >= 0; got float 1\.5\.",
        ),
        (
            {"thinning": -1},
            InputDataError,
            r"thinning must be an int >= 0; got thinning=-1\.",
        ),
        ({"seed": "a"}, InputTypeError, r"seed must be None or an int; got str 'a'\."),
        (
            {"seed": 1.5},
            InputTypeError,
            r"seed must be None or an int; got float 1\.5\.",
        ),
        (
            {"seed": False},
            InputTypeError,
            r"seed must be None or an int; got bool False\.",
        ),
        (
            {"nugget": -1.0},
            InputDataError,
            r"nugget must be a finite float >= 0; got nugget=-1\.0\.",
        ),
        (
            {"nugget": math.inf},
            InputDataError,
            r"nugget must be a finite float >= 0; got nugget=inf\.",
        ),
        (
            {"nugget": math.nan},
            InputDataError,
            r"nugget must be a finite float >= 0; got nugget=nan\.",
        ),
        (
            {"nugget": "a"},
            InputTypeError,
            r"nugget must be a finite float >= 0; got str 'a'\.",
        ),
    ],
)
def test_sampler_arguments_are_checked(kwargs, error, message):
    noise = "none" if "nugget" in kwargs else "probit"
    with pytest.raises(error, match=message):
        SkewGP(_X5, _C5, noise=noise, **({"num_samples": 16} | kwargs))


def test_resample_arguments_are_checked():
    model = SkewGP(_X5, _C5, num_samples=16, seed=0)
    with pytest.raises(
        InputDataError, match=r"num_samples must be an int >= 1; got num_samples=0\."
    ):
        model.resample(num_samples=0)
    with pytest.raises(
        InputTypeError, match=r"num_samples must be an int >= 1; got float 2\.5"
    ):
        model.resample(num_samples=2.5)
    with pytest.raises(
        InputTypeError, match=r"seed must be None or an int; got str 'a'"
    ):
        model.resample(seed="a")
    with pytest.raises(InputTypeError, match=r"seed must be None or an int; got float"):
        model.resample(num_samples=8, seed=0.5)
    assert model.num_samples == 16 and model._sampler_options["seed"] == 0


@pytest.mark.parametrize(
    "delta, error, message",
    [
        (math.inf, InputDataError, r"> 0; got jnd_threshold=inf\."),
        (math.nan, InputDataError, r"> 0; got jnd_threshold=nan\."),
        (0.0, InputDataError, r"> 0; got jnd_threshold=0\.0\."),
        (-0.1, InputDataError, r"> 0; got jnd_threshold=-0\.1\."),
        ("a", InputTypeError, r"jnd_threshold must be a finite float > 0; got str"),
    ],
)
def test_jnd_threshold_is_checked(delta, error, message):
    with pytest.raises(error, match=message):
        SkewGP(_X5, _C5, noise="jnd", jnd_threshold=delta, num_samples=16)


def _recording(monkeypatch, cls):
    """Patch the skew module's sampler class to keep the instances it makes."""
    made = []

    class Recording(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(skew_module, cls.__name__, Recording)
    return made


@pytest.mark.parametrize("sampler", ["gibbs", "lin_ess"])
def test_jnd_bounds_are_exact_in_the_model_dtype(monkeypatch, sampler):
    """The float64 right-hand side is -δ / δ exactly (not a float32 rounding)."""
    made = _recording(monkeypatch, GibbsSampler if sampler == "gibbs" else LinESS)
    delta = 0.3  # not a float32 number
    ind = torch.tensor([[1, 2], [3, 4]])
    SkewGP(
        _X5,
        _C5,
        noise="jnd",
        jnd_threshold=delta,
        indiscernible=ind,
        sampler=sampler,
        num_samples=16,
        seed=0,
    )
    (s,) = made
    expected = torch.tensor([-delta] * 2 + [delta] * 4, dtype=torch.float64)
    assert s.b.dtype == torch.float64 and torch.equal(s.b, expected)


@pytest.mark.parametrize("noise", ["none", "jnd", "shared"])
def test_hard_constraint_models_build_on_the_data_device_and_dtype(
    monkeypatch, tkwargs, noise
):
    """Constraints, covariance root and stored draws live on the designs' device
    and dtype (the suite runs this on CUDA when one is present)."""
    made = _recording(monkeypatch, GibbsSampler)
    X, comp, _ = make_pairwise_data(6, 5, seed=1, noise_std=1e-6, **tkwargs)
    extra = {"jnd_threshold": 0.05} if noise == "jnd" else {}
    kernel = ScaleKernel(RBFKernel()).to(**tkwargs)
    model = SkewGP(
        X, comp, kernel, noise=noise, noise_std=0.5, num_samples=32, seed=0, **extra
    )
    (s,) = made
    for t in (s.A, s.b, s.covariance_root, model.weights, model.Q):
        assert t.device == X.device and t.dtype == X.dtype
    if noise == "shared":  # root = blockdiag(L, σ I)
        torch.testing.assert_close(
            s.covariance_root[6:, 6:], 0.5 * torch.eye(6, **tkwargs), rtol=0, atol=0
        )
    post = model.posterior(X[:3])
    assert post.locations.device == X.device


def test_nan_test_points_are_an_error_not_nan():
    X, comp, _ = make_pairwise_data(6, 8)
    model = SkewGP(X, comp, num_samples=16, burnin=2, seed=0)
    Xt = torch.rand(3, 2, dtype=torch.float64)
    Xt[1, 0] = float("nan")
    with pytest.raises(InputDataError, match=r"X must be finite.*row \(1,\)"):
        model.posterior(Xt)


def test_half_precision_designs_are_a_typed_error():
    X, comp, _ = make_pairwise_data(6, 8)
    with pytest.raises(InputTypeError, match="float32 or float64.*torch.float16"):
        SkewGP(X.half(), comp, num_samples=16, burnin=2, seed=0)


def test_size_guard_names_ep_instead_of_running_for_minutes():
    """10,000 answers about 2 designs: a 10,000-dimensional orthant to sample
    (about 2.8 GB by resample_memory_bytes); refused at once, naming EP."""
    comps = torch.tensor([[1, 0]]).repeat(10_000, 1)
    start = time.perf_counter()
    with pytest.raises(
        UnsupportedError, match=r"10000.*GB.*PairwiseEPGP.*max_dimension"
    ):
        SkewGP(X2, comps)
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize(("noise", "p"), [("probit", 30), ("none", 12), ("shared", 24)])
def test_size_guard_counts_the_sampled_dimension_and_can_be_lifted(noise, p):
    X, comp, u = make_pairwise_data(12, 30)
    if noise != "probit":  # consistent answers (repeated pairs each way)
        comp = torch.where(
            (u[comp[:, 0]] > u[comp[:, 1]])[:, None], comp, comp.flip(-1)
        )
    kw = dict(noise=noise, num_samples=8, burnin=1, seed=0)
    with pytest.raises(UnsupportedError, match=f"{p}-dimensional"):
        SkewGP(X, comp, max_dimension=p - 1, **kw)
    SkewGP(X, comp, max_dimension=p, **kw)
    SkewGP(X, comp, max_dimension=None, **kw)
    with pytest.raises(InputDataError, match="max_dimension"):
        SkewGP(X, comp, max_dimension=0, **kw)


@pytest.mark.parametrize("sampler", ["gibbs", "lin_ess"])
def test_progress_callback_counts_transitions_and_changes_no_draw(sampler):
    X, comp, _ = make_pairwise_data(8, 12)
    calls: list[tuple[int, int]] = []
    kw = dict(num_samples=20, num_chains=4, burnin=6, thinning=1, seed=0)
    model = SkewGP(X, comp, sampler=sampler, progress=lambda *a: calls.append(a), **kw)
    plain = SkewGP(X, comp, sampler=sampler, progress=False, **kw)
    assert torch.equal(model.latent_samples, plain.latent_samples)
    total = 6 + 5 * 2  # burn-in + ceil(20 / 4) kept draws x (thinning + 1)
    assert calls[-1] == (total, total)
    assert [c[1] for c in calls] == [total] * len(calls)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)


def test_progress_true_shows_a_bar(capsys):
    X, comp, _ = make_pairwise_data(8, 12)
    SkewGP(X, comp, num_samples=8, burnin=2, seed=0, progress=True)
    assert "SkewGP" in capsys.readouterr().err
    with pytest.raises(InputTypeError, match="progress"):
        SkewGP(X, comp, num_samples=8, burnin=2, seed=0, progress="yes")


def test_designs_off_the_unit_cube_warn_with_the_default_kernel_only():
    # BoTorch's default priors assume [0, 1]^d, as for the pairwise GPs
    from botorch.exceptions import InputDataWarning
    from botorch.models.transforms.input import Normalize

    X, comp, _ = make_pairwise_data(6, 8, d=2, seed=0)
    with pytest.warns(InputDataWarning, match=r"Normalize\(d=2"):
        SkewGP(10 * X, comp)
    bounds = torch.tensor([[0.0, 0.0], [10.0, 10.0]], dtype=torch.float64)
    SkewGP(10 * X, comp, input_transform=Normalize(d=2, bounds=bounds))
    SkewGP(10 * X, comp, covar_module=ScaleKernel(RBFKernel()))
    SkewGP(X, comp)
