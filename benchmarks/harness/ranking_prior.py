r"""A reference for held-out people who rank a few items: Bayes' rule with the
training people's rankings as the prior.

A person's answers are taken as a ranking ``π`` of the ``n`` items (every
answer ``a ≻ b`` puts ``a`` above ``b``). The prior over ``π`` is an even
mixture of Mallows-like models, one centred on each training person (Mallows
1957; a kernel density over rankings, as in Lebanon & Mao 2008):

.. math::
    p(\pi) = \frac{1}{Q} \sum_q \frac{\exp(-\theta\, d(\pi, q))}{Z_q},

``d(π, q)`` the number of person ``q``'s answers that ``π`` reverses
(Kendall's distance where ``q`` answered every pair) and ``Z_q`` the sum of
the numerator over every ranking (Mallows' normaliser where ``q`` answered
every pair), so each training person weighs alike however many pairs they
answered. A held-out person's revealed answers keep the rankings they do
not contradict (noiseless answers, as consistent rankings are); a pair is
predicted by the posterior mean of each item's utility, minus its place.
The spread ``θ`` is chosen for each training set by leave-one-out over its
people (:func:`choose_theta`), before any held-out person is seen.

Every ranking is enumerated: ``n!`` of them, so the reference is for a few
items (at most :data:`MAX_ITEMS`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import Tensor

#: The most items :class:`RankingPrior` enumerates the rankings of (8! = 40,320).
MAX_ITEMS = 8
#: The spreads :func:`choose_theta` tries.
THETAS = (0.25, 0.5, 1.0, 2.0, 4.0)


def rankings(n: int) -> Tensor:
    r"""The ``n! x n`` utilities of every ranking of ``n`` items: item ``i``'s
    utility is minus its place (``0`` for the first)."""
    if not 1 <= n <= MAX_ITEMS:
        raise ValueError(f"n must be in [1, {MAX_ITEMS}]; got {n}.")
    orders = torch.tensor(list(itertools.permutations(range(n))))  # n! x n
    places = torch.empty_like(orders)
    places.scatter_(1, orders, torch.arange(n).expand_as(orders).contiguous())
    return -places.double()


def reversed_answers(utilities: Tensor, answers: Tensor) -> Tensor:
    r"""How many of ``m x 2`` answers (winner, loser) each of the ``R x n``
    rankings' ``utilities`` reverses (``R``)."""
    if len(answers) == 0:
        return utilities.new_zeros(utilities.shape[0])
    w, l = answers.unbind(-1)
    return (utilities[:, w] < utilities[:, l]).sum(-1).double()


class RankingPrior:
    r"""The training people's rankings as a prior (see the module docstring).

    Args:
        n: The number of items.
        people: Each training person's ``m_q x 2`` answers (winner, loser).
        theta: The spread ``θ ≥ 0`` (``0``: every ranking alike).
    """

    def __init__(self, n: int, people: Sequence[Tensor], theta: float) -> None:
        self.utilities = rankings(n)
        self.distances = torch.stack(  # R x Q
            [reversed_answers(self.utilities, a) for a in people], -1
        )
        self.theta = theta
        # each component normalised over the rankings: R x Q log-densities
        log_k = -theta * self.distances
        self.components = log_k - torch.logsumexp(log_k, 0)
        Q = self.components.shape[-1]
        self.log_prior = torch.logsumexp(self.components, -1) - math.log(Q)  # R

    def utility(self, revealed: Tensor, leave_out: int | None = None) -> Tensor:
        r"""The posterior mean utility (``n``) of a person whose ``k x 2``
        answers are ``revealed``; ``leave_out``: a training person left out of
        the prior.

        Raises:
            ValueError: No ranking agrees with every revealed answer.
        """
        log_prior = self.log_prior
        if leave_out is not None:
            Q = self.components.shape[-1]
            if not 0 <= leave_out < Q:
                raise ValueError(f"leave_out must be in [0, {Q}); got {leave_out}.")
            keep = torch.arange(Q) != leave_out
            log_prior = torch.logsumexp(self.components[:, keep], -1)
            log_prior = log_prior - math.log(max(Q - 1, 1))
        agree = reversed_answers(self.utilities, revealed) == 0
        if not bool(agree.any()):
            raise ValueError("no ranking agrees with every revealed answer.")
        weights = torch.softmax(log_prior.masked_fill(~agree, -math.inf), 0)
        return weights @ self.utilities


def choose_theta(
    n: int,
    people: Sequence[Tensor],
    ks: Sequence[int],
    order: Sequence[Tensor],
    thetas: Sequence[float] = THETAS,
) -> float:
    r"""The spread of :data:`THETAS` whose prior, built from the others,
    predicts each training person's unrevealed answers best: mean accuracy
    (a tie ½) over the people and the ``ks`` above 0, person ``q`` revealing
    the first ``k`` of their answers in ``order[q]`` (the first of the best
    on a tie)."""
    best, best_score = thetas[0], -math.inf
    for theta in thetas:
        prior = RankingPrior(n, people, theta)
        scores = []
        for q, answers in enumerate(people):
            for k in ks:
                if not 0 < k < len(answers):
                    continue
                shown, rest = answers[order[q][:k]], answers[order[q][k:]]
                mean = prior.utility(shown, leave_out=q)
                gap = mean[rest[:, 0]] - mean[rest[:, 1]]
                right = torch.where(gap == 0, 0.5, (gap > 0).double())
                scores.append(float(right.mean()))
        score = sum(scores) / max(len(scores), 1)
        if score > best_score:
            best, best_score = theta, score
    return best
