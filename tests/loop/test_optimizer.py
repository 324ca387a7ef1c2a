import numpy as np
import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.kernels import default_preference_covar_module
from prefbo.loop.fitted import FittedModels
from prefbo.loop.model_kinds import LAPLACE_OUTPUTSCALE_BOUNDS
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.test_functions import Branin

SMALL = {"num_restarts": 2, "raw_samples": 32, "maxiter": 20, "mc_samples": 32}
BOUNDS = Branin().bounds


def test_choice_is_stored_as_winner_over_each_other_option():
    opt = PreferentialOptimizer(BOUNDS, strategy="random", q=3)
    X = opt.ask()
    opt.tell(1)
    designs, comps = opt.data()
    assert torch.equal(designs, X)
    assert comps.tolist() == [[1, 0], [1, 2]]
    assert opt.history[0].answer == 1 and torch.equal(opt.history[0].options, X)


def test_undo_asks_the_same_question_again(ask_and_tell):
    opt = PreferentialOptimizer(BOUNDS, strategy="eubo", acqf_options=SMALL)
    ask_and_tell(opt, [0, 1])
    X = opt.ask()
    opt.tell(0)
    withdrawn = opt.undo()
    assert torch.equal(withdrawn.options, X)
    assert len(opt.history) == 2
    assert torch.equal(opt.ask(), X)


def test_best_is_the_told_design_with_the_highest_posterior_mean(ask_and_tell):
    opt = PreferentialOptimizer(BOUNDS, strategy="random")
    ask_and_tell(opt, range(4), Branin())
    x, mean, sd = opt.best()
    designs, _ = opt.data()
    with torch.no_grad():
        post = opt.model.posterior(designs.unsqueeze(-2))
        means, var = post.mean.reshape(-1), post.variance.reshape(-1)
    i = int(means.argmax())
    assert torch.equal(x, designs[i])
    assert mean == pytest.approx(float(means.max()))
    assert sd == pytest.approx(float(var[i].sqrt()))
    assert sd > 0


def test_refit_every_keeps_hyperparameters_between_refits(ask_and_tell):
    opt = PreferentialOptimizer(BOUNDS, strategy="random", refit_every=2)
    ask_and_tell(opt, [0, 1])
    ls2 = opt.model.covar_module.base_kernel.lengthscale.detach().clone()
    ask_and_tell(opt, [0])
    ls3 = opt.model.covar_module.base_kernel.lengthscale.detach()
    assert torch.equal(ls2, ls3)
    assert opt.model.datapoints.shape[0] == 6


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        ({"model": "gp"}, InputDataError, r"model must be one of .*got 'gp'"),
        ({"strategy": "kg"}, InputDataError, r"strategy must be one of .*got 'kg'"),
        (
            {"strategy": "mes", "model": "skew"},
            UnsupportedError,
            "needs a Gaussian posterior",
        ),
        ({"q": 1}, InputDataError, r"q must be an int >= 2; got q=1"),
        (
            {"q": 3},
            UnsupportedError,
            r"strategy='eubo' asks pairs only \(q=2\); got q=3",
        ),
        (
            {"model": "skew", "strategy": "ts"},
            UnsupportedError,
            r"model='skew' does not",
        ),
        (
            {"refit_every": 0},
            InputDataError,
            r"refit_every must be an int >= 1; got refit_every=0",
        ),
        (
            {"refit_every": True},
            InputTypeError,
            r"refit_every must be an int >= 1; got bool True",
        ),
        ({"seed": 1.7}, InputTypeError, r"seed must be an int; got float 1\.7"),
        (
            {"seed": 2**64},
            InputDataError,
            rf"seed must be in \[-2\*\*63, 2\*\*64 - 1\] .*; got seed={2**64}\.",
        ),
        (
            {"q": True, "strategy": "qeubo"},
            InputTypeError,
            r"q must be an int >= 2; got bool True",
        ),
        # the first question comes before any answer: a model strategy needs one
        ({"initial_random": 0}, InputDataError, r"initial_random must be .*>= 1"),
        (
            {"acqf_options": {"num_restart": 7}},
            InputDataError,
            r"acqf_options has unknown key\(s\) \['num_restart'\]",
        ),
        (
            {"fit_options": {"maxfunn": 3}},
            InputDataError,
            r"fit_options has unknown key\(s\) \['maxfunn'\]",
        ),
        (
            {"model_options": {"bogus": 1}},
            InputDataError,
            r"model_options for model='ep' has unknown key\(s\) \['bogus'\]",
        ),
        (
            {"model": "variational", "model_options": {"inducing": 4}},
            InputDataError,
            r"model='variational' has unknown key\(s\) \['inducing'\]",
        ),
        ({"bounds": [[1.0], [0.0]]}, InputDataError, r"lower < upper"),
    ],
)
def test_bad_arguments_are_named(kwargs, err, match):
    kwargs = {"bounds": BOUNDS, **kwargs}
    with pytest.raises(err, match=match):
        PreferentialOptimizer(**kwargs)


