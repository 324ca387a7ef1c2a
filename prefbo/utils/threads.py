r"""prefbo's thread policy: small work on one thread, large work on every
core the machine can spare.

torch's CPU build runs its parallel loops, and MKL's linear algebra, on an
OpenMP thread team: every parallel operation wakes every thread of the team
and waits at a barrier for the slowest. A preference model does many small
operations (a Newton step on a few hundred latent values, the loop's
per-answer fit and question); for them the wake-ups and barriers cost more
than the second core gains, and when other processes keep the cores busy a
barrier waits for a thread the operating system has not scheduled, which
made prefbo's fits 10-35x slower under load (``benchmarks/threads.py``
measures this; its page is ``benchmarks/results/threads.md``).

:func:`limited` runs its block on one thread when the work is small (below
:data:`SMALL` latent values) or the machine is busy (other processes' threads
running right now leave fewer than two cores free); otherwise it leaves the
threads as they are. The limit is the OpenMP thread count of the *calling thread* only
(``omp_set_num_threads`` through ``threadpoolctl``, restored on leaving):
other threads of the process, e.g. a server's request threads, keep theirs,
and ``torch.set_num_threads`` (process-wide state, MKL's included) is never
called. NumPy's OpenBLAS (the loop's question optimisers run SciPy on NumPy
objectives) has one thread count for the whole process: it is one while any
thread is inside such a block and restored when the last one leaves; under
load its spinning threads made the loop's answers 2x slower.

A user's own choice wins: when ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` is
set, when the calling thread's count is not the count torch had when prefbo
was imported (``torch.set_num_threads`` was called since), or when
``PREFBO_THREADS=off``, :func:`limited` changes nothing. A process that
prefbo starts with its share of the cores (a ``prefbo serve`` worker) has
those variables set by prefbo and ``PREFBO_THREADS=auto``, which keeps the
policy on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from threadpoolctl import ThreadpoolController

#: latent values (training designs, or the batch's total) below which a
#: call's work runs on one thread (the loop's per-answer work: its many tiny
#: operations ran 2.4x slower on two threads than on one, while fits from
#: n = 200 gain from a second idle core); see ``benchmarks/results/threads.md``
SMALL = 200

#: the calling thread's torch thread count when prefbo was imported: any
#: other count is the user's choice
IMPORT_THREADS = torch.get_num_threads()

USER_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

_lock = threading.Lock()


@functools.cache
def _openmp() -> ThreadpoolController | None:
    r"""The OpenMP runtimes loaded in the process (torch's among them), found
    once; ``None`` where there is none (a torch built without OpenMP)."""
    with _lock:
        found = ThreadpoolController().select(user_api="openmp")
    return found if found.lib_controllers else None


def usable_cores() -> int:
    r"""The cores this process may run on (its CPU affinity where the
    platform says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def others_running() -> int | None:
    r"""Threads of other processes running or ready to run right now
    (Linux: the system's runnable count less this process's own; ``None``
    where the platform does not say)."""
    try:
        total = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
        ours = 0
        for task in os.listdir("/proc/self/task"):
            try:
                stat = Path(f"/proc/self/task/{task}/stat").read_text()
            except OSError:  # the thread ended meanwhile
                continue
            ours += stat.rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, IndexError, ValueError):
        return None
    return max(0, total - ours)


def machine_busy() -> bool:
    r"""Whether other processes keep the cores busy: fewer than two usable
    cores left free by the threads of other processes running right now
    (:func:`others_running`), or, where the platform does not count them,
    a one-minute load average above the usable cores less one; read at most
    every :data:`BUSY_SECONDS`. An OpenMP team on a core another process
    holds waits at each barrier for a thread the system has not scheduled."""
    now = time.monotonic()
    seen, busy = _busy
    if now - seen < BUSY_SECONDS:
        return busy
    cores = usable_cores()
    others = others_running()
    if others is not None:
        busy = cores - others < 2
    else:
        try:
            busy = os.getloadavg()[0] > cores - 1
        except (AttributeError, OSError):
            busy = False
    _busy[:] = [now, busy]
    return busy


#: seconds a reading of :func:`machine_busy` is reused (reading costs ~0.1 ms)
BUSY_SECONDS = 0.5
_busy: list = [-float("inf"), False]


def user_chose_threads() -> bool:
    r"""Whether the user set the thread count themselves (an environment
    variable, unless ``PREFBO_THREADS=auto`` says prefbo set it;
    ``torch.set_num_threads`` since prefbo was imported; or
    ``PREFBO_THREADS=off``)."""
    policy = os.environ.get("PREFBO_THREADS", "").lower()
    if policy == "off":
        return True
    if policy != "auto" and any(os.environ.get(v) for v in USER_VARIABLES):
        return True
    return torch.get_num_threads() != IMPORT_THREADS


def threads_for(size: int) -> int | None:
    r"""The thread count prefbo's policy gives work of ``size`` latent
    values: ``1`` for small work or on a busy machine, ``None`` (leave the
    threads as they are) for large work, where there is only one thread
    anyway, or where the user chose the count."""
    if torch.get_num_threads() == 1 or user_chose_threads():
        return None
    if size < SMALL or machine_busy():
        return 1
    return None


@contextlib.contextmanager
def limited(size: int) -> Iterator[None]:
    r"""Run the block with the thread count :func:`threads_for` gives
    ``size`` (the calling thread only; restored on leaving).

    Args:
        size: The work's size in latent values: the number of training
            designs of a fit, or of the model a question is asked of.

    Example:
        >>> with limited(n):
        ...     model = fit(model)
    """
    count = threads_for(size)
    runtimes = None if count is None else _openmp()
    if runtimes is None:
        yield
        return
    with runtimes.limit(limits=count), _one_blas_thread():
        yield


@functools.cache
def _blas() -> ThreadpoolController | None:
    r"""The BLAS libraries of the process that torch does not hold (numpy's
    OpenBLAS, under SciPy's optimisers), found once; ``None`` if none."""
    with _lock:
        found = ThreadpoolController().select(user_api="blas")
    return found if found.lib_controllers else None


_blas_users = 0
_blas_limiter: Any = None


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    r"""One thread for the BLAS libraries of :func:`_blas` while any thread
    of the process is inside the block. Their thread count is one setting
    for the whole process, so the first thread in sets it and the last one
    out restores it (counted under a lock)."""
    global _blas_users, _blas_limiter
    runtimes = _blas()
    if runtimes is None:
        yield
        return
    with _lock:
        if _blas_users == 0:
            _blas_limiter = runtimes.limit(limits=1)
        _blas_users += 1
    try:
        yield
    finally:
        with _lock:
            _blas_users -= 1
            if _blas_users == 0:
                _blas_limiter.restore_original_limits()
                _blas_limiter = None


def describe() -> str:
    r"""The thread settings of this process in one line, for a benchmark's
    page: torch's threads, the thread variables, whether the policy applies
    and the cores, e.g. ``"torch threads 2; OMP_NUM_THREADS unset,
    MKL_NUM_THREADS unset, PREFBO_THREADS unset; prefbo's policy on; 2 usable
    cores"``."""
    variables = ", ".join(
        f"{v}={os.environ[v]}" if os.environ.get(v) else f"{v} unset"
        for v in (*USER_VARIABLES, "PREFBO_THREADS")
    )
    policy = "off (the user's setting)" if user_chose_threads() else "on"
    return (
        f"torch threads {torch.get_num_threads()}; {variables}; prefbo's policy "
        f"{policy}; {usable_cores()} usable cores"
    )


#: Set in the environment of a process prefbo starts (with
#: :data:`POLICY_VARIABLE`). Not ``MKL_NUM_THREADS``: MKL without a count of
#: its own follows the calling thread's OpenMP count, which :func:`limited`
#: lowers to one for small work; an MKL count overrides it (a served
#: model's 2-answer fit took 40 s under load with ``MKL_NUM_THREADS=2``, 4 s
#: without).
CHILD_VARIABLE = "OMP_NUM_THREADS"
#: Set beside it: the count is prefbo's, so its thread policy still applies.
POLICY_VARIABLE = ("PREFBO_THREADS", "auto")
_environ_lock = threading.Lock()


def child_threads(processes: int) -> int | None:
    r"""The thread count of each of ``processes`` processes prefbo starts
    side by side: the cores this process may run on, shared out, at least 1;
    ``None`` where the user chose (:data:`USER_VARIABLES` set, or
    ``PREFBO_THREADS=off``): the processes inherit the environment as it is."""
    if any(os.environ.get(key) for key in USER_VARIABLES):
        return None
    if os.environ.get(POLICY_VARIABLE[0], "").strip().lower() == "off":
        return None
    return max(1, usable_cores() // max(1, processes))


@contextlib.contextmanager
def children_with_threads(threads: int | None) -> Iterator[None]:
    r"""Processes started in the block get ``threads`` in their environment
    (:data:`CHILD_VARIABLE`, with :data:`POLICY_VARIABLE`; ``None``: this
    process's environment as it is). A spawned process imports torch before
    it runs its target, and torch reads its thread count then, so the count
    must be in the environment from its start: it is set in this process's
    environment for the block, under a lock, and restored (torch's own count
    here is left alone)."""
    if threads is None:
        yield
        return
    variables = {CHILD_VARIABLE: str(threads), POLICY_VARIABLE[0]: POLICY_VARIABLE[1]}
    with _environ_lock:
        saved = {key: os.environ.get(key) for key in variables}
        os.environ.update(variables)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
