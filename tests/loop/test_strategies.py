import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.loop import strategies
from prefbo.loop.model_kinds import get_model_kind
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.strategies import (
    Question,
    Strategy,
    get_strategy,
    register_strategy,
    strategy_names,
)
from prefbo.test_functions import Branin

BOUNDS = Branin().bounds


def test_the_strategies_are_registered_in_order():
    assert strategy_names() == ("eubo", "qeubo", "bald", "mes", "ts", "random")
    assert get_strategy("eubo").pair_only and not get_strategy("qeubo").pair_only
    assert not get_strategy("random").uses_model
    with pytest.raises(InputDataError, match=r"strategy must be one of .*got 'kg'"):
        get_strategy("kg")


def test_strategies_name_what_they_cannot_serve():
    skew = get_model_kind("skew")
    with pytest.raises(UnsupportedError, match=r"'bald' asks pairs only.*got q=3"):
        get_strategy("bald").check("bald", 3, "ep", get_model_kind("ep"))
    with pytest.raises(UnsupportedError, match="needs a Gaussian posterior"):
        get_strategy("mes").check("mes", 2, "skew", skew)
    with pytest.raises(UnsupportedError, match="model='skew' does not provide"):
        get_strategy("ts").check("ts", 2, "skew", skew)
    get_strategy("ts").check("ts", 3, "variational", get_model_kind("variational"))


def test_a_registered_strategy_asks_in_the_optimizer(monkeypatch):
    seen = []

    class Centre(Strategy):
        r"""The box's centre against the current best (a toy)."""

        def acquire(self, question: Question) -> torch.Tensor:
            seen.append(question)
            centre = question.bounds.mean(0, keepdim=True)  # 1 x d
            if question.fixed is not None:
                return centre
            return torch.cat([question.best().unsqueeze(0), centre])

    monkeypatch.setitem(strategies.STRATEGIES.entries, "centre", Centre())
    opt = PreferentialOptimizer(BOUNDS, model="laplace", strategy="centre", seed=4)
    problem = Branin()
    for _ in range(3):
        X = opt.ask()
        opt.tell(int(problem(X).argmax()))
    X = opt.ask()
    assert torch.equal(X[1], BOUNDS.mean(0))
    assert len(seen) == 2  # after the 2 initial random questions
    q = seen[-1]
    assert q.num_new == 2 and q.fixed is None and q.model is opt.model
    assert q.seed == 4 * 1_000_003 + 3 and q.options == opt.acqf_options


def test_registering_checks_its_arguments(monkeypatch):
    monkeypatch.setattr(
        strategies.STRATEGIES, "entries", dict(strategies.STRATEGIES.entries)
    )
    with pytest.raises(InputTypeError, match="strategy must be a Strategy instance"):
        register_strategy("mine", Strategy)
    with pytest.raises(InputTypeError, match="name must be a str"):
        register_strategy(None, Strategy())
    with pytest.raises(InputDataError, match="'eubo' is already registered"):
        register_strategy("eubo", Strategy())
    register_strategy("mine", Strategy())
    assert strategy_names()[-1] == "mine"


@pytest.mark.parametrize(
    ("returned", "error", "match"),
    [
        (lambda q: torch.zeros(5), InputDataError, r"must return 2 x 2 options; got"),
        (
            lambda q: [[0.5, 0.5]] * 2,
            InputTypeError,
            r"must return a floating 2 x 2 tensor of options; got list",
        ),
        (
            lambda q: torch.tensor([[0.0, 0.0], [20.0, 0.0]], dtype=torch.float64),
            InputDataError,
            r"must return finite options in the box; option 1 has x\[0\] = 20\.0 ",
        ),
        (
            lambda q: torch.tensor([[0.0, 0.0], [float("nan"), 0.0]]),
            InputDataError,
            r"must return finite options in the box",
        ),
    ],
)
def test_a_strategys_options_are_checked_at_ask(monkeypatch, returned, error, match):
    class Bad(Strategy):
        def acquire(self, question: Question):
            return returned(question)

    monkeypatch.setitem(strategies.STRATEGIES.entries, "bad", Bad())
    opt = PreferentialOptimizer(BOUNDS, model="laplace", strategy="bad", seed=0)
    for _ in range(2):  # the initial random questions
        opt.tell(0, opt.ask())
    with pytest.raises(error, match=r"strategy 'bad' " + match):
        opt.ask()
