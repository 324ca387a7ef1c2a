r"""The queries of one participant's step (:mod:`prefbo.serve.flow`'s
answer, undo, replacement or showing), all inside one transaction.

:meth:`Store.participant <prefbo.serve.store.Store.participant>` opens the
transaction and gives a :class:`ParticipantSteps`, which first claims the
participant's row (:meth:`ParticipantSteps.claim`): the steps of one
participant (two tabs, a double click) then run one after the other, and
what a step reads is what it writes on. What the step decides (which
question to show, whether an answer fits) is the flow's. A write that
found its row changed all the same (an answer given already) says so
(``False``) instead of writing, and the participant's answer count is
checked where it changes (:class:`Raced` if it moved).
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple

from sqlalchemy import Connection, and_, delete, func, insert, select, update

from prefbo.serve.rows import QuestionRow
from prefbo.serve.schema import events, participants, questions


class Raced(Exception):
    r"""Another process wrote first: a question ``seq`` stored at the same
    moment (by a worker), or the participant's answer count changed since
    the step read it; the step may be tried again."""


class Window(NamedTuple):
    r"""A participant's progress and the questions a step needs: their
    answer count ``answers`` (``a``) and their questions ``a - 2 .. a + 1``
    (the one before the latest answered, the latest answered, the current
    one, the one waiting), by ``seq``: a step's cost does not grow with the
    answers given."""

    answers: int
    rows: list[QuestionRow]

    def at(self, seq: int) -> QuestionRow | None:
        r"""Question ``seq`` of the window, or ``None``."""
        return next((r for r in self.rows if r.seq == seq), None)

    def find(self, question_id: str) -> QuestionRow | None:
        r"""Question ``question_id`` if it is in the window, or ``None``."""
        return next((r for r in self.rows if r.id == question_id), None)


class ParticipantSteps:
    r"""Participant ``pid``'s queries within the open transaction ``conn``.

    Args:
        conn: The step's transaction.
        pid: The participant's id.
    """

    def __init__(self, conn: Connection, pid: int) -> None:
        self.conn = conn
        self.pid = pid

    def claim(self) -> None:
        r"""Take the participant's row for this transaction (a write that
        changes nothing: PostgreSQL locks the row until the commit, SQLite
        takes its write lock), before the step reads anything. Every step
        takes the participant's row first, then their questions; a worker
        storing questions reads the rows it checks under a share lock."""
        self.conn.execute(
            update(participants)
            .where(participants.c.id == self.pid)
            .values(answers=participants.c.answers)
        )

    def questions(self) -> list[QuestionRow]:
        r"""The participant's questions by ``seq``."""
        rows = self.conn.execute(
            select(questions)
            .where(questions.c.participant_id == self.pid)
            .order_by(questions.c.seq)
        ).all()
        return [QuestionRow.from_db(r) for r in rows]

    def window(self) -> Window:
        r"""The participant's progress with the questions around it (one
        statement: one consistent read)."""
        a = participants.c.answers
        near = and_(
            questions.c.participant_id == participants.c.id,
            questions.c.seq.between(a - 2, a + 1),
        )
        rows = self.conn.execute(
            select(a.label("progress"), *questions.c)
            .select_from(participants.outerjoin(questions, near))
            .where(participants.c.id == self.pid)
            .order_by(questions.c.seq)
        ).all()
        if not rows:
            raise KeyError(f"no participant {self.pid}")
        names = [c.name for c in questions.c]
        return Window(
            int(rows[0].progress),
            [
                QuestionRow.from_columns({k: r._mapping[k] for k in names})
                for r in rows
                if r.id is not None
            ],
        )

    def question(self, question_id: str) -> QuestionRow | None:
        r"""The participant's question ``question_id``, or ``None``."""
        row = self.conn.execute(
            select(questions).where(
                and_(
                    questions.c.id == question_id,
                    questions.c.participant_id == self.pid,
                )
            )
        ).first()
        return None if row is None else QuestionRow.from_db(row)

    def add_question(self, question: QuestionRow) -> None:
        r"""Store ``question`` (one of this participant's)."""
        values = question.as_dict()
        values["options"] = json.dumps(question.options)
        virtual = question.virtual_comparisons
        values["virtual_comparisons"] = None if virtual is None else json.dumps(virtual)
        self.conn.execute(insert(questions).values(**values))

    def show(self, question_id: str, at: float) -> None:
        r"""Mark question ``question_id`` shown at ``at``."""
        self.conn.execute(
            update(questions).where(questions.c.id == question_id).values(shown_at=at)
        )

    def record_answer(
        self,
        question_id: str,
        choice: int | None,
        at: float,
        answers: int | None = None,
    ) -> bool:
        r"""Answer question ``question_id`` with ``choice`` (``None``: no
        preference) at ``at``, unless it is answered; returns whether it was
        answered now (the participant's progress then counts it).

        Raises:
            Raced: The participant's answer count is no longer ``answers``
                (``None``: not checked): another step (an undo in another
                tab) changed it since it was read.
        """
        done = self.conn.execute(
            update(questions)
            .where(
                and_(questions.c.id == question_id, questions.c.answered_at.is_(None))
            )
            .values(answered_at=at, choice=choice, no_preference=choice is None)
        )
        if done.rowcount != 1:
            return False
        self._progress(+1, at, answers)
        return True

    def withdraw(
        self, question_id: str, at: float | None = None, answers: int | None = None
    ) -> bool:
        r"""Withdraw the answer to question ``question_id`` at ``at`` (default
        now), unless it holds none; returns whether one was withdrawn now
        (the participant's progress then no longer counts it).

        Raises:
            Raced: As :meth:`record_answer`'s.
        """
        done = self.conn.execute(
            update(questions)
            .where(
                and_(questions.c.id == question_id, questions.c.answered_at.isnot(None))
            )
            .values(answered_at=None, choice=None, no_preference=False)
        )
        if done.rowcount != 1:
            return False
        self._progress(-1, time.time() if at is None else at, answers)
        return True

    def _progress(self, change: int, at: float, answers: int | None = None) -> None:
        r"""Count ``change`` more answers of the participant, changed at
        ``at``, where their count is still ``answers`` (``None``: whatever
        it is)."""
        mine = participants.c.id == self.pid
        if answers is not None:
            mine = and_(mine, participants.c.answers == answers)
        done = self.conn.execute(
            update(participants)
            .where(mine)
            .values(answers=participants.c.answers + change, changed_at=at)
        )
        if done.rowcount != 1:
            raise Raced(
                f"participant {self.pid}'s answers changed from {answers} meanwhile"
            )

    def hide(self, seq: int) -> None:
        r"""Mark question ``seq`` unshown (it waits again)."""
        self.conn.execute(
            update(questions)
            .where(and_(questions.c.participant_id == self.pid, questions.c.seq == seq))
            .values(shown_at=None)
        )

    def drop_from(self, seq: int) -> None:
        r"""Delete the questions from ``seq`` on."""
        self.conn.execute(
            delete(questions).where(
                and_(questions.c.participant_id == self.pid, questions.c.seq >= seq)
            )
        )

    def set_finished(self, at: float | None) -> None:
        r"""Mark the participant finished at ``at`` (``None``: not finished)."""
        self.conn.execute(
            update(participants)
            .where(participants.c.id == self.pid)
            .values(finished_at=at)
        )

    def count_events(self, kind: str) -> int:
        r"""How many events of ``kind`` the participant's trail holds."""
        return self.conn.execute(
            select(func.count())
            .select_from(events)
            .where(and_(events.c.participant_id == self.pid, events.c.kind == kind))
        ).scalar_one()

    def log(
        self,
        question_id: str | None,
        kind: str,
        data: dict[str, Any],
        at: float | None = None,
    ) -> None:
        r"""Append one event to the participant's audit trail."""
        log_event(self.conn, self.pid, question_id, kind, data, at)


def log_event(
    conn: Connection,
    pid: int,
    question_id: str | None,
    kind: str,
    data: dict[str, Any],
    at: float | None = None,
) -> None:
    r"""Append one event to the audit trail (inside ``conn``'s transaction)."""
    conn.execute(
        insert(events).values(
            participant_id=pid,
            question_id=question_id,
            kind=kind,
            at=time.time() if at is None else at,
            data=json.dumps(data),
        )
    )
