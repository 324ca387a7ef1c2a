"""``prefbo.loop.question_maker``: one question maker for every caller."""

import pytest
import torch

import prefbo.loop.question_maker as question_maker
from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.loop import people_questions
from prefbo.loop.box import DesignBox
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.repeats import RepeatRule
from prefbo.loop.spaces import unit_box
from prefbo.space import Categorical, Continuous, Space
from prefbo.utils.seeds import batch_question_seed, question_seed

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


UNIT = torch.tensor([[0.0, 0.0], [1.0, 1.0]], **D)


def test_people_s_questions_are_the_batched_step_over_the_box_s_candidates(
    collaborative,
):
    people = torch.tensor([3, 0])
    shown = [None, torch.tensor([[0.2, 0.4], [0.6, 0.5]], **D)]
    X = people_questions.candidates(None, 2, 7)
    for strategy, step in (("eubo", "eubo"), ("ts", "thompson")):
        maker = QuestionMaker(DesignBox(UNIT), strategy)
        assert torch.equal(maker.candidates(7), X)
        asked = maker.for_people(collaborative, people, shown, seed=7)
        expected = people_questions.ask_people(
            collaborative,
            people,
            X,
            shown,
            step,
            seed=7,
            box=maker.box,
            step=maker.inset,
        )
        assert asked.questions.shape == (2, 2, 2)
        assert torch.equal(asked.questions, expected.questions)
        assert len(asked.virtual) == 2
        for mine, theirs in zip(asked.virtual, expected.virtual, strict=True):
            assert (mine is None) == (theirs is None)
            assert mine is None or torch.equal(mine, theirs)
    # nobody looking: shown defaults to None for everyone
    maker = QuestionMaker(DesignBox(UNIT), "eubo")
    assert torch.equal(
        maker.for_people(collaborative, people, seed=7).questions,
        maker.for_people(collaborative, people, [None, None], seed=7).questions,
    )
    empty = maker.for_people(collaborative, people[:0], seed=7)
    assert empty.questions.shape == (0, 2, 2) and empty.virtual == []


def test_a_box_in_its_own_units_draws_its_candidates_there():
    maker = QuestionMaker(DesignBox(BOUNDS, unit_cube=False), "eubo")
    X = maker.candidates(2, count=16)
    unit = people_questions.candidates(None, 2, 2, count=16)
    torch.testing.assert_close(X, BOUNDS[0] + (BOUNDS[1] - BOUNDS[0]) * unit)
    # a space's candidates are its model points
    space = Space([Continuous("x", 0.0, 2.0), Categorical("c", ["a", "b"])])
    maker = QuestionMaker(DesignBox(unit_box(space), space), "eubo")
    assert torch.equal(maker.candidates(4), people_questions.candidates(space, 3, 4))


def test_people_s_random_questions_are_the_maker_s(collaborative):
    box = DesignBox(BOUNDS)
    maker = QuestionMaker(box, "random")
    asked = maker.for_people(collaborative, torch.tensor([1, 2, 0]), seed=11)
    assert asked.questions.shape == (3, 2, 2) and asked.virtual == [None] * 3
    for b in range(3):  # the model's coordinates: the unit cube
        expected = box.to_model(maker.random(batch_question_seed(11, b)))
        assert torch.equal(asked.questions[b], expected)
    with pytest.raises(InputDataError, match=r"shown must hold one entry per person"):
        maker.for_people(collaborative, torch.tensor([1, 2]), [None], seed=11)


def test_people_s_questions_need_pairs_and_a_batched_strategy(collaborative):
    people = torch.tensor([0])
    with pytest.raises(
        UnsupportedError,
        match=r"for_people runs the strategies \['eubo', 'ts'\] and those without "
        r"a model \(such as 'random'\); this maker's is 'bald': make it with one "
        r"of those\.",
    ):
        QuestionMaker(DesignBox(UNIT), "bald").for_people(collaborative, people)
    with pytest.raises(
        UnsupportedError,
        match=r"for_people asks pairs; this maker has q=3: make it with q=2\.",
    ):
        QuestionMaker(DesignBox(UNIT), "random", q=3).for_people(collaborative, people)
