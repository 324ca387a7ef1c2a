r"""The database of a served study: every query of the server and its
workers, one transaction a write.

The tables and their migrations are :mod:`prefbo.serve.schema`'s. Every
write is one transaction: an answer and the next question's showing commit
together before the reply is sent, so a server killed at any moment loses no
acknowledged answer.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from prefbo.serve.schema import (
    BUSY_SECONDS,
    HEALTH_KEY,
    events,
    meta,
    migrate,
    open_engine,
    participants,
    questions,
    snapshots,
)

#: Seconds the health probe waits for a lock held elsewhere.
PROBE_SECONDS = 2.0
#: The ``meta`` row of the collaborative model's fitted shared part.
MODEL_KEY = "collaborative_model"


def token_hash(token: str) -> str:
    r"""The stored form of a participant's token."""
    return hashlib.sha256(token.encode()).hexdigest()


@contextmanager
def _waiting_at_most(conn: Connection, seconds: float) -> Iterator[None]:
    r"""Within the block, ``conn`` waits at most ``seconds`` for a lock held
    elsewhere (SQLite: its busy timeout, set back to :data:`BUSY_SECONDS`
    on leaving; PostgreSQL: ``lock_timeout``, for this transaction)."""
    ms = int(seconds * 1000)
    sqlite = conn.dialect.name == "sqlite"
    if sqlite:
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {ms}")
    elif conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = {ms}")
    try:
        yield
    finally:
        if sqlite:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(BUSY_SECONDS * 1000)}")


class StudyFull(Exception):
    r"""A join past the study's ``max_participants``."""


