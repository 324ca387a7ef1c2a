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
:data:`SMALL` latent values) or the machine is busy (its one-minute load
average above its usable cores); otherwise it leaves the threads as they
are. The limit is the OpenMP thread count of the *calling thread* only
(``omp_set_num_threads`` through ``threadpoolctl``, restored on leaving):
other threads of the process, e.g. a server's request threads, keep theirs,
and ``torch.set_num_threads`` (process-wide state, MKL's included) is never
called.

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
from collections.abc import Iterator

import torch
from threadpoolctl import ThreadpoolController

#: latent values (training designs, or the batch's total) below which a
#: call's work runs on one thread; see ``benchmarks/results/threads.md``
SMALL = 1_200

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


def machine_busy() -> bool:
    r"""Whether more threads are runnable than there are usable cores (the
    one-minute load average, which counts this process's own running
    thread); ``False`` where the platform has no load average."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return False
    return load > usable_cores()


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
    with runtimes.limit(limits=count):
        yield


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
