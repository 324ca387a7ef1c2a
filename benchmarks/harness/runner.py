r"""``python -m benchmarks NAME [options]``: the suite's one runner.

Each name is a module ``benchmarks/NAME.py`` with a ``main()`` that reads its
options from ``sys.argv[1:]`` (as if the script were started alone), or a
shell script of :data:`SHELL_SCRIPTS`. ``python -m benchmarks`` (or
``--help``) lists the names with the first line of each one's docstring;
``python -m benchmarks NAME --help`` gives the script's own options.

Run from the repository root (``python -m`` finds :mod:`benchmarks` there). A
script that starts copies of itself or of another script in fresh
interpreters uses :func:`child_command` and :data:`REPO` as their working
folder.

This module imports no torch: a sharded script sets its thread variables
when it is imported, after the runner has put its options in ``sys.argv``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: The repository root: the working folder of child processes.
REPO = Path(__file__).resolve().parents[2]
#: The suite's folder.
BENCHMARKS = REPO / "benchmarks"
#: How a page writes the runner.
RUNNER = "python -m benchmarks"

#: The scripts behind the published pages, in the order ``--help`` lists them.
SCRIPTS = (
    "laplace_vs_botorch",
    "pbo_regret",
    "threads",
    "eubo_optimizer",
    "inference_accuracy",
    "sampler_throughput",
    "variational_scale",
    "inducing_allocators",
    "inducing_bo",
    "preference_thompson",
    "skew_memory",
    "space_regret",
    "population_study",
    "study_faces",
    "population_scale",
    "collaborative_heldout",
    "collaborative_speed",
    "collaborative_items",
    "serve_load",
    "serve_lone",
    "gpu",
    "fingerprint",
)
#: Shell scripts run by name (a machine's whole run: tests and benchmarks).
SHELL_SCRIPTS = {"gpu_device": "gpu_device.sh"}


def names() -> tuple[str, ...]:
    r"""Every name the runner runs: :data:`SCRIPTS`, then the shell scripts."""
    return (*SCRIPTS, *SHELL_SCRIPTS)


def summary(name: str) -> str:
    r"""The first paragraph of script ``name``'s docstring (read, not
    imported) on one line, or the first line of a shell script's comments."""
    if name in SHELL_SCRIPTS:
        text = (BENCHMARKS / SHELL_SCRIPTS[name]).read_text(encoding="utf-8")
        comments = [line for line in text.splitlines()[1:] if line.startswith("#")]
        return comments[0].lstrip("# ").strip() if comments else ""
    tree = ast.parse((BENCHMARKS / f"{name}.py").read_text(encoding="utf-8"))
    doc = (ast.get_docstring(tree) or "").strip()
    return " ".join(doc.split("\n\n")[0].split())


def child_command(name: str, *args: str) -> list[str]:
    r"""The argument list that runs script ``name`` with ``args`` in a fresh
    interpreter (this one's executable), to be started in :data:`REPO`."""
    return [sys.executable, "-m", "benchmarks", name, *args]


def listing() -> str:
    r"""The ``--help`` text: usage and every name with its summary."""
    width = max(map(len, names()))
    rows = [f"  {name:<{width}}  {summary(name)}" for name in names()]
    return "\n".join(
        [
            f"usage: {RUNNER} NAME [options]   ({RUNNER} NAME --help: its options)",
            "",
            "prefbo's benchmarks; pages go to benchmarks/results/ (index: "
            "benchmarks/results/README.md).",
            "",
            "names:",
            *rows,
            "",
        ]
    )


def run(name: str, args: Sequence[str]) -> int:
    r"""Run ``name`` with ``args``; its exit status.

    A Python script is imported with ``sys.argv = ["python -m benchmarks
    NAME", *args]`` and its ``main()`` called; an integer it returns is the
    status, anything else is 0. A shell script runs in :data:`REPO` with
    ``bash``.
    """
    if name in SHELL_SCRIPTS:
        script = BENCHMARKS / SHELL_SCRIPTS[name]
        return subprocess.call(["bash", str(script), *args], cwd=REPO)
    sys.argv = [f"{RUNNER} {name}", *args]
    module = importlib.import_module(f"benchmarks.{name}")
    result = module.main()
    return result if isinstance(result, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    r"""The runner's command line: ``NAME [options]``, or ``--help``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(listing())
        return 0
    name, args = argv[0], argv[1:]
    if name not in names():
        parser = argparse.ArgumentParser(prog=RUNNER)
        parser.error(
            f"no benchmark named {name!r}; the names are {', '.join(names())} "
            f"(`{RUNNER} --help` describes them)"
        )
    return run(name, args)
