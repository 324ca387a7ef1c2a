r"""Everyone's answers, gathered by person.

An :class:`AnswerTable` holds ``(person, winner, loser)`` rows (winner and
loser are rows of the model's design table) and hands out the answers of a
set of people padded to one length, for the batched per-person updates and
the minibatches of a fit. Answers added one at a time (a live study) wait in
a per-person list until the next batch gather folds them in, so adding an
answer and reading one person's answers cost no more than that person's.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class PaddedAnswers(NamedTuple):
    r"""The answers of ``B`` people, padded.

    Attributes:
        winners: ``B x A`` design rows of the preferred options.
        losers: ``B x A`` design rows of the others.
        mask: ``B x A`` bool, True for real answers (``A`` the most any of
            the ``B`` gave; padding rows point at design 0).
    """

    winners: Tensor
    losers: Tensor
    mask: Tensor


class AnswerTable:
    r"""``(person, winner, loser)`` rows, gathered by person.

    Args:
        answers: ``m x 3`` long rows.
        num_people: People known (ids ``0..num_people-1``).
    """

    def __init__(self, answers: Tensor, num_people: int) -> None:
        self.num_people = num_people
        self._rows = answers.long()
        self._pending: dict[int, list[tuple[int, int]]] = {}
        self._index()

    def _index(self) -> None:
        person = self._rows[:, 0]
        self._order = torch.argsort(person, stable=True)
        self._counts = torch.bincount(person, minlength=self.num_people)
        self._starts = torch.cumsum(self._counts, 0) - self._counts

    def _fold(self) -> None:
        if not self._pending:
            return
        new = [(p, w, lo) for p, pairs in self._pending.items() for (w, lo) in pairs]
        extra = torch.tensor(new, dtype=torch.long, device=self._rows.device)
        self._rows = torch.cat([self._rows, extra])
        self._pending = {}
        self._index()

    @property
    def rows(self) -> Tensor:
        r"""All ``m x 3`` rows."""
        self._fold()
        return self._rows

    def counts(self) -> Tensor:
        r"""Answers per person (``num_people``)."""
        self._fold()
        return self._counts

    def add_person(self) -> int:
        r"""Make room for one more person; returns their id."""
        self.num_people += 1
        self._counts = torch.cat([self._counts, self._counts.new_zeros(1)])
        self._starts = torch.cat([self._starts, self._starts.new_zeros(1)])
        return self.num_people - 1

    def add(self, person: int, winners: Tensor, losers: Tensor) -> None:
        r"""Append one person's answers (``k`` winner and loser rows)."""
        self._pending.setdefault(person, []).extend(
            zip(winners.tolist(), losers.tolist(), strict=True)
        )

    def forget(self, person: int) -> None:
        r"""Drop every answer of ``person``."""
        self._fold()
        self._rows = self._rows[self._rows[:, 0] != person]
        self._index()

    def gather(self, people: Tensor) -> PaddedAnswers:
        r"""The answers of ``B`` people (a long tensor of ids), padded."""
        if len(people) == 1 and int(people[0]) in self._pending:
            return self._one(int(people[0]))
        self._fold()
        counts = self._counts[people]  # B
        A = int(counts.max()) if len(people) else 0
        slots = torch.arange(A, device=people.device)
        mask = slots < counts.unsqueeze(-1)  # B x A
        where = (self._starts[people].unsqueeze(-1) + slots).clamp_max(
            max(len(self._order) - 1, 0)
        )
        rows = self._rows[self._order[where]] if len(self._order) else None
        if rows is None:
            empty = torch.zeros(len(people), 0, dtype=torch.long)
            return PaddedAnswers(empty, empty, empty.bool())
        winners = torch.where(mask, rows[..., 1], 0)
        losers = torch.where(mask, rows[..., 2], 0)
        return PaddedAnswers(winners, losers, mask)

    def _one(self, person: int) -> PaddedAnswers:
        start, count = int(self._starts[person]), int(self._counts[person])
        old = self._rows[self._order[start : start + count], 1:]
        new = torch.tensor(self._pending[person], dtype=torch.long).reshape(-1, 2)
        both = torch.cat([old, new.to(old.device)])
        mask = torch.ones(1, both.shape[0], dtype=torch.bool, device=old.device)
        return PaddedAnswers(both[:, 0].unsqueeze(0), both[:, 1].unsqueeze(0), mask)
