r"""The machine, its threads and the library versions: what a run ran on.

Every stored run and every page records the three, since a figure means
little without them: the speed of a shared 2-core machine moves by up to
±30 % between runs, torch's default threads make a loaded machine 10-35x
slower (``benchmarks/results/threads.md``), and a loop's path depends on the
last bits of its objectives, so the same seeds end elsewhere under other
releases of numpy or scipy.

- :func:`machine`: the processor and its core count;
- :func:`threads`: this process's thread settings
  (:func:`prefbo.utils.threads.describe`); :func:`thread_variables`: the
  variables that set them, as a command line sets them;
- :func:`versions` / :func:`versions_text`: Python's and the libraries';
- :func:`load_average`: the one-minute load average, a sign of competing work;
- :func:`record`: the three (and the load) as a store's record holds them;
- :func:`lines`: the three as a page shows them, from a record (stored or
  current), or a line saying they were not recorded.

Nothing here imports torch at import time: a sharded script imports the
harness before it sets its thread variables.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from collections.abc import Mapping, Sequence
from typing import Any

#: The distributions whose versions a run records, in this order.
VERSIONED = ("torch", "numpy", "scipy", "botorch", "gpytorch", "linear_operator")

#: What a page says where a run predates the records of its environment.
NOT_RECORDED = "not recorded"
#: The variables that set a process's threads (OpenMP, MKL, prefbo's policy).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PREFBO_THREADS")


def machine() -> str:
    r"""The processor and its cores, e.g. ``"x86_64, 2 CPUs"``."""
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"


def threads() -> str:
    r"""This process's thread settings, :func:`prefbo.utils.threads.describe`
    (imports torch)."""
    from prefbo.utils.threads import describe

    return describe()


def thread_variables() -> dict[str, str]:
    r"""The :data:`THREAD_VARIABLES` set in this process's environment, as a
    command line would set them."""
    return {k: os.environ[k] for k in THREAD_VARIABLES if os.environ.get(k)}


def without_thread_variables() -> dict[str, str]:
    r"""This process's environment with no :data:`THREAD_VARIABLES`: how a
    user who set none starts a process."""
    return {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}


def versions(names: Sequence[str] = VERSIONED) -> dict[str, str]:
    r"""``{"python": ..., name: version}`` for Python and each of ``names``
    (installed distributions) in this process.

    Args:
        names: Distribution names (default :data:`VERSIONED`).

    Returns:
        The versions, Python's first, then ``names``' in their order.
    """
    out = {"python": platform.python_version()}
    for name in names:
        out[name] = importlib.metadata.version(name)
    return out


def versions_text(names: Sequence[str] = VERSIONED) -> str:
    r"""``"Python 3.11.7, torch 2.13.0+cpu, ..."``: :func:`versions` as text."""
    found = versions(names)
    python = found.pop("python")
    return ", ".join([f"Python {python}", *(f"{k} {v}" for k, v in found.items())])


def machine_and_versions(names: Sequence[str] = VERSIONED) -> str:
    r"""``"x86_64, 2 CPUs; Python 3.11.7, torch 2.13.0+cpu, ..."``."""
    return f"{machine()}; {versions_text(names)}"


def load_average() -> float | None:
    r"""The one-minute load average; ``None`` where the platform has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def record() -> dict[str, Any]:
    r"""This process's environment as a store's record holds it:
    ``{"machine": str, "threads": str, "versions": {name: version},
    "load": float | None}`` (imports torch, through :func:`threads`)."""
    return {
        "machine": machine(),
        "threads": threads(),
        "versions": versions(),
        "load": load_average(),
    }


def lines(env: Mapping[str, Any] | None = None) -> list[str]:
    r"""The machine, threads and versions as a page's bullet lines.

    Args:
        env: A record of :func:`record`'s form (a stored run's; missing keys
            are said not to be recorded); ``None`` for this process's.

    Returns:
        ``["- machine: ...", "- threads: ...", "- versions: ..."]``.
    """
    env = record() if env is None else env
    found = env.get("versions")
    if isinstance(found, Mapping):
        found = ", ".join(f"{k} {v}" for k, v in found.items())
    return [
        f"- machine: {env.get('machine') or NOT_RECORDED}",
        f"- threads: {env.get('threads') or NOT_RECORDED}",
        f"- versions: {found or NOT_RECORDED}",
    ]
