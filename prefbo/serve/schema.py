r"""The schema of a served study's database (SQLAlchemy 2 Core): its tables,
opening an engine on it, and the migrations between schema versions.

One database per study: SQLite by default (a file, in WAL mode, so readers do
not block the writer), or any SQLAlchemy URL (PostgreSQL for a study served
by several processes or hosts). Tables:

- ``meta``: ``schema_version`` and the study as read (JSON, its
  ``model.kind`` named: the kind it is served with), so a replay
  needs nothing but the database, the secrets, ``health`` (the time of
  the last write probe) and the collaborative model's fitted shared part;
- ``participants``: an id, the SHA-256 of the participant's token (the link
  itself is never stored), a label, when they joined and finished, and
  their progress: how many answers they hold (``answers``) and when that
  last changed, by an answer or an undo (``changed_at``), kept by the same
  transaction that changes an answer, so that the workers' rounds read
  one row per participant instead of every question;
- ``questions``: one row per question of a participant, numbered ``seq``
  from 0 (unique per participant), with its options (the space's model
  points, JSON), where it came from (``model`` or ``random``), and once
  shown and answered, when and which option (``choice``; ``no_preference``
  for "no preference", which is stored and exported but not fitted), and
  the virtual comparisons at the space's faces a model's question carries
  to its answer (``virtual_comparisons``, JSON, or null;
  :attr:`~prefbo.loop.PreferentialOptimizer.pending_virtual`);
- ``events``: every join, answer and undo in order, never updated (the
  audit trail; an undone answer stays here);
- ``snapshots``: the workers' latest favourites, for the researcher's page;
- ``workers``: each running worker's name and when its heartbeat lapses;
- ``leases``: which worker makes a participant's questions, until when
  (:mod:`prefbo.serve.leases`).

:func:`migrate` brings an older schema up to :data:`SCHEMA_VERSION` step by
step.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Engine

from prefbo.exceptions import InputDataError

SCHEMA_VERSION = 5
#: The ``meta`` row :meth:`Store.write_probe` writes.
HEALTH_KEY = "health"

metadata = MetaData()
meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
participants = Table(
    "participants",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("label", String(200), nullable=False),
    Column("joined_at", Float, nullable=False),
    Column("finished_at", Float),
    Column("answers", Integer, nullable=False, default=0, server_default="0"),
    Column("changed_at", Float),
)
questions = Table(
    "questions",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("participant_id", Integer, ForeignKey("participants.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("options", Text, nullable=False),
    Column("origin", String(16), nullable=False),
    Column("based_on", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("shown_at", Float),
    Column("answered_at", Float),
    Column("choice", Integer),
    Column("no_preference", Boolean, nullable=False, default=False),
    Column("virtual_comparisons", Text),
    UniqueConstraint("participant_id", "seq", name="one_question_per_seq"),
)
events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("participant_id", Integer, nullable=False),
    Column("question_id", String(32)),
    Column("kind", String(16), nullable=False),
    Column("at", Float, nullable=False),
    Column("data", Text, nullable=False),
)
snapshots = Table(
    "snapshots",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("answers", Integer, nullable=False),
    Column("data", Text, nullable=False),
)
workers = Table(
    "workers",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("expires_at", Float, nullable=False),
)
leases = Table(
    "leases",
    metadata,
    Column("participant_id", Integer, ForeignKey("participants.id"), primary_key=True),
    Column("holder", String(200), nullable=False),
    Column("expires_at", Float, nullable=False),
)


#: Seconds an SQLite connection waits for another process's write lock.
BUSY_SECONDS = 30.0


def database_url(target: str) -> str:
    r"""An SQLAlchemy URL: ``target`` itself if it has a scheme, else the
    SQLite file it names."""
    return target if "://" in target else f"sqlite:///{target}"


def open_engine(url: str) -> Engine:
    r"""An engine on ``url``; SQLite files in WAL mode with a busy timeout
    (several processes write: the server and its workers)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": BUSY_SECONDS})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def schema_version(conn: Connection) -> int:
    r"""The database's schema version (0: no prefbo tables)."""
    if not conn.dialect.has_table(conn, "meta"):
        return 0
    row = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version"))
    value = row.scalar()
    return 0 if value is None else int(value)


