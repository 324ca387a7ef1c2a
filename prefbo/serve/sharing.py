r"""How the workers on one database share the participants: leases.

Each worker (its :class:`Share`) beats its heart in the database every
:data:`RENEW_SECONDS`, on a thread of its own (:meth:`Share.start`: a round
of fits that takes longer keeps its leases), and takes, of the participants
waiting for a question, those whose id is its rank modulo the number of live
workers, each by a lease (:mod:`prefbo.serve.leases`) that it renews with the
heartbeat and that lapses :data:`LEASE_SECONDS` after its last renewal. A
question is stored only by the holder of its participant's lease, so two
workers never store (nor, while both are alive, make) a question for the
same participant at once. When a worker stops its leases go at once; when
one dies, they lapse within :data:`LEASE_SECONDS`, the live workers
re-divide the participants and take them over. Workers on several hosts
share a PostgreSQL database the same way.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterable

from prefbo.serve.store import Store

log = logging.getLogger("prefbo.serve")

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
        self._lock = threading.Lock()  # held across each renewal and claim
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def ours(self, pid: int, live: list[str] | None = None) -> bool:
        r"""Whether participant ``pid`` falls to this worker among the
        ``live`` workers (default: those of the last renewal), by id modulo
        their number (all of them while this worker is not among them)."""
        live = self.live if live is None else live
        if self.name not in live:
            return True
        return pid % len(live) == live.index(self.name)

    def start(self) -> Share:
        r"""Renew every ``renew_seconds`` on a thread of its own until
        :meth:`close` (without it, :meth:`take` renews when due); returns
        ``self``."""
        self.renew()
        self._beat = threading.Thread(
            target=self._beating, name="prefbo-lease", daemon=True
        )
        self._beat.start()
        return self

    def _beating(self) -> None:
        while not self._stop.wait(self.renew_seconds):
            try:
                self.renew()
            except Exception:  # the database away a moment: the next one retries
                log.exception("worker %s: renewing its leases failed", self.name)

    def renew(self) -> None:
        r"""Beat the heart, give up the leases that fall to others now and
        renew the rest, in one transaction."""

        def release(live: list[str]) -> list[int]:
            return [pid for pid in self.held if not self.ours(pid, live)]

        with self._lock:
            renewal = self.store.renew_share(self.name, self.lease_seconds, release)
            self.live, self.held = renewal.live, renewal.held
            self._renew_at = time.monotonic() + self.renew_seconds

    def take(self, waiting: Iterable[int]) -> set[int]:
        r"""Of the participants ``waiting`` for a question, those this worker
        makes the questions of: its own by the share, each under a lease
        (taken now where free or lapsed)."""
        now = time.monotonic()
        if self._beat is None and now >= self._renew_at:
            self.renew()
        with self._lock:
            return self._take(list(waiting), now)

    def _take(self, waiting: list[int], now: float) -> set[int]:
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
        r"""Stop renewing, and give up the heartbeat and every lease (the
        others take over at once)."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        self.store.leave(self.name)
        self.held = set()
