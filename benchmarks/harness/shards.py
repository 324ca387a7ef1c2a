r"""Each shard of a ``--shard i/k`` benchmark gets its share of the cores.

``k`` shards started side by side on one machine would each start torch's
default thread team, one thread per core, and ``k`` teams on the same cores
wait at their barriers for threads the operating system has not scheduled
(``benchmarks/results/threads.md``). So, unless the user set
``OMP_NUM_THREADS``, a shard runs on ``max(1, usable cores // k)`` threads,
as ``prefbo serve`` gives its workers theirs (``prefbo/serve/supervisor.py``),
with ``PREFBO_THREADS=auto`` so that prefbo's thread policy
(``prefbo/utils/threads.py``) still runs small work on one thread.

torch reads its thread count once, when it is imported, so a sharded script
sets the variables first thing, before it imports torch or any module that
does::

    import os
    import sys

    from benchmarks.harness.shards import share_cores_for_shard

    os.environ.update(share_cores_for_shard(sys.argv))  # before torch

    import torch

This module imports only :mod:`os` and :mod:`sys` (not prefbo, which imports
torch), and :mod:`benchmarks` and :mod:`benchmarks.harness` import nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

#: The variables that give a process its thread count (OpenMP, MKL).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: Set beside them: the count is prefbo's, so its thread policy still applies.
POLICY_VARIABLE = ("PREFBO_THREADS", "auto")


def usable_cores() -> int:
    r"""The cores this process may run on (its CPU affinity where the
    platform says, else the machine's count), as
    ``prefbo.utils.threads.usable_cores`` counts them without importing
    torch."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def shard_count(argv: Sequence[str]) -> int:
    r"""The ``k`` of ``--shard i/k`` (or ``--shard=i/k``) in ``argv``; ``1``
    without the option or where its value is not ``i/k`` (the script's own
    parser then says what is wrong)."""
    value = None
    for n, arg in enumerate(argv):
        if arg == "--shard" and n + 1 < len(argv):
            value = argv[n + 1]
        elif arg.startswith("--shard="):
            value = arg.removeprefix("--shard=")
    _, slash, k = (value or "").partition("/")
    return int(k) if slash and k.isdigit() and int(k) > 0 else 1


def share_cores_for_shard(
    argv: Sequence[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    r"""The thread variables a shard of ``argv`` sets: ``OMP_NUM_THREADS`` and
    ``MKL_NUM_THREADS`` at ``max(1, usable cores // k)`` and
    ``PREFBO_THREADS=auto``, each unless ``environ`` has it; none when
    ``--shard`` has ``k = 1`` or ``environ`` sets ``OMP_NUM_THREADS`` (the
    user's choice wins).

    Args:
        argv: The command line (``sys.argv``).
        environ: The environment (default ``os.environ``).

    Returns:
        The variables to set, for ``os.environ.update`` before torch is
        imported.

    Raises:
        RuntimeError: There are variables to set but torch is imported
            already, so they would not reach its thread count.
    """
    environ = os.environ if environ is None else environ
    k = shard_count(argv)
    if k == 1 or environ.get("OMP_NUM_THREADS"):
        return {}
    threads = str(max(1, usable_cores() // k))
    wanted = {name: threads for name in THREAD_VARIABLES}
    wanted[POLICY_VARIABLE[0]] = POLICY_VARIABLE[1]
    found = {name: value for name, value in wanted.items() if not environ.get(name)}
    if found and "torch" in sys.modules:
        raise RuntimeError(
            f"a shard of --shard i/{k} gets its threads from {sorted(found)}, "
            "which must be set before torch is imported, and torch is imported "
            "already; call share_cores_for_shard(sys.argv) at the top of the "
            "script, before any import of torch or of a module that imports it"
        )
    return found
