r"""Each participant's answered questions, read from the database as they
change: only the new ones.

A worker of the collaborative kind tells its model every participant's
answers in force (:meth:`~prefbo.serve.collaborative.CollaborativeEngine.update`).
Reading all of a participant's answered questions at each of their answers
costs a read and a decode that grow with their answers, every round: by
minute ten of a study at people's pace, more than the rest of the round.
:class:`AnsweredRows` keeps the rows it read and, for the participants
whose progress moved, reads only each answer's key
(:meth:`~prefbo.serve.store.Store.answered_keys`: ``seq``, question id,
time answered), keeps the rows whose keys are unchanged (a prefix: an undo
withdraws the latest answer only) and reads the rest
(:meth:`~prefbo.serve.store.Store.answered_from`).
:func:`told_answers` turns those rows into the model's answers, with the
virtual comparisons each question carried.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from prefbo.serve.rows import QuestionRow
from prefbo.serve.store import Store


class AnsweredRows:
    r"""Participants' answered questions as last read (see the module
    docstring).

    Args:
        store: The study's database.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.rows: dict[int, list[QuestionRow]] = {}

    def read(self, pids: list[int]) -> dict[int, list[QuestionRow]]:
        r"""The answered questions of each of ``pids`` now, by ``seq`` (as
        :meth:`~prefbo.serve.store.Store.answered` reads them), from the
        rows read before and those new since."""
        keys = self.store.answered_keys(pids)
        starts: dict[int, int] = {}
        for pid in pids:
            have, now = self.rows.get(pid, []), keys.get(pid, [])
            same = 0
            for row, key in zip(have, now, strict=False):
                if (row.seq, row.id, row.answered_at) != key:
                    break
                same += 1
            self.rows[pid] = have[:same]
            if same < len(now):
                starts[pid] = now[same][0]
        for row in self.store.answered_from(starts):
            self.rows[row.participant_id].append(row)
        return {pid: self.rows[pid] for pid in pids}


def points(values: list | None) -> Tensor | None:
    r"""Model points as a row stores them (nested lists: a question's
    options, its virtual comparisons) as a float64 tensor; ``None`` stays
    ``None``."""
    return None if values is None else torch.tensor(values, dtype=torch.float64)


class Told(NamedTuple):
    r"""One told answer: the question's id with the time it was answered
    (``key``: an undo and a new answer to the same question is another
    answer), the winner's and the loser's design (each ``d``), and the
    ``k x 2 x d`` virtual comparisons ``[inner, face]`` the question
    carried (:mod:`prefbo.loop.boundary`), or ``None``."""

    key: tuple[str, float]
    winner: Tensor
    loser: Tensor
    virtual: Tensor | None = None

    def comparisons(self) -> tuple[Tensor, Tensor]:
        r"""The ``m x d`` winners and losers a model observes for this
        answer: the virtual comparisons first (as the loop logs them), then
        the answer."""
        winner, loser = self.winner.unsqueeze(0), self.loser.unsqueeze(0)
        if self.virtual is None:
            return winner, loser
        return (
            torch.cat([self.virtual[:, 0], winner]),
            torch.cat([self.virtual[:, 1], loser]),
        )


def told_answers(rows: list[QuestionRow], before: Sequence[Told] = ()) -> list[Told]:
    r"""A participant's answered questions (by ``seq``) as the model's
    answers: "no preference" ones are kept out (a pairwise model has no
    tie). The answers of ``before`` (those told from an earlier read) are
    reused for as long as their keys match."""
    out: list[Told] = []
    for r in rows:
        if r.no_preference or r.choice is None:
            continue
        n = len(out)
        if n < len(before) and before[n].key == (r.id, r.answered_at):
            out.append(before[n])
            continue
        X = points(r.options)  # 2 x d
        virtual = points(r.virtual_comparisons)
        out.append(Told((r.id, r.answered_at), X[r.choice], X[1 - r.choice], virtual))
    return out
