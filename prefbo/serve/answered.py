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
"""

from __future__ import annotations

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