class Store:
    r"""The study's database.

    Args:
        url: An SQLAlchemy URL (``sqlite:///study.db``, ``postgresql://...``).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = open_engine(url)
        migrate(self.engine)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        r"""One transaction, committed on leaving (rolled back on an error)."""
        with self.engine.begin() as conn:
            yield conn

    # -------------------------------------------------------------- study
    def study_source(self) -> dict[str, Any] | None:
        r"""The study stored at creation, or ``None`` in a new database."""
        with self.engine.connect() as conn:
            value = conn.execute(
                select(meta.c.value).where(meta.c.key == "study")
            ).scalar()
        return None if value is None else json.loads(value)

    def set_study_source(self, source: dict[str, Any]) -> None:
        r"""Store the study (once: a database serves one study)."""
        with self.transaction() as conn:
            conn.execute(insert(meta).values(key="study", value=json.dumps(source)))

    def model_state(self) -> str | None:
        r"""The collaborative model's fitted shared part as a worker saved it
        (:meth:`set_model_state`), or ``None``."""
        with self.engine.connect() as conn:
            return conn.execute(
                select(meta.c.value).where(meta.c.key == MODEL_KEY)
            ).scalar()

    def set_model_state(self, value: str) -> None:
        r"""Save the collaborative model's fitted shared part (text), so a
        restarted worker starts from it instead of fitting from scratch."""
        with self.transaction() as conn:
            done = conn.execute(
                update(meta).where(meta.c.key == MODEL_KEY).values(value=value)
            )
            if not done.rowcount:
                conn.execute(insert(meta).values(key=MODEL_KEY, value=value))

    def secret(self, key: str, make: Any) -> str:
        r"""The secret ``key`` of ``meta`` (the join code, the researcher's
        token), made by ``make()`` and stored the first time."""
        with self.engine.connect() as conn:
            value = conn.execute(select(meta.c.value).where(meta.c.key == key)).scalar()
        if value is not None:
            return value
        try:
            with self.transaction() as conn:
                conn.execute(insert(meta).values(key=key, value=make()))
        except IntegrityError:
            pass  # another process made it first
        return self.secret(key, make)

    def write_probe(self) -> str | None:
        r"""Write and commit one row (``meta``'s :data:`HEALTH_KEY`: the time
        now), as an answer is committed, after reading the participants',
        questions', events' and snapshots' tables: what fails when the disk
        is full, the file read-only, a table gone or the server gone. A lock
        held elsewhere is waited for :data:`PROBE_SECONDS` at most (then it
        fails, saying so).

        Returns:
            ``None`` when the database took the write, else why not, in one
            line (``"OperationalError: attempt to write a readonly
            database"``).
        """
        now = repr(time.time())
        try:
            for _ in range(2):  # a first insert that another process raced
                try:
                    with (
                        self.transaction() as conn,
                        _waiting_at_most(conn, PROBE_SECONDS),
                    ):
                        for table in (participants, questions, events, snapshots):
                            conn.execute(select(table.c.id).limit(1)).all()
                        done = conn.execute(
                            update(meta)
                            .where(meta.c.key == HEALTH_KEY)
                            .values(value=now)
                        ).rowcount
                        if not done:
                            conn.execute(insert(meta).values(key=HEALTH_KEY, value=now))
                    return None
                except IntegrityError:
                    continue
            return "IntegrityError: the health row could not be written"
        except (SQLAlchemyError, OSError) as e:
            return one_line(e)

    # ------------------------------------------------------- participants
    def add_participant(self, token: str, label: str, most: int | None = None) -> int:
        r"""A new participant; returns its id.

        Joins are serialised (a write to ``meta`` first: SQLite's write lock,
        a row lock on PostgreSQL), so the count seen is the count inserted
        against, and concurrent joins never pass ``most``.

        Raises:
            StudyFull: The study has ``most`` participants already.
        """
        with self.transaction() as conn:
            conn.execute(
                update(meta)
                .where(meta.c.key == "schema_version")
                .values(value=meta.c.value)
            )
            if most is not None:
                count = conn.execute(select(func.count(participants.c.id))).scalar()
                if int(count) >= most:
                    raise StudyFull(f"this study is full ({most} participants).")
            now = time.time()
            pid = conn.execute(
                insert(participants).values(
                    token_hash=token_hash(token), label=label, joined_at=now
                )
            ).inserted_primary_key[0]
            log_event(conn, pid, None, "join", {"label": label}, now)
        return int(pid)

    def participant_by_token(self, token: str) -> dict[str, Any] | None:
        r"""The participant row of ``token``, or ``None``."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(participants).where(
                    participants.c.token_hash == token_hash(token)
                )
            ).first()
        return None if row is None else dict(row._mapping)

    def count_participants(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count(participants.c.id))).scalar())

    def participants(self) -> list[dict[str, Any]]:
        r"""Every participant with their answer count and last activity."""
        answered = _progress().subquery()
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(participants, answered.c.answers, answered.c.last)
                .outerjoin(answered, answered.c.participant_id == participants.c.id)
                .order_by(participants.c.id)
            ).all()
        out = []
        for r in rows:
            d = dict(r._mapping)
            d.pop("token_hash")
            d["answers"] = int(d["answers"] or 0)
            out.append(d)
        return out

    # ---------------------------------------------------------- questions
    def questions_of(self, pid: int, conn: Connection | None = None) -> list[dict]:
        r"""Participant ``pid``'s questions by ``seq`` (options decoded)."""
        query = (
            select(questions)
            .where(questions.c.participant_id == pid)
            .order_by(questions.c.seq)
        )
        if conn is None:
            with self.engine.connect() as c:
                rows = c.execute(query).all()
        else:
            rows = conn.execute(query).all()
        return [_question(r) for r in rows]

    def answered(self, pids: list[int] | None = None) -> list[dict[str, Any]]:
        r"""Every answered question of the study (of ``pids``, default
        everyone's), by participant and seq."""
        query = select(questions).where(questions.c.answered_at.is_not(None))
        if pids is not None:
            query = query.where(questions.c.participant_id.in_(pids))
        with self.engine.connect() as conn:
            rows = conn.execute(
                query.order_by(questions.c.participant_id, questions.c.seq)
            ).all()
        return [_question(r) for r in rows]

    def answer_progress(self) -> dict[int, tuple[int, float]]:
        r"""Participant id to ``(answers, time of the latest)``: a pair that
        changes with every answer and every undo (one cheap query)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                _progress().where(questions.c.answered_at.is_not(None))
            ).all()
        return {int(pid): (int(n), float(t)) for pid, n, t in rows}

    def count_answers(self) -> int:
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count()).where(questions.c.answered_at.is_not(None))
                ).scalar()
            )

    def events(self) -> list[dict[str, Any]]:
        r"""The audit trail, in order."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(events).order_by(events.c.id)).all()
        out = []
        for r in rows:
            d = dict(r._mapping)
            d["data"] = json.loads(d["data"])
            out.append(d)
        return out

    # ---------------------------------------------------------- snapshots
    def add_snapshot(self, answers: int, data: dict[str, Any]) -> None:
        with self.transaction() as conn:
            conn.execute(
                insert(snapshots).values(
                    at=time.time(), answers=answers, data=json.dumps(data)
                )
            )

    def latest_snapshot(self) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(snapshots).order_by(snapshots.c.id.desc()).limit(1)
            ).first()
        if row is None:
            return None
        d = dict(row._mapping)
        d["data"] = json.loads(d["data"])
        return d


def _progress() -> Any:
    r"""Each participant's answer count and the time of the latest answer
    (``answers``, ``last``), by ``participant_id``."""
    answered = questions.c.answered_at
    return select(
        questions.c.participant_id,
        func.count(answered).label("answers"),
        func.max(answered).label("last"),
    ).group_by(questions.c.participant_id)


def _question(row: Any) -> dict[str, Any]:
    d = dict(row._mapping)
    d["options"] = json.loads(d["options"])
    virtual = d["virtual_comparisons"]
    d["virtual_comparisons"] = None if virtual is None else json.loads(virtual)
    return d


def one_line(error: BaseException) -> str:
    r"""``error`` as ``"Type: message"`` on one line; a database error by
    its driver's message (without the SQL statement SQLAlchemy appends)."""
    if isinstance(error, DBAPIError) and error.orig is not None:
        error = error.orig
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


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
