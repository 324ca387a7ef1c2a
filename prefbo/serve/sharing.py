r"""How the workers on one database share the participants: leases.

Each worker (its :class:`Share`) beats its heart in the database every
:data:`RENEW_SECONDS` and takes, of the participants waiting for a question,
those whose id is its rank modulo the number of live workers, each by a
lease (:mod:`prefbo.serve.leases`) that it renews with the heartbeat and
that lapses :data:`LEASE_SECONDS` after its last renewal. A question is
stored only by the holder of its participant's lease, so two workers never
store (nor, while both are alive, make) a question for the same participant
at once. When a worker stops its leases go at once; when one dies, they lapse
within :data:`LEASE_SECONDS`, the live workers re-divide the participants
and take them over. Workers on several hosts share a PostgreSQL database
the same way.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable

from prefbo.serve.store import Store

#: Seconds a worker's heartbeat and leases last without renewal.
LEASE_SECONDS = 3.0
#: Seconds between a worker's renewals of its heartbeat and leases.
RENEW_SECONDS = 1.0
#: Seconds a worker waits before claiming again a participant whose lease
#: another worker held at its last try.
RETRY_SECONDS = 0.5


def worker_name(pid: int | None = None) -> str:
    r"""The name a worker holds leases under: its host and process id
    (``pid``, default this process's)."""
    return f"{socket.gethostname()}:{os.getpid() if pid is None else pid}"


class Share:
    r"""A worker's share of the participants, held by leases in the database.

    Args:
        store: The study's database.
        name: The worker's name (default :func:`worker_name`), unique among
            the workers on the database.
        lease_seconds: Seconds a heartbeat and lease last without renewal.
        renew_seconds: Seconds between renewals (below ``lease_seconds``).

    Raises:
        ValueError: ``renew_seconds`` is not in ``(0, lease_seconds)``.
    """

    def __init__(
        self,
        store: Store,
        name: str | None = None,
        lease_seconds: float = LEASE_SECONDS,
        renew_seconds: float = RENEW_SECONDS,
    ) -> None:
        if not 0 < renew_seconds < lease_seconds:
            raise ValueError(
                "renew_seconds must be in (0, lease_seconds) so that a lease is "
                f"renewed before it lapses; got {renew_seconds=} with "
                f"{lease_seconds=}."
            )
        self.store = store
        self.name = worker_name() if name is None else name
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.live: list[str] = []
        self.held: set[int] = set()
        self._renew_at = 0.0
        self._refused: dict[int, float] = {}

    def ours(self, pid: int) -> bool:
        r"""Whether participant ``pid`` falls to this worker among the live
        ones (by id modulo their number; all of them before the first
        heartbeat)."""
        if self.name not in self.live:
            return True
        return pid % len(self.live) == self.live.index(self.name)

    def renew(self) -> None:
        r"""Beat the heart, then give up the leases that fall to others now
        and renew the rest (due every :attr:`renew_seconds`; :meth:`take`
        calls it)."""
        self.live = self.store.heartbeat(self.name, self.lease_seconds)
        release = [pid for pid in self.held if not self.ours(pid)]
        self.held = self.store.renew_leases(self.name, release, self.lease_seconds)
        self._renew_at = time.monotonic() + self.renew_seconds

    def take(self, waiting: Iterable[int]) -> set[int]:
        r"""Of the participants ``waiting`` for a question, those this worker
        makes the questions of: its own by the share, each under a lease
        (taken now where free or lapsed)."""
        now = time.monotonic()
        if now >= self._renew_at:
            self.renew()
        waiting = list(waiting)
        wanted = [
            pid
            for pid in waiting
            if pid not in self.held
            and self.ours(pid)
            and self._refused.get(pid, 0.0) <= now
        ]
        if wanted:
            got = self.store.claim_leases(self.name, wanted, self.lease_seconds)
            self.held |= got
            for pid in wanted:
                if pid in got:
                    self._refused.pop(pid, None)
                else:
                    self._refused[pid] = now + RETRY_SECONDS
        return {pid for pid in waiting if pid in self.held}

    def close(self) -> None:
        r"""Give up the heartbeat and every lease (the others take over at
        once)."""
        self.store.leave(self.name)
        self.held = set()
