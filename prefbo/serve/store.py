r"""The database of a served study: every query of the server and its
workers, one transaction a write, each read as typed rows
(:mod:`prefbo.serve.rows`).

The tables and their migrations are :mod:`prefbo.serve.schema`'s. The
queries of a participant's step are :mod:`prefbo.serve.steps`' (run in the
transaction :meth:`Store.participant` opens), those of the workers'
questions :mod:`prefbo.serve.waiting`'s and those of their leases
:mod:`prefbo.serve.leases`'; :class:`Store` is where the server and the
workers call them. Every write is one transaction: an answer and the next
question's showing commit together before the reply is sent, so a server
killed at any moment loses no acknowledged answer.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, and_, func, insert, or_, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from prefbo.serve import leases, waiting
from prefbo.serve.rows import (
    EventRow,
    MadeQuestion,
    Needing,
    ParticipantRow,
    Progress,
    QuestionRow,
    Renewal,
    SnapshotRow,
)
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
from prefbo.serve.steps import ParticipantSteps, Raced, log_event

#: Seconds the health probe waits for a lock held elsewhere.
PROBE_SECONDS = 2.0
#: The ``meta`` rows of the collaborative model's fitted shared part and of
#: its tag (:func:`state_tag`).
MODEL_KEY = "collaborative_model"
MODEL_TAG_KEY = "collaborative_model_tag"


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

    def model_state_tag(self) -> str | None:
        r"""The tag (:func:`state_tag`) of the saved :meth:`model_state`, a
        short read for a worker that asks every round whether a new fit
        was saved; ``None`` before any."""
        with self.engine.connect() as conn:
            return conn.execute(
                select(meta.c.value).where(meta.c.key == MODEL_TAG_KEY)
            ).scalar()

    def set_model_state(self, value: str) -> None:
        r"""Save the collaborative model's fitted shared part (text) with
        its tag, so the other workers adopt it and a restarted worker
        starts from it instead of fitting from scratch."""
        with self.transaction() as conn:
            for key, text in ((MODEL_KEY, value), (MODEL_TAG_KEY, state_tag(value))):
                done = conn.execute(
                    update(meta).where(meta.c.key == key).values(value=text)
                )
                if not done.rowcount:
                    conn.execute(insert(meta).values(key=key, value=text))

    def secret(self, key: str, make: Callable[[], str]) -> str:
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

    def participant_by_token(self, token: str) -> ParticipantRow | None:
        r"""The participant of ``token`` with their progress, or ``None``."""
        with self.engine.connect() as conn:
            mine = participants.c.token_hash == token_hash(token)
            row = conn.execute(_participant_rows().where(mine)).first()
        return None if row is None else ParticipantRow(**row._mapping)

    def count_participants(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count(participants.c.id))).scalar())

    def participants(self) -> list[ParticipantRow]:
        r"""Every participant with their answer count and last activity."""
        with self.engine.connect() as conn:
            rows = conn.execute(_participant_rows().order_by(participants.c.id)).all()
        return [ParticipantRow(**r._mapping) for r in rows]

    @contextmanager
    def participant(self, pid: int) -> Iterator[ParticipantSteps]:
        r"""One step of participant ``pid`` (:mod:`prefbo.serve.flow`): its
        queries in one transaction, with the participant's row claimed
        first (:meth:`~prefbo.serve.steps.ParticipantSteps.claim`),
        committed on leaving (rolled back on an error).

        Raises:
            Raced: Another process stored one of the step's rows first (a
                question made at the same moment) or changed the
                participant's answers; the step may be tried again.
        """
        try:
            with self.transaction() as conn:
                steps = ParticipantSteps(conn, pid)
                steps.claim()
                yield steps
        except IntegrityError as e:
            raise Raced(f"participant {pid}'s step met a concurrent write") from e

    # ---------------------------------------------------------- questions
    def questions_of(self, pid: int) -> list[QuestionRow]:
        r"""Participant ``pid``'s questions by ``seq``."""
        with self.engine.connect() as conn:
            return ParticipantSteps(conn, pid).questions()

    def answered(self, pids: list[int] | None = None) -> list[QuestionRow]:
        r"""Every answered question of the study (of ``pids``, default
        everyone's), by participant and seq."""
        query = select(questions).where(questions.c.answered_at.is_not(None))
        if pids is not None:
            query = query.where(questions.c.participant_id.in_(pids))
        with self.engine.connect() as conn:
            rows = conn.execute(
                query.order_by(questions.c.participant_id, questions.c.seq)
            ).all()
        return [QuestionRow.from_db(r) for r in rows]

    def answered_keys(self, pids: list[int]) -> dict[int, list[tuple]]:
        r"""Participant id (of ``pids``, those with answers) to the
        ``(seq, id, answered_at)`` of each of their answered questions, by
        ``seq``: a short read that tells which answers changed since they
        were read (an answer, an undo and a new answer each change it)."""
        if not pids:
            return {}
        query = (
            select(
                questions.c.participant_id,
                questions.c.seq,
                questions.c.id,
                questions.c.answered_at,
            )
            .where(questions.c.answered_at.is_not(None))
            .where(questions.c.participant_id.in_(pids))
            .order_by(questions.c.participant_id, questions.c.seq)
        )
        out: dict[int, list[tuple]] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(query):
                out.setdefault(int(r.participant_id), []).append(
                    (int(r.seq), r.id, float(r.answered_at))
                )
        return out

    def answered_from(self, starts: dict[int, int]) -> list[QuestionRow]:
        r"""The answered questions of each participant of ``starts`` (id to
        a ``seq``) from that ``seq`` on, by participant and seq."""
        if not starts:
            return []
        wanted = or_(
            *(
                and_(questions.c.participant_id == pid, questions.c.seq >= seq)
                for pid, seq in starts.items()
            )
        )
        query = (
            select(questions)
            .where(questions.c.answered_at.is_not(None))
            .where(wanted)
            .order_by(questions.c.participant_id, questions.c.seq)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [QuestionRow.from_db(r) for r in rows]

    def answer_progress(self) -> dict[int, Progress]:
        r"""Participant id to their answer count and when it last changed (an
        answer or an undo), for each who has answered: a pair that changes
        with every answer and every undo (one row per participant, kept by
        the steps that change an answer)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    participants.c.id, participants.c.answers, participants.c.changed_at
                ).where(participants.c.changed_at.is_not(None))
            ).all()
        return {int(r.id): Progress(int(r.answers), float(r.changed_at)) for r in rows}

    def has_question(self, pid: int) -> bool:
        r"""Whether participant ``pid`` has a question (shown or waiting)."""
        with self.engine.connect() as conn:
            return waiting.has_question(conn, pid)

    def any_model_question(self) -> bool:
        r"""Whether a worker has stored a question in this study."""
        with self.engine.connect() as conn:
            return waiting.any_model_question(conn)

    # ---------------------------------------------------- workers' questions
    def needing_questions(
        self, most: int, only: Iterable[int] | None = None
    ) -> dict[int, Needing]:
        r"""Participants (of ``only``, default all) without a waiting question
        whose next question is below ``seq`` ``most`` (the answers each gives),
        by id (:func:`~prefbo.serve.waiting.needing_questions`)."""
        with self.engine.connect() as conn:
            return waiting.needing_questions(conn, most, only)

    def queue_question(
        self, made: MadeQuestion, holder: str | None = None, lease_seconds: float = 0.0
    ) -> bool:
        r"""Store a worker's question unless one is there already (another
        worker's, or a random one shown meanwhile) or (``holder`` named)
        ``holder`` no longer holds the participant's lease (held, it is
        renewed for ``lease_seconds``); returns whether it was stored."""
        try:
            with self.transaction() as conn:
                if holder is not None:
                    now = time.time()
                    held = leases.renew_for_storing(
                        conn, holder, [made.participant_id], lease_seconds, now
                    )
                    if not held:
                        return False
                waiting.store_question(conn, made)
            return True
        except IntegrityError:
            return False

    def queue_questions(
        self,
        made: list[MadeQuestion],
        holder: str | None = None,
        lease_seconds: float = 0.0,
    ) -> int:
        r"""Store a round's worker questions in one transaction, each where
        still wanted (:func:`~prefbo.serve.waiting.store_questions`); returns
        how many were stored."""
        if not made:
            return 0
        with self.transaction() as conn:
            return waiting.store_questions(conn, made, holder, lease_seconds)

    # ---------------------------------------------------------------- leases
    def renew_share(
        self,
        name: str,
        seconds: float,
        release: Callable[[list[str]], Iterable[int]],
    ) -> Renewal:
        r"""In one transaction: announce worker ``name`` alive for
        ``seconds`` (:func:`~prefbo.serve.leases.heartbeat`), give up its
        leases on ``release(live workers' names)`` and the finished
        participants', and renew the rest for ``seconds``
        (:func:`~prefbo.serve.leases.renew`)."""
        now = time.time()
        with self.transaction() as conn:
            live = leases.heartbeat(conn, name, seconds, now)
            held = leases.renew(conn, name, release(live), seconds, now)
        return Renewal(live=live, held=held)

    def claim_leases(
        self, holder: str, pids: Iterable[int], seconds: float
    ) -> set[int]:
        r"""Take the leases on ``pids`` that are free or expired for
        ``seconds``; returns those ``holder`` holds
        (:func:`~prefbo.serve.leases.claim`)."""
        with self.transaction() as conn:
            return leases.claim(conn, holder, pids, seconds, time.time())

    def leave(self, name: str) -> None:
        r"""Drop worker ``name``'s heartbeat and leases
        (:func:`~prefbo.serve.leases.leave`)."""
        with self.transaction() as conn:
            leases.leave(conn, name)

    def lease_holders(self) -> dict[int, str]:
        r"""Participant id to the holder of its lease, expired or not."""
        with self.engine.connect() as conn:
            return leases.holders(conn)

    def count_answers(self) -> int:
        r"""How many answers the participants hold now."""
        with self.engine.connect() as conn:
            total = conn.execute(select(func.sum(participants.c.answers))).scalar()
        return int(total or 0)

    def events(self) -> list[EventRow]:
        r"""The audit trail, in order."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(events).order_by(events.c.id)).all()
        return [EventRow(**{**r._mapping, "data": json.loads(r.data)}) for r in rows]

    # ---------------------------------------------------------- snapshots
    def add_snapshot(self, answers: int, data: dict[str, Any]) -> None:
        with self.transaction() as conn:
            conn.execute(
                insert(snapshots).values(
                    at=time.time(), answers=answers, data=json.dumps(data)
                )
            )

    def latest_snapshot(self) -> SnapshotRow | None:
        r"""The favourites stored last, or ``None``."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(snapshots).order_by(snapshots.c.id.desc()).limit(1)
            ).first()
        if row is None:
            return None
        return SnapshotRow(**{**row._mapping, "data": json.loads(row.data)})


def _participant_rows() -> Any:
    r"""The ``participants`` columns of a :class:`ParticipantRow` (the
    token's hash left out, ``changed_at`` as ``last``)."""
    columns = [c for c in participants.c if c.name not in ("token_hash", "changed_at")]
    return select(*columns, participants.c.changed_at.label("last"))


def state_tag(value: str) -> str:
    r"""The tag of a saved model state: a hash of its text."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def one_line(error: BaseException) -> str:
    r"""``error`` as ``"Type: message"`` on one line; a database error by
    its driver's message (without the SQL statement SQLAlchemy appends)."""
    if isinstance(error, DBAPIError) and error.orig is not None:
        error = error.orig
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