def test_bad_tells_are_named():
    opt = PreferentialOptimizer(BOUNDS, strategy="random")
    with pytest.raises(InputDataError, match=r"needs a pending question; call ask"):
        opt.tell(0)
    opt.ask()
    with pytest.raises(InputDataError, match=r"\(0\.\.1\); got answer=2"):
        opt.tell(2)
    with pytest.raises(InputDataError, match=r"undo\(\) needs an answer"):
        opt.undo()
    with pytest.raises(InputDataError, match=r"best\(\) needs at least one answer"):
        opt.best()


@pytest.mark.parametrize(
    "options, match",
    [
        ([[float("nan"), 0.5], [0.2, 0.3]], r"options must be finite"),
        ([[float("inf"), 0.5], [0.2, 0.3]], r"options must be finite"),
        (
            [[0.5, 1.5], [0.2, 0.3]],
            r"option 0 has x\[1\] = 1\.5 outside \[0\.0, 1\.0\]",
        ),
        ([[0.5, 0.5], [0.5, 0.5]], r"options 0 and 1 are the same point"),
        ([[0.1, 0.2], [0.5, 0.5], [0.5, 0.5]], r"options 1 and 2 are the same"),
    ],
)
def test_bad_options_are_named_and_nothing_is_kept(tmp_path, options, match):
    path = tmp_path / "s.jsonl"
    opt = PreferentialOptimizer(BOUNDS, strategy="random", log_path=path)
    with pytest.raises(InputDataError, match=match):
        opt.tell(0, options=torch.tensor(options))
    assert opt.history == [] and len(path.read_text().splitlines()) == 1


def test_integer_answers_of_other_types_are_taken_and_history_is_a_copy():
    opt = PreferentialOptimizer(BOUNDS, strategy="random")
    opt.ask()
    opt.tell(np.int64(1))
    opt.ask()
    opt.tell(torch.tensor(0))
    assert [t.answer for t in opt.history] == [1, 0]
    assert all(type(t.answer) is int for t in opt.history)
    for bad in (True, 1.0, torch.tensor(1.0), "1"):
        opt.ask()
        with pytest.raises(InputTypeError, match=r"answer must be an int"):
            opt.tell(bad)
    designs = opt.data()[0].clone()
    opt.history[0].options.add_(0.25)  # editing a copy leaves the data alone
    assert torch.equal(opt.data()[0], designs)


def test_a_config_the_log_cannot_store_is_named_before_the_file_is_made(tmp_path):
    path = tmp_path / "s.jsonl"
    covar = default_preference_covar_module(2)
    with pytest.raises(InputDataError, match=r"model_options cannot be stored in"):
        PreferentialOptimizer(
            BOUNDS, model_options={"covar_module": covar}, log_path=path
        )
    assert not path.exists()
    PreferentialOptimizer(BOUNDS, model_options={"covar_module": covar})  # no log


VARIATIONAL_FIT = {"fit": {"epochs": 60, "lr": 0.05}}


