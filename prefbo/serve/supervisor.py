r"""The worker processes of a served study: started, watched, restarted.

:func:`start_workers` starts :func:`~prefbo.serve.worker.run_worker` in
processes of their own (spawned, ending cleanly on SIGTERM); a
:class:`WorkerSupervisor` keeps them running (a killed worker is logged and
started again, with a growing pause if it keeps dying at start) and
:func:`health_report` tells ``/healthz`` about them and about the database.
Each worker process gets its share of the cores as its thread count, in its
environment before torch is imported (:func:`~prefbo.utils.threads.child_threads`,
:func:`start_process`), with ``PREFBO_THREADS=auto`` so that prefbo's
thread policy (:mod:`prefbo.utils.threads`) still runs its small work on
one thread there.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

from prefbo.serve.sharing import worker_name
from prefbo.serve.store import Store
from prefbo.serve.worker import run_worker
from prefbo.utils.threads import child_threads, children_with_threads

log = logging.getLogger("prefbo.serve")


#: How much nicer than the server a worker process runs (``nice``): the
#: participants' requests come first on the cores, and a worker's model work
#: (its rounds, its fits) takes what they leave.
WORKER_NICENESS = 10
#: A worker process's GIL switch interval (seconds; Python's default is
#: 0.005): its round and lease threads hold the database's write lock while
#: they store questions, and get the GIL back from the fitting thread this
#: soon, so that the participants' answers do not wait on that lock for
#: the fit's Python steps.
WORKER_SWITCH_SECONDS = 0.001


def _worker_process(*args: Any, **kwargs: Any) -> None:
    r"""A worker process: :func:`run_worker`, deaf to the terminal's Ctrl-C
    and ending cleanly on SIGTERM (:func:`stop_workers` sends it, and a
    service manager signals the server's whole process group), at
    :data:`WORKER_NICENESS` (:func:`renice`) and
    :data:`WORKER_SWITCH_SECONDS`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _leave)
    renice(WORKER_NICENESS)
    sys.setswitchinterval(WORKER_SWITCH_SECONDS)
    run_worker(*args, **kwargs)


def renice(niceness: int) -> None:
    r"""Make this process ``niceness`` nicer, every thread of it (on Linux a
    thread's niceness is its own: those the imports started, e.g. BLAS's,
    are reniced one by one; threads started later inherit it). A system
    that refuses is logged, and the worker runs as it is."""
    try:
        tasks = "/proc/self/task"
        if os.path.isdir(tasks):
            for tid in map(int, os.listdir(tasks)):
                try:
                    now = os.getpriority(os.PRIO_PROCESS, tid)
                    os.setpriority(os.PRIO_PROCESS, tid, min(19, now + niceness))
                except ProcessLookupError:  # the thread ended meanwhile
                    continue
        elif hasattr(os, "nice"):
            os.nice(niceness)
    except OSError as e:
        log.warning("could not lower the worker's priority: %s", e)


def _leave(signum: int, frame: object) -> None:
    raise SystemExit(0)


