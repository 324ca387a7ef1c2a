"""``benchmarks/harness/ranking_prior.py``: Bayes' rule over rankings."""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks.harness.ranking_prior import (
    THETAS,
    RankingPrior,
    choose_theta,
    rankings,
    reversed_answers,
)


def test_rankings_are_every_order_once():
    U = rankings(4)
    assert U.shape == (24, 4)
    assert len({tuple(u) for u in U.tolist()}) == 24
    assert all(sorted(u) == [-3, -2, -1, 0] for u in U.tolist())
    with pytest.raises(ValueError, match="n must be in"):
        rankings(9)


def test_an_even_prior_gives_the_closed_form_mean_places():
    # theta = 0: every ranking with a above b alike. Of n places, a takes
    # the better of two drawn at random (mean place (n - 2) / 3, from 0),
    # b the worse (2 (n + 1) / 3 - 1), the others the mean (n - 1) / 2
    n, a, b = 5, 3, 1
    prior = RankingPrior(n, [torch.tensor([[0, 1]])], theta=0.0)
    mean = prior.utility(torch.tensor([[a, b]]))
    want = torch.full((n,), -(n - 1) / 2, dtype=torch.float64)
    want[a], want[b] = -(n - 2) / 3, -(2 * (n + 1) / 3 - 1)
    torch.testing.assert_close(mean, want)
    nothing = prior.utility(torch.zeros(0, 2, dtype=torch.long))
    torch.testing.assert_close(nothing, torch.full((n,), -(n - 1) / 2).double())


def test_a_sharp_prior_follows_the_training_person_it_agrees_with():
    first = torch.tensor([[0, 1], [1, 2], [0, 2]])  # 0 > 1 > 2
    second = torch.tensor([[2, 1], [1, 0], [2, 0]])  # 2 > 1 > 0
    prior = RankingPrior(3, [first, second], theta=20.0)
    # revealed 1 > 2 rules out the second's order; the first's wins
    mean = prior.utility(torch.tensor([[1, 2]]))
    assert mean.argsort(descending=True).tolist() == [0, 1, 2]
    assert float(mean[0]) == pytest.approx(0.0, abs=1e-6)
    # leaving the first out leaves a prior of the second alone
    alone = RankingPrior(3, [second], theta=20.0).utility(torch.tensor([[1, 2]]))
    torch.testing.assert_close(prior.utility(torch.tensor([[1, 2]]), 0), alone)
    with pytest.raises(ValueError, match="no ranking agrees"):
        prior.utility(torch.tensor([[0, 1], [1, 0]]))


def test_reversed_answers_count_kendall_s_distance():
    U = rankings(3)
    answers = torch.tensor([[0, 1], [1, 2], [0, 2]])  # 0 > 1 > 2
    d = reversed_answers(U, answers)
    assert d[(U[:, 0] == 0) & (U[:, 1] == -1)].tolist() == [0.0]
    assert d[(U[:, 2] == 0) & (U[:, 1] == -1)].tolist() == [3.0]
    assert d.sum() == 3 * math.factorial(3) / 2  # each pair reversed in half


def test_choose_theta_prefers_a_sharp_prior_for_people_alike():
    # ten people with one order, one with its reverse: the others predict
    # each of the ten best from a sharp prior
    order = torch.tensor([[0, 1], [1, 2], [0, 2], [0, 3], [1, 3], [2, 3]])
    people = [order] * 10 + [order.flip(-1)]
    reveal = [torch.arange(6)] * 11
    theta = choose_theta(4, people, [1], reveal)
    assert theta in THETAS and theta >= 1.0


def test_each_training_person_weighs_alike_however_many_pairs_they_answered():
    # one person ranked all 3 items, one answered nothing: the prior is the
    # even mixture of that person's Mallows model and the uniform one
    theta, full = 2.0, torch.tensor([[0, 1], [1, 2], [0, 2]])
    prior = RankingPrior(3, [full, torch.zeros(0, 2, dtype=torch.long)], theta)
    U = rankings(3)
    kernel = torch.exp(-theta * reversed_answers(U, full))
    want = 0.5 * kernel / kernel.sum() + 0.5 / len(U)
    torch.testing.assert_close(prior.log_prior.exp(), want)
    with pytest.raises(ValueError, match=r"leave_out must be in \[0, 2\); got -1"):
        prior.utility(torch.tensor([[0, 1]]), leave_out=-1)
    with pytest.raises(ValueError, match="got 2"):
        prior.utility(torch.tensor([[0, 1]]), leave_out=2)