@pytest.mark.parametrize("strategy", ["eubo", "qeubo", "bald", "mes", "ts"])
def test_variational_model_runs_every_strategy(strategy, ask_and_tell):
    opt = PreferentialOptimizer(
        BOUNDS,
        model="variational",
        strategy=strategy,
        seed=1,
        acqf_options=SMALL,
        model_options=VARIATIONAL_FIT,
        refit_every=2,
    )
    asked = ask_and_tell(opt, range(4), Branin())
    for X in asked:
        assert X.shape == (2, 2) and ((X >= BOUNDS[0]) & (X <= BOUNDS[1])).all()
    x, mean, sd = opt.best()
    assert x.shape == (2,) and sd > 0


def test_variational_loop_conditions_q_u_on_every_answer(ask_and_tell):
    r"""Between refits the kernel is kept but q(u) is refitted to the new answer:
    the winner's posterior mean rises above the loser's."""
    opt = PreferentialOptimizer(
        BOUNDS,
        model="variational",
        strategy="random",
        refit_every=10,
        model_options=VARIATIONAL_FIT,
    )
    ask_and_tell(opt, [0, 1, 0])
    designs, comps = opt.data()
    with torch.no_grad():
        mean = opt.model.posterior(designs.unsqueeze(-2)).mean.reshape(-1)
    # every told answer is ordered correctly by the conditioned model
    assert (mean[comps[:, 0]] > mean[comps[:, 1]]).all()
    assert opt.model.base_variational_strategy.inducing_points.shape[0] == 6


def test_variational_q_u_starts_at_the_laplace_posterior(monkeypatch, ask_and_tell):
    r"""With the refit switched off (0 epochs) the variational model at the
    inducing points is the Laplace posterior under the fitted kernel."""
    from prefbo import PairwiseLaplaceGP

    opt = PreferentialOptimizer(
        BOUNDS,
        model="variational",
        strategy="random",
        refit_every=10,
        model_options={"fit": {"epochs": 1, "lr": 1e-12}},
    )
    ask_and_tell(opt, [0, 1, 0, 1])
    model = opt.model
    designs, comps = opt.data()
    Z = model.base_variational_strategy.inducing_points
    laplace = PairwiseLaplaceGP(designs, comps, covar_module=model.covar_module)
    with torch.no_grad():
        expected = laplace.posterior(Z).mean.squeeze(-1)
        got = model.posterior(Z).mean.squeeze(-1)
    torch.testing.assert_close(got, expected, rtol=0, atol=5e-3)
    assert expected.abs().max() > 0.1  # not the prior


@pytest.mark.parametrize("warm", [True, False])
def test_refits_start_from_the_previous_fit(monkeypatch, warm, ask_and_tell):
    from prefbo import PairwiseLaplaceGP

    starts, ends = [], []
    fit = FittedModels.fit

    def recording(self, model):
        starts.append(model.covar_module.outputscale.item())
        fit(self, model)
        ends.append(model.covar_module.outputscale.item())

    monkeypatch.setattr(FittedModels, "fit", recording)
    opt = PreferentialOptimizer(
        BOUNDS,
        model="laplace",
        strategy="random",
        refit_every=2,
        warm_start_fits=warm,
    )
    ask_and_tell(opt, [0, 1, 1, 0, 1, 1], problem=Branin())
    assert opt.model is not None  # random questions need no model: fits here
    kernel = default_preference_covar_module(
        2, outputscale_bounds=LAPLACE_OUTPUTSCALE_BOUNDS
    )
    default = PairwiseLaplaceGP(*opt.data(), covar_module=kernel)
    default = default.covar_module.outputscale.item()
    assert starts[0] == default and ends[0] != default
    if warm:  # the whole chain 2, 4, 6, each from the previous fit
        assert len(starts) == 3 and sorted(opt.models.fits) == [2, 4, 6]
        assert starts[1:] == ends[:-1]
    else:  # only the fit at 6, from the defaults
        assert len(starts) == 1 and sorted(opt.models.fits) == [6]


