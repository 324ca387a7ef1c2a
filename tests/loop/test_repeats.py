import math

import pytest
import torch
from botorch.acquisition import AcquisitionFunction
from botorch.utils.transforms import t_batch_mode_transform

from prefbo.acquisition import PairwiseBALD
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.loop import strategies
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.repeats import (
    MIN_INFORMATION,
    REPEAT_TOL,
    answer_information,
    near_copies,
    not_worth_asking,
    repeats,
)
from prefbo.loop.strategies import AcquisitionStrategy, Question, Strategy
from prefbo.models import PairwiseEPGP

D = dict(dtype=torch.float64)
A = torch.tensor([[0.1, 0.2], [0.8, 0.9]], **D)


def test_a_repeat_matches_every_option_in_any_order():
    assert repeats(A, [A]) and repeats(A.flip(0), [A])
    near = A + 0.9 * REPEAT_TOL
    assert repeats(near, [A])
    assert not repeats(A + 1.1 * REPEAT_TOL, [A])
    one_moved = A.clone()
    one_moved[1, 0] = 0.5
    assert not repeats(one_moved, [A])
    # both options close to the same earlier option is not the same question
    assert not repeats(torch.stack([A[0], A[0] + 0.01]), [A])
    three = torch.tensor([[0.1, 0.1], [0.5, 0.5], [0.9, 0.9]], **D)
    assert repeats(three[[2, 0, 1]], [A, three]) and not repeats(three, [A])
    assert not repeats(A, [])


def _model(wins: int, losses: int, noise_std: float = 1.0) -> PairwiseEPGP:
    comps = [[0, 1]] * wins + [[1, 0]] * losses
    return PairwiseEPGP(
        A.clone(),
        torch.tensor(comps),
        likelihood=PairwiseProbitLikelihood(noise_std=noise_std),
    ).eval()


def test_answer_information_is_pairwise_bald_and_the_largest_pair_for_q3():
    model = _model(3, 1)
    X3 = torch.tensor([[0.1, 0.2], [0.8, 0.9], [0.4, 0.6]], **D)
    with torch.no_grad():
        pairs = PairwiseBALD(model)(torch.stack([X3[[0, 1]], X3[[0, 2]], X3[[1, 2]]]))
    assert answer_information(model, X3[:2]) == pytest.approx(pairs[0].item())
    assert answer_information(model, X3) == pytest.approx(pairs.max().item())


def test_a_pair_is_resolved_when_its_answer_is_certain_or_a_coin_flip():
    # after one answer, with utilities as uncertain as the answers, the
    # pair is not settled
    fresh = _model(1, 0)
    info = answer_information(fresh, A)
    assert MIN_INFORMATION < info < math.log(2)
    assert not not_worth_asking(fresh, A, [A])
    decisive = _model(30, 0, noise_std=0.05)  # A[0] always wins, nearly noiseless
    assert answer_information(decisive, A) < MIN_INFORMATION
    assert not_worth_asking(decisive, A.flip(0), [A])
    assert not not_worth_asking(decisive, A, [])  # never asked: not a repeat
    # a near-tie under noisy answers: the answer is a coin flip whatever the
    # utilities, so it teaches little
    tie = _model(20, 20, noise_std=3.0)
    assert answer_information(tie, A) < MIN_INFORMATION


class _Towards(AcquisitionFunction):
    r"""``-|X - target|^2``: every restart converges to ``target``."""

    def __init__(self, model, target):
        super().__init__(model=model)
        self.target = target

    @t_batch_mode_transform()
    def forward(self, X):
        return -((X - self.target) ** 2).sum((-1, -2))


class _Stubborn(AcquisitionStrategy):
    r"""Always wants the first question asked again."""

    pair_only = True
    target = None

    def acquisition(self, question):
        return _Towards(question.model, type(self).target), None


def test_the_loop_does_not_ask_a_resolved_pair_again(monkeypatch):
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], **D)
    opt = PreferentialOptimizer(
        bounds,
        strategy="random",
        initial_random=1,
        acqf_options={"num_restarts": 2, "raw_samples": 16, "maxiter": 20},
    )
    first = opt.ask()
    for _ in range(12):  # the same answer to the same pair: resolved
        opt.tell(0, options=first)
    monkeypatch.setattr(_Stubborn, "target", first)
    monkeypatch.setitem(strategies.STRATEGIES.entries, "stubborn", _Stubborn())
    opt.strategy, opt._strategy = "stubborn", strategies.get_strategy("stubborn")
    assert not_worth_asking(opt.model, first, [first])
    X = opt.ask()
    assert not repeats(X, [first])
    # the best allowed of the Sobol fallback: nothing closer to the target
    # that is allowed was among its candidates, and it is near the target
    assert (X - first).abs().amax() < 0.2


def test_identical_options_are_never_asked_and_near_copies_only_if_informative():
    model = _model(3, 1)
    same = torch.stack([A[0], A[0]])
    assert not_worth_asking(model, same, [])
    close = torch.stack([A[0], A[0] + 0.5 * REPEAT_TOL])
    assert near_copies(close) and not near_copies(A)
    assert not_worth_asking(model, close, [])  # a coin flip whatever u is
    assert not not_worth_asking(model, A, [])


class _Twice(Strategy):
    r"""Asks the box's centre against itself (what a maximiser can return
    when both options run into the same corner)."""

    def acquire(self, question: Question) -> torch.Tensor:
        return question.bounds.mean(0, keepdim=True).expand(question.num_new, -1)


def test_a_question_of_identical_options_becomes_a_random_one(monkeypatch):
    monkeypatch.setitem(strategies.STRATEGIES.entries, "twice", _Twice())
    bounds = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], **D)
    opt = PreferentialOptimizer(bounds, strategy="twice", initial_random=1)
    opt.tell(0, options=torch.tensor([[0.0, 1.0], [5.0, 9.0]], **D))
    X = opt.ask()
    assert not torch.equal(X[0], X[1])
    assert ((X >= bounds[0]) & (X <= bounds[1])).all()
    opt.tell(1)  # before: the loop's own question was refused here
    assert opt.random_fallbacks == 1