def stop_workers(procs: list, timeout: float = 10.0) -> None:
    r"""Stop the worker processes of :func:`start_workers`: SIGTERM each (a
    worker leaves cleanly, an open transaction rolled back, once a call in
    progress returns), wait up to ``timeout`` seconds in all, then kill
    any left. Not through a shared ``multiprocessing.Event``: a worker
    killed while it waited on one never says it woke, and ``set()`` then
    waits for ever, holding the lock the others need to see it."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(timeout=1.0)


def start_process(
    target: Callable[..., Any],
    args: tuple = (),
    kwargs: dict[str, Any] | None = None,
    name: str | None = None,
    threads: int | None = None,
) -> BaseProcess:
    r"""Start ``target(*args, **kwargs)`` in a new (spawned, daemonic)
    process with ``threads`` in its environment
    (:func:`~prefbo.utils.threads.children_with_threads`; ``None``: this
    process's environment as it is).

    Returns:
        The started process.
    """
    ctx = multiprocessing.get_context("spawn")
    process = ctx.Process(
        target=target, args=args, kwargs=kwargs or {}, name=name, daemon=True
    )
    with children_with_threads(threads):
        process.start()
    return process


def start_worker(
    url: str, root: str, index: int, threads: int | None = None
) -> BaseProcess:
    r"""Start worker ``index`` (:func:`run_worker` in a process of its own,
    ending on SIGTERM, with ``threads`` threads, see :func:`start_process`);
    returns its process."""
    return start_process(
        _worker_process,
        (url, root, None, index),
        {"parent": os.getpid()},
        name=f"prefbo-worker-{index}",
        threads=threads,
    )


def start_workers(url: str, root: str, workers: int) -> list[BaseProcess]:
    r"""Start ``workers`` worker processes, each with
    :func:`~prefbo.utils.threads.child_threads` threads (stop them with
    :func:`stop_workers`; :class:`WorkerSupervisor` also restarts one that
    dies); returns them."""
    threads = child_threads(workers)
    return [start_worker(url, root, i, threads) for i in range(workers)]


def exit_status(exitcode: int | None) -> str | None:
    r"""How a process ended, in words (``None``: it has not)."""
    if exitcode is None:
        return None
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


@dataclass
class _Slot:
    r"""One worker index of a :class:`WorkerSupervisor`."""

    index: int
    process: BaseProcess | None = None
    started_at: float = 0.0
    restarts: int = 0
    quick_deaths: int = 0  # deaths in a row, each soon after its start
    restart_at: float | None = None  # a dead worker's next start
    last_exit: str | None = None


class WorkerSupervisor:
    r"""Starts the worker processes and keeps them running.

    A thread (:meth:`start`) calls :meth:`check` every ``poll`` seconds: a
    worker that died (killed for memory, crashed) is reaped, logged as a
    warning naming its index, process and exit status (one ended by SIGTERM,
    as at a shutdown, as information), and started again
    with the same index: at once if it had run ``stable`` seconds, else
    after a pause that doubles with each such death in a row, from
    ``backoff`` up to ``max_backoff`` seconds (a worker that cannot start
    does not spin). A worker that died without leaving gives up its
    heartbeat and its participants' leases at once
    (:meth:`~prefbo.serve.store.Store.leave` under its
    :func:`~prefbo.serve.sharing.worker_name`), so the other workers take
    its participants over at their next renewal instead of when the leases
    lapse. :meth:`status` says how each one is, for the health check; use
    it as a context manager, or :meth:`start` and :meth:`stop`.

    Args:
        url: The study's database.
        root: The study file's folder.
        workers: The number of worker processes.
        poll: Seconds between two checks.
        stable: Seconds a worker must run for its death not to count as a
            failed start.
        backoff: The pause before the first restart after a failed start,
            in seconds.
        max_backoff: The longest pause, in seconds.
        start: Starts worker ``index`` and returns its process (default:
            :func:`start_worker` with
            :func:`~prefbo.utils.threads.child_threads` threads).
    """

    def __init__(
        self,
        url: str,
        root: str,
        workers: int,
        poll: float = 0.5,
        stable: float = 10.0,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        start: Callable[[int], BaseProcess] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1; got {workers}.")
        if start is None:
            threads = child_threads(workers)

            def start(index: int) -> BaseProcess:
                return start_worker(url, root, index, threads)

        self.url = url
        self.poll, self.stable = poll, stable
        self.backoff, self.max_backoff = backoff, max_backoff
        self._start = start
        self._slots = [_Slot(i) for i in range(workers)]
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._store: Store | None = None  # opened at the first release

    def start(self) -> WorkerSupervisor:
        r"""Start every worker and the thread that watches them; returns
        ``self``."""
        with self._lock:
            for slot in self._slots:
                self._launch(slot)
        self._thread = threading.Thread(
            target=self._watch, name="prefbo-worker-supervisor", daemon=True
        )
        self._thread.start()
        return self

    def check(self) -> list[int]:
        r"""Reap the workers that died (each logged) and start those whose
        pause is over; returns the indices started."""
        started = []
        with self._lock:
            if self._stopping.is_set():
                return started
            now = time.monotonic()
            for slot in self._slots:
                process = slot.process
                if process is not None and not process.is_alive():
                    process.join(timeout=0)
                    code = process.exitcode
                    asked = code in (0, -signal.SIGTERM)  # stopped, not crashed
                    self._died(slot, exit_status(code), now, asked)
                if slot.restart_at is not None and now >= slot.restart_at:
                    slot.restarts += 1
                    if self._launch(slot):
                        log.info(
                            "worker %d restarted (pid %s)", slot.index, slot.process.pid
                        )
                        started.append(slot.index)
        return started

    def status(self) -> list[dict[str, Any]]:
        r"""Each worker: ``index``, ``pid``, ``alive``, ``restarts`` (how
        often it was started again), ``last_exit`` (how its last process
        ended, ``None`` before any) and ``restart_in`` (seconds until a dead
        one is started again, else ``None``), after a :meth:`check`."""
        self.check()
        with self._lock:
            now = time.monotonic()
            return [
                {
                    "index": slot.index,
                    "pid": None if slot.process is None else slot.process.pid,
                    "alive": slot.process is not None and slot.process.is_alive(),
                    "restarts": slot.restarts,
                    "last_exit": slot.last_exit,
                    "restart_in": None
                    if slot.restart_at is None
                    else round(max(0.0, slot.restart_at - now), 1),
                }
                for slot in self._slots
            ]

    def stop(self, timeout: float = 10.0) -> None:
        r"""Stop watching, then stop the workers (:func:`stop_workers`)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            procs = [s.process for s in self._slots if s.process is not None]
            stop_workers(procs, timeout)
        if self._store is not None:
            self._store.engine.dispose()

    def __enter__(self) -> WorkerSupervisor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _watch(self) -> None:
        while not self._stopping.wait(self.poll):
            try:
                self.check()
            except Exception:  # the next check tries again
                log.exception("checking the workers failed")

    def _launch(self, slot: _Slot) -> bool:
        r"""Start ``slot``'s worker; a start that fails counts as a death."""
        slot.restart_at = None
        now = time.monotonic()
        try:
            slot.process = self._start(slot.index)
        except Exception as e:  # e.g. out of processes: try again later
            slot.process = None
            slot.started_at = now
            self._died(slot, f"could not be started: {e!r}", now)
            return False
        slot.started_at = now
        return True

    def _died(
        self, slot: _Slot, how: str | None, now: float, asked: bool = False
    ) -> None:
        r"""Log ``slot``'s death (a warning; ``asked``: information, as a
        worker ended by SIGTERM at a shutdown) and plan its restart."""
        ran = now - slot.started_at
        if ran >= self.stable:
            slot.quick_deaths, pause = 0, 0.0
        else:
            slot.quick_deaths += 1
            pause = min(self.max_backoff, self.backoff * 2 ** (slot.quick_deaths - 1))
        what = "" if slot.process is None else f" (pid {slot.process.pid}) died:"
        if slot.process is not None and not asked:
            self._release(slot.process.pid)
        slot.process, slot.last_exit, slot.restart_at = None, how, now + pause
        log.log(
            logging.INFO if asked else logging.WARNING,
            "worker %d%s %s after %.1f s; restarting it in %g s",
            slot.index,
            what,
            how,
            ran,
            pause,
        )

    def _release(self, pid: int | None) -> None:
        r"""Drop the heartbeat and leases of the dead worker process ``pid``
        (logged where the database does not take it: they then lapse)."""
        if pid is None:
            return
        try:
            if self._store is None:
                self._store = Store(self.url)
            self._store.leave(worker_name(pid))
        except Exception:
            log.exception("releasing the leases of worker process %s failed", pid)


def health_report(
    store: Store, supervisor: WorkerSupervisor | None = None
) -> dict[str, Any]:
    r"""What ``/healthz`` says: ``ok`` when the database took a write
    (:meth:`~prefbo.serve.store.Store.write_probe`) and every worker is
    alive.

    Returns:
        ``{"ok": bool, "database": {"ok": bool, "error": str | None},
        "workers": [...]}``, the workers as :meth:`WorkerSupervisor.status`
        says (none without a supervisor).
    """
    error = store.write_probe()
    workers = [] if supervisor is None else supervisor.status()
    return {
        "ok": error is None and all(w["alive"] for w in workers),
        "database": {"ok": error is None, "error": error},
        "workers": workers,
    }