def _to_1(conn: Connection) -> None:
    metadata.create_all(conn)
    conn.execute(insert(meta).values(key="schema_version", value="1"))


def _to_2(conn: Connection) -> None:
    # a database made by _to_1 of this prefbo has the column already
    columns = {c["name"] for c in inspect(conn).get_columns("questions")}
    if "virtual_comparisons" not in columns:
        conn.execute(text("ALTER TABLE questions ADD COLUMN virtual_comparisons TEXT"))


def _to_3(conn: Connection) -> None:
    # a database made by _to_1 of this prefbo has the tables already
    metadata.create_all(conn, tables=[workers, leases], checkfirst=True)


def _to_4(conn: Connection) -> None:
    # a database made by _to_1 of this prefbo has the columns already
    columns = {c["name"] for c in inspect(conn).get_columns("participants")}
    if "answers" not in columns:
        conn.execute(
            text(
                "ALTER TABLE participants ADD COLUMN answers INTEGER NOT NULL DEFAULT 0"
            )
        )
    if "changed_at" not in columns:
        conn.execute(text("ALTER TABLE participants ADD COLUMN changed_at FLOAT"))
    conn.execute(
        text(
            "UPDATE participants SET "
            "answers = (SELECT count(q.answered_at) FROM questions q "
            "WHERE q.participant_id = participants.id), "
            "changed_at = (SELECT max(q.answered_at) FROM questions q "
            "WHERE q.participant_id = participants.id)"
        )
    )


#: The kind a study file without ``model.kind`` was served with before
#: version 5 (``q = 2``; the kind refused other ``q``).
EARLIER_DEFAULT_KIND = "population"


def model_kind(source: dict[str, Any]) -> str | None:
    r"""The ``model.kind`` a study (as read) names, or ``None``."""
    model = source.get("model")
    return model.get("kind") if isinstance(model, dict) else None


def with_kind(source: dict[str, Any], kind: str | None) -> dict[str, Any]:
    r"""The study ``source`` naming ``kind`` as its ``model.kind`` (the
    database stores the kind a study is served with: a later default
    does not change it)."""
    model = source.get("model", {})
    if kind is None or not isinstance(model, dict) or "kind" in model:
        return source
    return {**source, "model": {**model, "kind": kind}}


def _to_5(conn: Connection) -> None:
    # the stored study names the kind it is served with, so that a later
    # default does not change a running study's model
    row = conn.execute(select(meta.c.value).where(meta.c.key == "study")).scalar()
    if row is None:
        return
    source = json.loads(row)
    named = with_kind(source, EARLIER_DEFAULT_KIND)
    if named is not source:
        conn.execute(
            update(meta).where(meta.c.key == "study").values(value=json.dumps(named))
        )


#: Steps from version ``v`` to ``v + 1``. A later schema appends a step that
#: alters the tables of the one before and bumps ``schema_version``.
MIGRATIONS = {0: _to_1, 1: _to_2, 2: _to_3, 3: _to_4, 4: _to_5}


def migrate(engine: Engine) -> int:
    r"""Bring the database to :data:`SCHEMA_VERSION`; returns the version it
    had. A newer schema than this prefbo knows is refused.

    Raises:
        InputDataError: The database's schema is newer than this prefbo's.
    """
    with engine.begin() as conn:
        start = version = schema_version(conn)
        if version > SCHEMA_VERSION:
            raise InputDataError(
                f"the study database has schema version {version}; this prefbo "
                f"knows up to {SCHEMA_VERSION}: upgrade prefbo."
            )
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](conn)
            version += 1
            conn.execute(
                update(meta)
                .where(meta.c.key == "schema_version")
                .values(value=str(version))
            )
    return start
