r"""Pages: what the scripts write to ``benchmarks/results/``.

A page says how it was made (:func:`command`, in the runner's form, so that
it runs as written), what it ran on (:mod:`benchmarks.harness.environment`)
and what its figures are; a script with a store writes it again from the
store alone. Text a person wrote on a generated page sits between
``<!-- hand -->`` and ``<!-- /hand -->`` and is kept when the page is
written again (:func:`hand_written`).

Runs of another setting than the published one (``--quick`` and the like)
write under :func:`scratch_dir` unless told where, so that a smoke run never
overwrites a published page.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks.harness.environment import thread_variables
from benchmarks.harness.runner import RUNNER

#: A hand-written block of a generated page, markers included.
HAND = re.compile(r"<!-- hand -->.*?<!-- /hand -->", re.S)


def command(
    name: str, argv: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> str:
    r"""The command that runs script ``name`` with ``argv``, as a page shows it.

    Args:
        name: The script's name in the suite (``"pbo_regret"``).
        argv: Its options.
        env: Variables set on the command line (``{"OMP_NUM_THREADS": "1"}``);
            ``None`` for the thread variables set in this process
            (:func:`~benchmarks.harness.environment.thread_variables`).

    Returns:
        E.g. ``"OMP_NUM_THREADS=1 python -m benchmarks pbo_regret --report"``,
        each argument quoted for a POSIX shell where it needs to be.
    """
    env = thread_variables() if env is None else env
    words = [f"{k}={shlex.quote(v)}" for k, v in env.items()]
    words += [RUNNER, name, *(shlex.quote(a) for a in argv)]
    return " ".join(words)


def hand_written(page: Path) -> str:
    r"""The hand-written block (markers included) of the page at ``page``;
    ``""`` where the page or the block does not exist."""
    if not page.exists():
        return ""
    found = HAND.search(page.read_text(encoding="utf-8"))
    return found.group(0) if found else ""


def median(values: Sequence[float]) -> float:
    r"""The median of ``values``; of an even count the mean of the middle two
    (torch's ``median()`` returns the lower one), computed as torch's
    ``quantile(0.5)`` in float64."""
    import torch

    return float(torch.tensor(list(values), dtype=torch.float64).quantile(0.5))


def scratch_dir() -> Path:
    r"""Where runs of another setting than the published one write by
    default: ``<tempdir>/prefbo-quick``."""
    return Path(tempfile.gettempdir()) / "prefbo-quick"


def write(path: Path, text: str) -> Path:
    r"""Write ``text`` to ``path``, creating its folder; ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