def test_the_fit_chain_depends_on_the_answers_alone(ask_and_tell):
    # one session asks after every answer (every fit of the chain computed as
    # it goes); the other is told the same questions without asking, so its
    # chain is computed at once at the end: same kernel, same next question
    # (without the virtual comparisons at the faces, which only asked
    # questions carry; tests/loop/test_boundary.py)
    problem = Branin()
    kw = dict(model="laplace", refit_every=2, seed=3, boundary_step=None)
    live = PreferentialOptimizer(BOUNDS, **kw)
    asked = ask_and_tell(live, [0] * 7, problem=problem)
    batch = PreferentialOptimizer(BOUNDS, **kw)
    for X, t in zip(asked, live.history):
        batch.tell(t.answer, options=X)
    assert torch.equal(batch.ask(), live.ask())
    kernel = dict(batch.models.fits[6].covar_module.named_parameters())
    for name, p in live.models.fits[6].covar_module.named_parameters():
        assert torch.equal(p, kernel[name])


def test_logs_from_before_warm_starts_maximize_eubo_and_tolerances_resume_as_written(
    tmp_path,
):
    from prefbo.loop.session import encode_record, read_session_log

    path = tmp_path / "old.jsonl"
    opt = PreferentialOptimizer(BOUNDS, strategy="random", log_path=path)
    opt.ask()
    opt.tell(0)
    header, _ = read_session_log(path)
    del header["config"]["version"]  # an older layout has none
    del header["config"]["warm_start_fits"]
    del header["config"]["fit_options"]
    del header["config"]["acqf_options"]["optimizer"]
    del header["config"]["acqf_options"]["ftol"]
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(encode_record(header) + "".join(lines[1:]))
    opt.close()
    resumed = PreferentialOptimizer.resume(path, read_only=True)
    assert resumed.warm_start_fits is False
    # no cap and scipy's tolerances, as written
    assert resumed.fit_options == {"maxfun": 15000, "ftol": 2.220446049250313e-09}
    assert resumed.acqf_options["ftol"] is None  # BoTorch's default
    # the migrated values also satisfy an explicit expectation
    assert PreferentialOptimizer.resume(path, warm_start_fits=False).ask() is not None
    assert resumed.acqf_options["optimizer"] == "scipy"
    assert PreferentialOptimizer(BOUNDS).warm_start_fits is True


def test_fit_options_cap_the_refit_evaluations(monkeypatch, ask_and_tell):
    from prefbo.mlls import PairwiseLaplaceMLL

    calls = []
    forward = PairwiseLaplaceMLL.forward

    def counting(self, *args, **kwargs):
        calls.append(1)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(PairwiseLaplaceMLL, "forward", counting)
    counts = {}
    for cap in (3, 15000):
        calls.clear()
        opt = PreferentialOptimizer(
            BOUNDS,
            model="laplace",
            strategy="random",
            refit_every=8,
            fit_options={"maxfun": cap},
        )
        ask_and_tell(opt, [0] * 8, problem=Branin())
        assert opt.model is not None  # one refit, at 8 answers
        counts[cap] = len(calls)
    assert counts[3] <= 4 < counts[15000]
    assert PreferentialOptimizer(BOUNDS).fit_options == {"maxfun": 30, "ftol": 1e-6}
    with pytest.raises(InputDataError, match="fit_options must be a dict"):
        PreferentialOptimizer(BOUNDS, fit_options=30)


def test_laplace_caps_the_outputscale_unless_model_options_give_a_kernel(ask_and_tell):
    # nearly separable answers: the exact Laplace evidence rises with the
    # outputscale; the loop's default box ends at 20 (BoTorch's at 100)
    answers = [0, 1, 1, 0, 1, 1, 0, 1]
    opt = PreferentialOptimizer(
        BOUNDS, model="laplace", strategy="random", refit_every=4
    )
    ask_and_tell(opt, answers, problem=Branin())
    cap = LAPLACE_OUTPUTSCALE_BOUNDS[1]
    assert opt.model.covar_module.outputscale.item() <= cap * (1 + 1e-6)
    assert opt.model.covar_module.outputscale_prior.b.item() == cap
    # the same answers to a model with BoTorch's box: the evidence goes past 20
    free = PreferentialOptimizer(
        BOUNDS,
        model="laplace",
        strategy="random",
        refit_every=4,
        model_options={"covar_module": default_preference_covar_module(2)},
    )
    ask_and_tell(free, answers, problem=Branin())
    assert free.model.covar_module.outputscale.item() > cap


