r"""The queries of the workers' questions: who waits for one, and storing
the questions made.

Per participant, questions ``0 .. a-1`` are answered (``a`` answers),
question ``a`` is on screen or queued, and at most one more, ``a + 1``,
waits unshown (:mod:`prefbo.serve.flow`). A worker's question is stored
unless one is there already (the unique ``(participant, seq)``), and, where
a lease ``holder`` is named, only while that holder holds the participant's
lease (:mod:`prefbo.serve.leases`), in the same transaction.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, insert, select, tuple_
from sqlalchemy.exc import IntegrityError

from prefbo.serve.leases import renew_for_storing
from prefbo.serve.rows import MadeQuestion, Needing, QuestionRow
from prefbo.serve.schema import participants, questions


def needing_questions(
    conn: Connection, most: int, only: Iterable[int] | None = None
) -> dict[int, Needing]:
    r"""Participants (of ``only``, default all) without a waiting question
    whose next question's ``seq`` is below ``most`` (the answers a
    participant gives), by id.

    Two queries whatever the study's size and however many answers each
    gave: each active participant's answer count ``a`` (their progress,
    kept on their row), then their questions ``a`` and ``a + 1``."""
    query = select(participants.c.id, participants.c.answers).where(
        participants.c.finished_at.is_(None)
    )
    if only is not None:
        query = query.where(participants.c.id.in_(list(only)))
    answers = {int(r.id): int(r.answers) for r in conn.execute(query)}
    at = [(pid, a + k) for pid, a in answers.items() for k in (0, 1)]
    rows = (
        conn.execute(
            select(questions).where(
                tuple_(questions.c.participant_id, questions.c.seq).in_(at)
            )
        ).all()
        if at
        else []
    )
    current = {r.participant_id: r for r in rows if r.seq == answers[r.participant_id]}
    after = {r.participant_id for r in rows if r.seq == answers[r.participant_id] + 1}
    out: dict[int, Needing] = {}
    for pid, a in answers.items():
        row = current.get(pid)
        if pid in after or (row is not None and row.shown_at is None):
            continue  # question a + 1, or an unshown question a, waits
        if row is None:
            needing = Needing(seq=a, shown=None, answers=a, shown_at=float("inf"))
        else:
            shown = QuestionRow.from_db(row)
            needing = Needing(
                seq=a + 1,
                shown=shown.options,
                answers=a,
                shown_at=shown.shown_at,
                shown_virtual=shown.virtual_comparisons,
            )
        if needing.seq < most:
            out[pid] = needing
    return out


def store_questions(
    conn: Connection,
    made: list[MadeQuestion],
    holder: str | None = None,
    lease_seconds: float = 0.0,
) -> int:
    r"""Store the questions ``made`` in ``conn``'s transaction: each unless
    the participant has answered or undone since (their answer count is no
    longer the one it was made at), a question ``seq`` is there already, or
    (``holder`` named) ``holder`` no longer holds the participant's lease
    (held ones are renewed for ``lease_seconds``); returns how many were
    stored."""
    if not made:
        return 0
    pids = sorted({m.participant_id for m in made})
    if holder is not None:  # the write first: the lock, then the reads
        held = renew_for_storing(conn, holder, pids, lease_seconds, time.time())
        made = [m for m in made if m.participant_id in held]
        if not made:
            return 0
    counts = answer_counts(conn, pids)
    wanted = [(m.participant_id, m.seq) for m in made]
    taken = {
        (r.participant_id, r.seq)
        for r in conn.execute(
            select(questions.c.participant_id, questions.c.seq).where(
                tuple_(questions.c.participant_id, questions.c.seq).in_(wanted)
            )
        )
    }
    stored = 0
    for m in made:
        if counts.get(m.participant_id, 0) != m.based_on:
            continue
        if (m.participant_id, m.seq) in taken:
            continue
        try:
            with conn.begin_nested():  # another process's insert first
                conn.execute(_model_question(m))
            stored += 1
            taken.add((m.participant_id, m.seq))
        except IntegrityError:
            pass
    return stored


def answer_counts(conn: Connection, pids: list[int]) -> dict[int, int]:
    r"""The answer counts of participants ``pids``, read under a share lock
    that holds until ``conn``'s transaction ends (PostgreSQL; SQLite's
    write lock is the transaction's already): a participant's step, which
    claims their row first, waits until the questions checked against
    these counts are stored."""
    rows = conn.execute(
        select(participants.c.id, participants.c.answers)
        .where(participants.c.id.in_(pids))
        .with_for_update(read=True)
    )
    return {int(r.id): int(r.answers) for r in rows}


def store_question(conn: Connection, made: MadeQuestion) -> None:
    r"""Store a worker's question (in ``conn``'s transaction).

    Raises:
        IntegrityError: A question ``made.seq`` of the participant is there
            already.
    """
    conn.execute(_model_question(made))


def has_question(conn: Connection, pid: int) -> bool:
    r"""Whether participant ``pid`` has a question."""
    mine = select(questions.c.id).where(questions.c.participant_id == pid)
    return conn.execute(mine.limit(1)).first() is not None


def any_model_question(conn: Connection) -> bool:
    r"""Whether a worker has stored a question in this study."""
    made = select(questions.c.id).where(questions.c.origin == "model")
    return conn.execute(made.limit(1)).first() is not None


def _model_question(m: MadeQuestion) -> Any:
    r"""The insert of a worker's question."""
    return insert(questions).values(
        id=uuid.uuid4().hex,
        participant_id=m.participant_id,
        seq=m.seq,
        options=json.dumps(m.options),
        origin="model",
        based_on=m.based_on,
        created_at=time.time(),
        no_preference=False,
        virtual_comparisons=None if m.virtual is None else json.dumps(m.virtual),
    )
