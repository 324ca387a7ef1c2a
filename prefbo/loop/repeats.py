r"""Questions the loop does not ask: resolved repeats and near-copies.

A question *repeats* an earlier one when the two sets of options match within
:data:`REPEAT_TOL` in the max-norm of the unit cube (in any order); it holds a
*near-copy* when two of its own options are that close. Such a question is
worth asking only while the model is still uncertain about its answer; it is
*resolved* when the answer carries less than :data:`MIN_INFORMATION` nats
of information about the utility (the mutual information between the answer
and the utility under the model, Houlsby et al., 2011, "Bayesian Active
Learning for Classification and Preference Learning"; for ``q > 2`` options,
the largest over the question's pairs).

Both kinds of resolved pair carry little information: a decisive pair (the
answer is certain) and a near-tie under noisy answers (the answer is a coin
flip whatever the utility). Asking such a pair again wastes the person's
answer and, for a near-tie, teaches the hyperparameters that the person is
noisier than they are. EUBO is drawn to exactly these repeats once its mean
term dominates (it keeps comparing the two best designs seen), which
:class:`~prefbo.loop.strategies.Strategy` implementations avoid through
:attr:`~prefbo.loop.strategies.Question.allowed`.
"""

from __future__ import annotations

import itertools

import torch
from botorch.models.model import Model
from torch import Tensor

from prefbo.acquisition import PairwiseBALD

REPEAT_TOL = 0.02
MIN_INFORMATION = 0.05


def repeats(X: Tensor, asked: list[Tensor], tol: float = REPEAT_TOL) -> bool:
    r"""Whether the ``q x d`` question ``X`` matches an earlier one.

    Args:
        X: The options, in the unit cube.
        asked: Earlier questions (``q' x d`` each, unit cube).
        tol: Max-norm tolerance per option.

    Returns:
        ``True`` if some earlier question has the same number of options and
        every option of ``X`` lies within ``tol`` of a distinct one of it.
    """
    same = [A for A in asked if A.shape == X.shape]
    if not same:
        return False
    A = torch.stack(same)  # a x q x d
    close = (X.unsqueeze(-2) - A.unsqueeze(-3)).abs().amax(-1) <= tol  # a x q x q
    rows = torch.arange(X.shape[0])
    perms = torch.tensor(list(itertools.permutations(range(X.shape[0]))))  # p x q
    matched = close[:, rows, perms].all(-1)  # a x p: option i ~ option perm[i]
    return bool(matched.any())


def answer_information(model: Model, X: Tensor) -> float:
    r"""Nats of information the answer to the question ``X`` carries.

    Args:
        model: The loop's model (unit-cube inputs), with a pairwise answer
            likelihood.
        X: ``q x d`` options.

    Returns:
        The mutual information between a pair's answer and the utility; for
        ``q > 2``, the largest over the question's pairs.
    """
    pairs = torch.stack(
        [X[[i, j]] for i, j in itertools.combinations(range(X.shape[0]), 2)]
    )  # p x 2 x d
    with torch.no_grad():
        return float(PairwiseBALD(model)(pairs).max())


def near_copies(X: Tensor, tol: float = REPEAT_TOL) -> bool:
    r"""Whether two options of the ``q x d`` question ``X`` lie within ``tol``
    of each other (max-norm)."""
    gap = (X.unsqueeze(-2) - X.unsqueeze(-3)).abs().amax(-1)  # q x q
    gap.fill_diagonal_(float("inf"))
    return bool((gap <= tol).any())


def identical_options(X: Tensor) -> bool:
    r"""Whether two options of the ``q x d`` question ``X`` are the same design
    (an answer about a design and itself says nothing)."""
    return near_copies(X, tol=0.0)


def not_worth_asking(model: Model, X: Tensor, asked: list[Tensor]) -> bool:
    r"""Whether the question ``X`` is one the loop must not ask: two identical
    options, or a repeat or near-copy whose answer the model no longer needs
    (see the module docstring)."""
    if identical_options(X):
        return True
    if not (repeats(X, asked) or near_copies(X)):
        return False
    return answer_information(model, X) < MIN_INFORMATION
