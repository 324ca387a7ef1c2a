r"""Questions the loop does not ask again, and when it asks one again anyway.

A question *repeats* an earlier one when the two sets of options match within
:data:`REPEAT_TOL` in the max-norm of the unit cube (in any order); it holds a
*near-copy* when two of its own options are that close. What a question is
worth is measured by the information its answer carries about the utility,
``I(X)`` nats: the mutual information between the answer and the utility
under the model (Houlsby et al., 2011, "Bayesian Active Learning for
Classification and Preference Learning"; for ``q > 2`` options, the largest
over the question's pairs). :data:`MIN_INFORMATION` is the loop's unit of it:
an answer that carries less is not worth a person's time.

The rule (:class:`RepeatRule`), applied to every question the loop asks:

1. A question with two identical options is never asked.
2. A repeat or a near-copy is *resolved* when ``I < MIN_INFORMATION``; a
   resolved question is never asked.
3. A repeat ``R`` that is not resolved is asked only when no unasked question
   among the candidates is *nearly as informative*: ``I(U) ≥ max(
   MIN_INFORMATION, I(R) − MIN_INFORMATION)`` (:meth:`RepeatRule.floor`),
   i.e. ``U`` is worth asking itself and falls short of ``R`` by less than
   the least an answer must carry. Where one is, the question is the
   candidate of highest acquisition value among those.

The candidates are the ones the strategy's own search scored: every pair of a
finite space (:mod:`prefbo.loop.spaces`); the optima of the acquisition
maximiser's restarts and, where those hold no question nearly as
informative, its scrambled Sobol fallback draws
(:mod:`prefbo.loop.strategies`); Thompson sampling's draws. A repeat they
cannot replace is asked: the person is asked the same question again only
when that is what the model most needs to know.

Why resolved questions are never asked: a decisive pair (the answer is
certain) and a near-tie under noisy answers (a coin flip whatever the
utility) both carry little information; asking one again wastes the
person's answer and, for a near-tie, teaches the hyperparameters that the
person is noisier than they are. EUBO is drawn to exactly these repeats once
its mean term dominates (it keeps comparing the two best designs seen).

Why an informative repeat gives way to an unasked question nearly as
informative: an unasked question also asks about other designs or other
differences between them, a person asked the same question again may
remember the answer rather than judge afresh (the likelihood takes the two
answers as independent), and it shows the person the loop asking what it
was told. On a 200-item pool (``tests/loop/test_repeats.py``, seeds 0 and 1)
EUBO asked a pair again twice and once in 25 answers, the first time for
0.09 and 0.07 nats while unasked pairs carried up to 0.45 and 0.31.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from botorch.models.model import Model
from torch import Tensor

from prefbo.acquisition import PairwiseBALD

REPEAT_TOL = 0.02
MIN_INFORMATION = 0.05


def repeat_mask(
    X: Tensor, asked: list[Tensor] | Tensor, tol: float = REPEAT_TOL
) -> Tensor:
    r"""Which of the ``b x q x d`` questions ``X`` match an earlier one.

    Args:
        X: The questions' options, in the unit cube.
        asked: Earlier questions (``q' x d`` each, unit cube), or an
            ``a x q' x d`` tensor of them.
        tol: Max-norm tolerance per option.

    Returns:
        A ``b`` bool tensor: ``True`` where some earlier question has the
        same number of options and every option lies within ``tol`` of a
        distinct one of it.
    """
    b, q = X.shape[0], X.shape[-2]
    if isinstance(asked, Tensor):
        same = asked if asked.shape[1:] == X.shape[1:] else asked[:0]
    else:
        same = [A for A in asked if A.shape == X.shape[1:]]
    if not len(same):
        return torch.zeros(b, dtype=torch.bool, device=X.device)
    A = (same if isinstance(same, Tensor) else torch.stack(same)).to(X)  # a x q x d
    diff = X[:, None, :, None, :] - A[None, :, None, :, :]  # b x a x q x q x d
    close = diff.abs().amax(-1) <= tol  # b x a x q x q
    rows = torch.arange(q, device=X.device)
    perms = torch.tensor(
        list(itertools.permutations(range(q))), device=X.device
    )  # p x q
    matched = close[:, :, rows, perms].all(-1)  # b x a x p: option i ~ perm[i]
    return matched.flatten(1).any(-1)


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
    return bool(repeat_mask(X.unsqueeze(0), asked, tol)[0])


def question_information(bald: PairwiseBALD, X: Tensor) -> Tensor:
    r"""Nats of information the answers to the ``b x q x d`` questions ``X``
    carry (``b``): for a pair, the mutual information between its answer and
    the utility; for ``q > 2``, the largest over the question's pairs."""
    q = X.shape[-2]
    index = torch.tensor(list(itertools.combinations(range(q), 2)), device=X.device)
    pairs = X[:, index]  # b x p x 2 x d
    with torch.no_grad():
        return bald(pairs).amax(-1)


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
    return float(question_information(PairwiseBALD(model), X.unsqueeze(0))[0])


def near_copy_mask(X: Tensor, tol: float = REPEAT_TOL) -> Tensor:
    r"""Which of the ``b x q x d`` questions ``X`` hold two options within
    ``tol`` of each other (max-norm); a ``b`` bool tensor."""
    gap = (X.unsqueeze(-2) - X.unsqueeze(-3)).abs().amax(-1)  # b x q x q
    eye = torch.eye(X.shape[-2], dtype=torch.bool, device=X.device)
    return ((gap <= tol) & ~eye).flatten(1).any(-1)


def near_copies(X: Tensor, tol: float = REPEAT_TOL) -> bool:
    r"""Whether two options of the ``q x d`` question ``X`` lie within ``tol``
    of each other (max-norm)."""
    return bool(near_copy_mask(X.unsqueeze(0), tol)[0])


def identical_options(X: Tensor) -> bool:
    r"""Whether two options of the ``q x d`` question ``X`` are the same design
    (an answer about a design and itself says nothing)."""
    return near_copies(X, tol=0.0)


def not_worth_asking(model: Model, X: Tensor, asked: list[Tensor]) -> bool:
    r"""Whether the question ``X`` is one the loop must not ask: two identical
    options, or a repeat or near-copy whose answer the model no longer needs
    (rules 1 and 2 of the module docstring)."""
    return not RepeatRule(model, asked).allowed(X)


class RepeatRule:
    r"""The module docstring's rule for the questions of one model.

    Candidates are the *new* options of a question, ``num_new x d`` (or a
    batch ``b x num_new x d``); with a kept winner ``fixed`` the question is
    ``[fixed, new]``.

    Args:
        model: The model conditioned on every answer (unit-cube inputs), with
            a pairwise answer likelihood.
        asked: The questions asked so far (``q x d`` each, the model's
            coordinates).
        fixed: The ``d`` option every question starts with, or ``None``.
        avoid_resolved: ``False``: only rule 1 (identical options), as logs
            written before the rule (``PreferentialOptimizer``'s
            ``avoid_resolved``).

    Example:
        >>> rule = RepeatRule(model, asked)
        >>> new = rule.choose(candidates, values)  # b x 2 x d, b -> 2 x d
    """

    def __init__(
        self,
        model: Model,
        asked: list[Tensor],
        fixed: Tensor | None = None,
        avoid_resolved: bool = True,
    ) -> None:
        self.model = model
        self.asked = list(asked)
        self.fixed = fixed
        self.avoid_resolved = bool(avoid_resolved)
        self._bald: PairwiseBALD | None = None

    def questions(self, new: Tensor) -> Tensor:
        r"""The ``b x q x d`` questions of ``b x num_new x d`` new options."""
        if self.fixed is None:
            return new
        F = self.fixed.to(new).expand(new.shape[0], 1, new.shape[-1])  # b x 1 x d
        return torch.cat([F, new], dim=-2)

    def information(self, new: Tensor) -> Tensor:
        r"""Nats the answers to the questions of the ``b x num_new x d`` new
        options carry (``b``; see :func:`question_information`)."""
        if self._bald is None:  # the model's moments, read once
            self._bald = PairwiseBALD(self.model)
        return question_information(self._bald, self.questions(new))

    def repeat_mask(self, new: Tensor) -> Tensor:
        r"""Which of the ``b x num_new x d`` candidates repeat an asked
        question (``b``)."""
        return repeat_mask(self.questions(new), self.asked)

    def is_repeat(self, new: Tensor) -> bool:
        r"""Whether the ``num_new x d`` new options repeat an asked question."""
        return bool(self.repeat_mask(new.unsqueeze(0))[0])

    def allowed_mask(self, new: Tensor) -> Tensor:
        r"""Which of the ``b x num_new x d`` candidates rules 1 and 2 let the
        loop ask (``b``): no identical options, and no resolved repeat or
        near-copy."""
        X = self.questions(new)  # b x q x d
        ok = ~near_copy_mask(X, tol=0.0)
        if not self.avoid_resolved:
            return ok
        check = ok & (repeat_mask(X, self.asked) | near_copy_mask(X))
        if bool(check.any()):
            informs = self.information(new[check]) >= MIN_INFORMATION
            ok[check.nonzero().reshape(-1)] = informs
        return ok

    def allowed(self, new: Tensor) -> bool:
        r"""Whether rules 1 and 2 let the loop ask the ``num_new x d`` new
        options."""
        return bool(self.allowed_mask(new.unsqueeze(0))[0])

    def floor(self, new: Tensor) -> float:
        r"""The least information an unasked question needs to be asked
        instead of the repeat ``new`` (``num_new x d``): ``max(MIN_INFORMATION,
        I(new) - MIN_INFORMATION)`` nats (rule 3)."""
        info = float(self.information(new.unsqueeze(0))[0])
        return max(MIN_INFORMATION, info - MIN_INFORMATION)

    def choose(
        self,
        candidates: Tensor,
        values: Tensor,
        more: Callable[[], tuple[Tensor, Tensor]] | None = None,
    ) -> Tensor | None:
        r"""The candidate the loop asks, by the rule.

        Args:
            candidates: ``b x num_new x d`` new options.
            values: ``b`` acquisition values (higher is better).
            more: Further candidates and their values, scored only if the
                best allowed candidate is a repeat that none of
                ``candidates`` replaces (e.g. a Sobol fallback's draws).

        Returns:
            The allowed candidate of highest value (rules 1 and 2); if it is a
            repeat, the candidate of highest value among the unasked ones
            nearly as informative (rule 3) where there is one. ``None`` if no
            candidate is allowed.
        """
        order = values.argsort(descending=True)
        candidates = candidates[order]
        allowed = self.allowed_mask(candidates)
        if not bool(allowed.any()):
            return None
        best = candidates[int(allowed.nonzero()[0])]
        if not self.avoid_resolved or not self.is_repeat(best):
            return best
        floor = self.floor(best)
        found = self.nearly_as_informative(candidates, floor)
        if found is None and more is not None:
            extra, extra_values = more()
            found = self.nearly_as_informative(
                extra[extra_values.argsort(descending=True)], floor
            )
        return best if found is None else found

    def nearly_as_informative(self, candidates: Tensor, floor: float) -> Tensor | None:
        r"""The first of the ``b x num_new x d`` candidates (best first) that
        is no repeat, has distinct options and carries at least ``floor``
        nats, or ``None``."""
        fresh = ~self.repeat_mask(candidates)
        fresh &= ~near_copy_mask(self.questions(candidates), tol=0.0)
        if not bool(fresh.any()):
            return None
        index = fresh.nonzero().reshape(-1)
        enough = self.information(candidates[index]) >= floor
        if not bool(enough.any()):
            return None
        return candidates[int(index[int(enough.nonzero()[0])])]

    def asked_index_pairs(self, grid: Tensor) -> Tensor:
        r"""The pairs of rows of the ``N x d`` ``grid`` that repeat an asked
        pair: a ``k x 2`` long tensor (for
        :func:`~prefbo.acquisition.pool_eubo.best_pool_pair`'s ``exclude``)."""
        found = [torch.zeros(0, 2, dtype=torch.long, device=grid.device)]
        for A in self.asked:
            if A.shape[0] != 2:
                continue
            near = (grid[:, None, :] - A.to(grid)).abs().amax(-1) <= REPEAT_TOL
            a, b = near[:, 0].nonzero().reshape(-1), near[:, 1].nonzero().reshape(-1)
            found.append(torch.cartesian_prod(a, b).reshape(-1, 2))
        return torch.cat(found)
