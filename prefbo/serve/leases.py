r"""The queries of the workers' leases: which worker makes a participant's
questions, so that several workers on one database never make the same
participant's question at once.

A worker announces itself in ``workers`` with a heartbeat that lapses after
a few seconds, and holds a lease (a ``leases`` row: holder, expiry) on each
participant it makes questions for. A lease is taken only where none is
held or the one held has expired, and is renewed with the heartbeat; the
question it covers is stored in the transaction that renews the lease once
more (:func:`renew_for_storing`), so a question is stored only by the lease's
holder. A dead worker's heartbeat and leases lapse; another takes its
participants over.

Every write here is one short transaction that writes first, so that
SQLite's single writer and PostgreSQL's row locks decide concurrent claims:
a claim's conditional update waits for a renewal in flight and then finds
the lease held.

The times are the workers' clocks (``time.time()``): workers on several
hosts need their clocks in step to well within a lease's seconds.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, and_, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from prefbo.serve.schema import leases, participants, workers

#: Seconds past its expiry that a lapsed worker's row is kept (then dropped).
FORGET_SECONDS = 60.0


def heartbeat(conn: Connection, name: str, seconds: float, now: float) -> list[str]:
    r"""Announce worker ``name`` alive for ``seconds`` from ``now``; returns
    the names of the live workers (this one included), sorted."""
    done = conn.execute(
        update(workers).where(workers.c.name == name).values(expires_at=now + seconds)
    )
    if not done.rowcount:
        conn.execute(insert(workers).values(name=name, expires_at=now + seconds))
    conn.execute(delete(workers).where(workers.c.expires_at < now - FORGET_SECONDS))
    live = select(workers.c.name).where(workers.c.expires_at > now)
    return sorted(conn.execute(live).scalars().all())


def renew(
    conn: Connection,
    holder: str,
    release: Iterable[int],
    seconds: float,
    now: float,
) -> set[int]:
    r"""Give up ``holder``'s leases on ``release`` and on the participants
    who finished, extend the rest to ``now + seconds``; returns the
    participants ``holder`` still holds."""
    mine = leases.c.holder == holder
    finished = select(participants.c.id).where(participants.c.finished_at.isnot(None))
    gone = or_(
        leases.c.participant_id.in_(list(release)),
        leases.c.participant_id.in_(finished),
    )
    conn.execute(delete(leases).where(and_(mine, gone)))
    conn.execute(update(leases).where(mine).values(expires_at=now + seconds))
    return set(conn.execute(select(leases.c.participant_id).where(mine)).scalars())


def claim(
    conn: Connection, holder: str, pids: Iterable[int], seconds: float, now: float
) -> set[int]:
    r"""Take the leases on ``pids`` that nobody holds or whose holder let
    them expire (and renew ``holder``'s own among them) until ``now +
    seconds``; returns those of ``pids`` that ``holder`` holds now."""
    pids = sorted(set(pids))
    if not pids:
        return set()
    wanted = leases.c.participant_id.in_(pids)
    conn.execute(
        update(leases)
        .where(and_(wanted, or_(leases.c.holder == holder, leases.c.expires_at <= now)))
        .values(holder=holder, expires_at=now + seconds)
    )
    present = set(conn.execute(select(leases.c.participant_id).where(wanted)).scalars())
    for pid in pids:
        if pid in present:
            continue
        # a savepoint: another worker's insert of the same lease may be first
        # (then it holds it), and a participant may be gone
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(leases).values(
                        participant_id=pid, holder=holder, expires_at=now + seconds
                    )
                )
        except IntegrityError:  # the lease is someone else's, or they left
            continue
    return _held(conn, holder, pids)


def renew_for_storing(
    conn: Connection, holder: str, pids: Iterable[int], seconds: float, now: float
) -> set[int]:
    r"""Within the transaction that stores questions for ``pids``: renew
    ``holder``'s leases on them (a row lock on PostgreSQL until the commit,
    so a claim waits and then finds them held) and return those of ``pids``
    that ``holder`` holds: only their questions may be stored."""
    pids = sorted(set(pids))
    if not pids:
        return set()
    conn.execute(
        update(leases)
        .where(and_(leases.c.holder == holder, leases.c.participant_id.in_(pids)))
        .values(expires_at=now + seconds)
    )
    return _held(conn, holder, pids)


def leave(conn: Connection, name: str) -> None:
    r"""Drop worker ``name``'s heartbeat and leases (it stopped, or was
    found dead): others take its participants over at once."""
    conn.execute(delete(leases).where(leases.c.holder == name))
    conn.execute(delete(workers).where(workers.c.name == name))


def holders(conn: Connection) -> dict[int, str]:
    r"""Participant id to the holder of its lease (expired ones included)."""
    rows = conn.execute(select(leases.c.participant_id, leases.c.holder)).all()
    return {int(r.participant_id): r.holder for r in rows}


def _held(conn: Connection, holder: str, pids: list[int]) -> set[int]:
    query = select(leases.c.participant_id).where(
        and_(leases.c.holder == holder, leases.c.participant_id.in_(pids))
    )
    return set(conn.execute(query).scalars())
