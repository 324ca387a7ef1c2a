"""``prefbo.loop.question_maker``: one question maker for every caller."""

import pytest
import torch

import prefbo.loop.question_maker as question_maker
from prefbo.exceptions import InputDataError
from prefbo.loop.box import DesignBox
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.repeats import RepeatRule
from prefbo.utils.seeds import question_seed

D = {"dtype": torch.float64}
BOUNDS = torch.tensor([[0.0, -1.0], [1.0, 2.0]], **D)
FAST = {"num_restarts": 2, "raw_samples": 32, "maxiter": 20}


def test_a_random_question_starts_with_the_kept_design():
    box = DesignBox(BOUNDS)
    maker = QuestionMaker(box, "random", q=3)
    assert not maker.uses_model
    assert torch.equal(maker.random(5), box.uniform(3, 5))
    fixed = torch.tensor([0.5, 0.5], **D)
    X = maker.random(5, fixed)
    assert X.shape == (3, 2) and torch.equal(X[0], fixed)
    assert torch.equal(X[1:], box.uniform(2, 5, fixed))


def _answered(ask_and_tell, **kw):
    opt = PreferentialOptimizer(
        BOUNDS, model="laplace", seed=2, boundary_step=None, acqf_options=FAST, **kw
    )
    ask_and_tell(opt, [0, 1, 0])
    return opt


def _rule(opt, fixed=None):
    asked = [opt.box.to_model(t.options) for t in opt.history]
    return RepeatRule(opt.model, asked, fixed=fixed)


def _best(opt):
    return lambda: opt.box.to_model(opt.best()[0])


def test_the_optimizer_asks_what_its_question_maker_makes(ask_and_tell):
    opt = _answered(ask_and_tell)
    maker = QuestionMaker(opt.box, "eubo", 2, opt.acqf_options)
    X, fallback = maker.from_model(_rule(opt), question_seed(2, 3), _best(opt))
    assert not fallback and maker.uses_model
    assert torch.equal(X, opt.ask())
    # with a kept winner, the question starts with it
    kept = _answered(ask_and_tell, keep_winner=True, strategy="ts")
    last = kept.history[-1]
    winner = last.options[last.answer]
    maker = QuestionMaker(kept.box, "ts", 2, kept.acqf_options, keep_winner=True)
    rule = _rule(kept, fixed=kept.box.to_model(winner))
    X, _ = maker.from_model(rule, question_seed(2, 3), _best(kept), winner)
    assert torch.equal(X[0], winner) and torch.equal(X, kept.ask())


def test_nothing_worth_asking_gives_a_random_question(ask_and_tell, monkeypatch):
    opt = _answered(ask_and_tell)
    maker = QuestionMaker(opt.box, "eubo", 2, opt.acqf_options)
    monkeypatch.setattr(question_maker, "choose_options", lambda *a, **k: None)
    X, fallback = maker.from_model(_rule(opt), 11, _best(opt))
    assert fallback and torch.equal(X, maker.random(11))


def test_an_unknown_strategy_is_named():
    with pytest.raises(InputDataError, match=r"'kg'"):
        QuestionMaker(DesignBox(BOUNDS), "kg")