def test_outputscale_bounds_are_checked():
    with pytest.raises(InputDataError, match="outputscale_bounds"):
        default_preference_covar_module(2, outputscale_bounds=(2.0, 20.0))
    with pytest.raises(InputDataError, match="outputscale_bounds"):
        default_preference_covar_module(2, outputscale_bounds=(0.01,))


INF = float("inf")


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        ({"bounds": [[0.0], [INF]]}, InputDataError, r"bounds must be finite"),
        ({"bounds": [[-1e308], [1e308]]}, InputDataError, r"bounds .*width"),
        ({"bounds": [[float("nan")], [1.0]]}, InputDataError, r"bounds must be fin"),
        ({"bounds": [["a"], ["b"]]}, InputTypeError, r"bounds must be a 2 x d"),
        ({"bounds": "0 1"}, InputTypeError, r"bounds must be a 2 x d .*got str"),
        ({"log_path": 5}, InputTypeError, r"log_path must be None, a str or"),
        ({"keep_winner": "no"}, InputTypeError, r"keep_winner must be a bool"),
        ({"warm_start_fits": 1}, InputTypeError, r"warm_start_fits must be a bool"),
        ({"model": 5}, InputTypeError, r"model must be a str .*got int 5"),
        ({"strategy": 5}, InputTypeError, r"strategy must be a str .*got int 5"),
        (
            {"acqf_options": {"raw_samples": 0}},
            InputDataError,
            r"acqf_options\['raw_samples'\] must be an int >= 1",
        ),
        (
            {"acqf_options": {"num_restarts": 2.5}},
            InputTypeError,
            r"acqf_options\['num_restarts'\] must be an int >= 1; got float",
        ),
        (
            {"acqf_options": {"maxiter": "9"}},
            InputTypeError,
            r"acqf_options\['maxiter'\] must be an int",
        ),
        (
            {"acqf_options": {"mc_samples": -1}},
            InputDataError,
            r"acqf_options\['mc_samples'\] must be an int >= 1",
        ),
        (
            {"acqf_options": {"ftol": -1.0}},
            InputDataError,
            r"acqf_options\['ftol'\] must be None or a finite float >= 0",
        ),
        (
            {"acqf_options": {"ftol": float("nan")}},
            InputDataError,
            r"acqf_options\['ftol'\]",
        ),
        (
            {"acqf_options": {"optimizer": 5}},
            InputDataError,
            r"acqf_options\['optimizer'\] must be one of",
        ),
        (
            {"fit_options": {"maxfun": -1}},
            InputDataError,
            r"fit_options\['maxfun'\] must be an int >= 1",
        ),
        (
            {"fit_options": {"ftol": "x"}},
            InputTypeError,
            r"fit_options\['ftol'\] must be a finite float >= 0",
        ),
        ({"model_options": 5}, InputTypeError, r"model_options must be None or a dict"),
        ({"metadata": [1]}, InputTypeError, r"metadata must be None or a dict"),
    ],
)
def test_bad_arguments_of_the_wrong_type_or_value_are_named(kwargs, err, match):
    kwargs = {"bounds": [[0.0], [1.0]], "strategy": "random", **kwargs}
    with pytest.raises(err, match=match):
        PreferentialOptimizer(**kwargs)


def test_answers_of_the_wrong_type_are_type_errors():
    opt = PreferentialOptimizer(BOUNDS, strategy="random")
    opt.ask()
    for bad in (True, 1.0, "0", torch.tensor(1.0), None):
        with pytest.raises(InputTypeError, match=r"answer must be an int"):
            opt.tell(bad)
    with pytest.raises(InputDataError, match=r"got answer=-1"):
        opt.tell(-1)
    assert opt.history == []


def test_the_log_path_is_the_logs_or_none(tmp_path):
    from pathlib import Path

    assert PreferentialOptimizer(BOUNDS, strategy="random").log_path is None
    path = tmp_path / "s.jsonl"
    with PreferentialOptimizer(BOUNDS, strategy="random", log_path=str(path)) as opt:
        assert opt.log_path == Path(path)
    view = PreferentialOptimizer.resume(path, read_only=True)
    assert view.log_path == Path(path)  # a view's too
