import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.loop.arguments import check_schedule, design_box, model_and_strategy
from prefbo.loop.boundary import MAX_STEP, MIN_STEP
from prefbo.loop.model_kinds import EPKind, LaplaceKind
from prefbo.loop.strategies import EUBO, Random
from prefbo.space import Categorical, Continuous, Space


def test_a_box_is_kept_as_float64_and_a_space_gets_its_unit_box():
    space, box = design_box([[0, -1], [2, 1]])
    assert space is None
    assert box.dtype == torch.float64
    assert torch.equal(box, torch.tensor([[0.0, -1.0], [2.0, 1.0]]).double())
    given = Space([Categorical("c", ["a", "b", "c"]), Continuous("x", 1.0, 5.0)])
    space, box = design_box(given)
    assert space is given
    assert box.shape == (2, given.dim) == (2, 4)
    assert torch.equal(box, torch.stack([torch.zeros(4), torch.ones(4)]).double())
    space, _ = design_box(given.to_dict())  # its JSON form
    assert space.to_dict() == given.to_dict()


@pytest.mark.parametrize(
    "bounds, err, match",
    [
        ([["a"], ["b"]], InputTypeError, r"bounds must be a 2 x d"),
        ([[0.0], [float("inf")]], InputDataError, r"bounds must be finite"),
        ([[1.0], [0.0]], InputDataError, r"lower < upper"),
    ],
)
def test_bad_boxes_are_named(bounds, err, match):
    with pytest.raises(err, match=match):
        design_box(bounds)


def test_the_model_kind_and_strategy_are_looked_up_and_checked_together():
    kind, strategy = model_and_strategy("laplace", "eubo", 2, None)
    assert kind is LaplaceKind
    assert isinstance(strategy, EUBO)
    kind, strategy = model_and_strategy("ep", "random", 5, None)
    assert kind is EPKind
    assert isinstance(strategy, Random)


@pytest.mark.parametrize(
    "args, err, match",
    [
        # the model kind first, then the strategy, then q, then the pair
        (("gp", "kg", 1), InputDataError, r"model must be one of .*got 'gp'"),
        (("ep", "kg", 1), InputDataError, r"strategy must be one of .*got 'kg'"),
        (("ep", "eubo", 1), InputDataError, r"q must be an int >= 2; got q=1"),
        (("ep", "eubo", True), InputTypeError, r"q must be an int >= 2; got bool"),
        (
            ("ep", "eubo", 3),
            UnsupportedError,
            r"strategy='eubo' asks pairs only \(q=2\); got q=3",
        ),
        (("skew", "ts", 2), UnsupportedError, r"model='skew' does not"),
    ],
)
def test_bad_models_strategies_and_q_are_named_in_order(args, err, match):
    with pytest.raises(err, match=match):
        model_and_strategy(*args, None)


def test_a_space_must_hold_q_designs():
    space = Space([Categorical("c", ["a", "b"])])
    model_and_strategy("ep", "random", 2, space)
    with pytest.raises(
        InputDataError,
        match=r"a question needs q=3 distinct designs; the space holds only 2\.",
    ):
        model_and_strategy("ep", "random", 3, space)


def test_the_schedule_returns_the_boundary_step_as_a_float():
    assert check_schedule(1, None, 0, 2, True) is None
    assert check_schedule(3, MAX_STEP, 2**64 - 1, 1, True) == MAX_STEP
    assert check_schedule(1, MIN_STEP, -(2**63), 0, False) == MIN_STEP


@pytest.mark.parametrize(
    "args, err, match",
    [
        # refit_every first, then boundary_step, seed and initial_random
        ((0, -1.0, 1.5, -1), InputDataError, r"refit_every must be an int >= 1"),
        ((1, 0.9, 1.5, -1), InputDataError, r"boundary_step"),
        ((1, "x", 1.5, -1), InputTypeError, r"boundary_step"),
        ((1, 0.1, 1.5, -1), InputTypeError, r"seed must be an int; got float 1\.5"),
        ((1, 0.1, 0, 0), InputDataError, r"initial_random must be .*>= 1"),
    ],
)
def test_bad_schedules_are_named_in_order(args, err, match):
    with pytest.raises(err, match=match):
        check_schedule(*args, True)


def test_a_strategy_without_a_model_may_ask_no_random_questions_first():
    assert check_schedule(1, 0.1, 0, 0, False) == 0.1
    with pytest.raises(InputDataError, match=r"initial_random must be .*>= 0"):
        check_schedule(1, 0.1, 0, -1, False)
