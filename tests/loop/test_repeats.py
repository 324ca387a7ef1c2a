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
    RepeatRule,
    answer_information,
    near_copies,
    not_worth_asking,
    repeat_mask,
    repeats,
)
from prefbo.loop.strategies import AcquisitionStrategy, Question, Strategy
from prefbo.models import PairwiseEPGP
from prefbo.space import ItemPool, Space
from prefbo.test_functions import SimulatedPerson

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
    # the earlier questions as one a x q x d tensor: the same answers
    X = torch.stack([A, A.flip(0), near, one_moved, A + 1.1 * REPEAT_TOL])
    earlier = torch.stack([one_moved, A])
    assert torch.equal(repeat_mask(X, earlier), repeat_mask(X, list(earlier)))
    assert repeat_mask(X, earlier).tolist() == [True, True, True, True, False]
    assert not bool(repeat_mask(X, three.unsqueeze(0)).any())  # 3 options
    assert not bool(repeat_mask(X, earlier[:0]).any())


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
    monkeypatch.setitem(strategies.STRATEGIES.entries, "stubborn", _Stubborn())
    opt = PreferentialOptimizer(
        bounds,
        strategy="stubborn",
        initial_random=1,
        acqf_options={"num_restarts": 2, "raw_samples": 16, "maxiter": 20},
    )
    first = opt.ask()  # a random one
    for _ in range(12):  # the same answer to the same pair: resolved
        opt.tell(0, options=first)
    monkeypatch.setattr(_Stubborn, "target", first)
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


def _pairs(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 2, 2, generator=g, **D)  # n x 2 x d


def test_a_repeat_gives_way_to_the_best_unasked_question_nearly_as_informative():
    model = _model(1, 0)  # A asked once: its answer still informs
    rule = RepeatRule(model, [A])
    info = answer_information(model, A)
    assert info >= MIN_INFORMATION and rule.is_repeat(A)
    assert rule.floor(A) == pytest.approx(max(MIN_INFORMATION, info - MIN_INFORMATION))
    others = _pairs(40)
    with torch.no_grad():
        bald = PairwiseBALD(model)(others)
    values = torch.linspace(1.0, 0.0, 40, **D)  # the first other is the best
    candidates = torch.cat([A.unsqueeze(0), others])  # 41 x 2 x d
    values = torch.cat([torch.tensor([2.0], **D), values])  # the repeat is best
    nearly = (bald >= rule.floor(A)).nonzero().reshape(-1)
    assert 0 < len(nearly) < 40  # some are nearly as informative, some not
    chosen = rule.choose(candidates, values)
    torch.testing.assert_close(chosen, others[nearly[0]])
    # no unasked candidate nearly as informative: the repeat is asked
    weak = others[bald < rule.floor(A)]
    chosen = rule.choose(torch.cat([A.unsqueeze(0), weak]), values[: len(weak) + 1])
    torch.testing.assert_close(chosen, A)
    # nor when it is none of the candidates, but the extra ones hold one
    chosen = rule.choose(
        torch.cat([A.unsqueeze(0), weak]),
        values[: len(weak) + 1],
        more=lambda: (others, values[1:]),
    )
    torch.testing.assert_close(chosen, others[nearly[0]])
    # without avoid_resolved: the old rule, the best with distinct options
    old = RepeatRule(model, [A], avoid_resolved=False)
    torch.testing.assert_close(old.choose(candidates, values), A)


def test_the_rule_holds_with_a_kept_winner_and_for_three_options():
    model = _model(1, 0)
    X3 = torch.tensor([[0.1, 0.2], [0.8, 0.9], [0.4, 0.6]], **D)
    rule = RepeatRule(model, [X3], fixed=X3[0])
    assert rule.is_repeat(X3[[2, 1]]) and not rule.is_repeat(X3[[1, 1]] + 0.1)
    info = answer_information(model, X3)
    assert rule.information(X3[1:].unsqueeze(0)).item() == pytest.approx(info)
    others = _pairs(30, seed=1)  # 30 x 2 x d new options beside the kept one
    values = torch.cat([torch.tensor([2.0], **D), torch.linspace(1, 0, 30, **D)])
    chosen = rule.choose(torch.cat([X3[1:].unsqueeze(0), others]), values)
    full = torch.cat([X3[:1].expand(30, 1, 2), others], dim=-2)  # 30 x 3 x d
    infos = torch.tensor([answer_information(model, X) for X in full], **D)
    first = int((infos >= rule.floor(X3[1:])).nonzero()[0])
    torch.testing.assert_close(chosen, others[first])


@pytest.mark.parametrize("q", [2, 3])
def test_the_loop_asks_an_unasked_question_before_an_informative_repeat(monkeypatch, q):
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], **D)
    monkeypatch.setattr(_Stubborn, "pair_only", q == 2)
    monkeypatch.setitem(strategies.STRATEGIES.entries, "stubborn", _Stubborn())
    opt = PreferentialOptimizer(
        bounds,
        strategy="stubborn",
        q=q,
        initial_random=1,
        acqf_options={"num_restarts": 2, "raw_samples": 16, "maxiter": 20},
    )
    first = opt.ask()  # a random one
    opt.tell(0)
    monkeypatch.setattr(_Stubborn, "target", first)
    rule = RepeatRule(opt.model, [first])
    assert answer_information(opt.model, first) >= MIN_INFORMATION  # not resolved
    X = opt.ask()  # every restart converges on the first question
    assert not repeats(X, [first])
    assert answer_information(opt.model, X) >= rule.floor(first)
    assert opt.random_fallbacks == 0


def _repeat_mask(P: torch.Tensor, asked: torch.Tensor) -> torch.Tensor:
    r"""Which of the ``p x 2 x d`` pairs repeat one of the ``m x 2 x d``
    asked, as :func:`repeats` defines it (``p``)."""
    near = [
        [
            (P[:, None, i] - asked[None, :, j]).abs().amax(-1) <= REPEAT_TOL
            for j in range(2)
        ]
        for i in range(2)
    ]  # p x m each
    return ((near[0][0] & near[1][1]) | (near[0][1] & near[1][0])).any(-1)


def _pool_run(seed: int, answers: int = 25, items: int = 200):
    g = torch.Generator().manual_seed(100 + seed)
    features = torch.rand(items, 3, generator=g, **D)
    weights = torch.randn(3, generator=g, **D)
    space = Space([ItemPool("item", list(range(items)), features.tolist())])
    person = SimulatedPerson(
        lambda X: torch.sin(3 * X) @ weights, noise_std=0.1, seed=seed
    )
    opt = PreferentialOptimizer(space, seed=seed)
    grid = space.grid()  # items x 3, the model's inputs
    i, j = torch.triu_indices(items, items, offset=1)
    every = torch.stack([grid[i], grid[j]], dim=-2)  # items (items - 1) / 2 x 2 x 3
    asked, repeated = [], 0
    for _ in range(answers):
        X = opt.ask()
        if repeats(X, asked):
            repeated += 1
            rule = RepeatRule(opt.model, asked)
            with torch.no_grad():
                bald = PairwiseBALD(opt.model)(every)
            unasked = ~_repeat_mask(every, torch.stack(asked))
            # asked again only while no unasked pair is nearly as informative
            assert float(bald[unasked].max()) < rule.floor(X) + 1e-9
        asked.append(X)
        opt.tell(person.compare(X[0], X[1]))
    return repeated


@pytest.mark.parametrize("seed", [0, 1])
def test_an_item_pool_loop_repeats_a_pair_only_by_the_rule(seed):
    # before the rule, EUBO asked its two best items again (seed 0: twice,
    # seed 1: once) while unasked pairs carried as much information
    _pool_run(seed)


def test_thompson_draws_again_when_its_first_draw_is_a_repeat(monkeypatch):
    model = _model(1, 0)  # A asked once: informative
    other = torch.tensor([[0.3, 0.7]], **D)
    draws = iter([A[1:], other])  # Thompson maximisers, 1 x d each
    monkeypatch.setattr(strategies, "thompson_batch", lambda *a, **k: next(draws))
    question = Question(
        model=model,
        bounds=torch.tensor([[0.0, 0.0], [1.0, 1.0]], **D),
        fixed=None,
        num_new=2,
        seed=0,
        options={"raw_samples": 8, "num_restarts": 1, "maxiter": 1},
        best=lambda: A[0],
        rule=RepeatRule(model, [A]),
    )
    fresh = torch.cat([A[:1], other])  # the best design against the second draw
    assert answer_information(model, fresh) >= question.rule.floor(A)
    # the best design against the first draw repeats A: drawn again
    chosen = strategies.get_strategy("ts").acquire(question)
    torch.testing.assert_close(chosen, fresh)
