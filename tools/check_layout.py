#!/usr/bin/env python
r"""Check that tests mirror the package path by path and that modules stay small.

Rules (paths relative to the repository root):

1. Every module ``prefbo/<path>/<name>.py`` has its tests in
   ``tests/<path>/test_<name>.py`` (``prefbo/cli.py`` -> ``tests/test_cli.py``),
   except ``__init__.py`` / ``__main__.py`` and the modules in
   :data:`UNTESTED_MODULES`.
2. Every ``tests/**/test_*.py`` mirrors a module by rule 1, a top-level
   script ``benchmarks/<name>.py`` as ``tests/benchmarks/test_<name>_script.py``,
   a module of the benchmarks' packages ``benchmarks/<path>/<name>.py`` (the
   harness) as ``tests/benchmarks/<path>/test_<name>.py``, or
   ``tools/<name>.py`` as ``tests/tools/test_<name>.py``, or is listed in
   :data:`UNMIRRORED_TESTS`. Every module of the benchmarks' packages has its
   mirrored test file (rule 1 for them).
3. No module of ``prefbo/`` is longer than ``--max-lines`` (500) lines, except
   those in :data:`LONG_MODULES`.

Each allow-list entry carries its reason; an entry that no longer applies (the
file is gone, or now obeys the rule) is itself reported, so the lists stay
short. Prints what is wrong and exits 1 on any violation.

Usage::

    python tools/check_layout.py [--root DIR] [--max-lines 500]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PACKAGE = "prefbo"
TESTS = "tests"
BENCHMARKS = "benchmarks"
TOOLS = "tools"

#: Modules with no mirrored test file of their own, and why.
UNTESTED_MODULES: dict[str, str] = {
    "prefbo/likelihoods/testing.py": (
        "the likelihood contract suite shipped in the package; every "
        "tests/likelihoods/test_*.py runs it"
    ),
}

#: Test files that mirror no single module or script, and why.
UNMIRRORED_TESTS: dict[str, str] = {
    "tests/tutorials/test_tutorials.py": (
        "runs every tutorials/*.py in its small mode so a tutorial cannot rot"
    ),
    "tests/datasets/test_datasets.py": (
        "tests prefbo/datasets/__init__.py, where that package's code lives"
    ),
    "tests/models/test_laplace_vs_botorch.py": (
        "differential suite of PairwiseLaplaceGP against BoTorch's PairwiseGP"
    ),
    "tests/test_cuda_syncs.py": (
        "counts the host reads of the fits, posterior, EUBO and Thompson "
        "sampling on CUDA, across packages (skipped without a GPU)"
    ),
    "tests/serve/test_browser.py": (
        "drives the participant's and researcher's pages (templates and static "
        "JS, not Python modules) in headless Chromium"
    ),
}

#: Modules allowed over the line limit, and why one algorithm needs the length.
LONG_MODULES: dict[str, str] = {}


def count_lines(path: Path) -> int:
    r"""The number of lines of the text file at ``path``."""
    return len(path.read_text(encoding="utf-8").splitlines())


def mirrored_test(module: str) -> str:
    r"""``prefbo/a/b.py`` -> ``tests/a/test_b.py``;
    ``benchmarks/harness/b.py`` -> ``tests/benchmarks/harness/test_b.py``."""
    parts = Path(module).parts
    if parts[0] == BENCHMARKS:
        return str(Path(TESTS, *parts[:-1], f"test_{parts[-1]}"))
    parts = parts[1:]
    return str(Path(TESTS, *parts[:-1], f"test_{parts[-1]}"))


def mirrored_source(test: str) -> str:
    r"""The file a test file mirrors.

    ``tests/a/test_b.py`` -> ``prefbo/a/b.py``;
    ``tests/benchmarks/test_b_script.py`` -> ``benchmarks/b.py``;
    ``tests/benchmarks/harness/test_b.py`` -> ``benchmarks/harness/b.py``;
    ``tests/tools/test_b.py`` -> ``tools/b.py``.
    """
    parts = Path(test).parts[1:]
    name = parts[-1].removeprefix("test_")
    if parts[:-1] == (BENCHMARKS,) and name.endswith("_script.py"):
        return str(Path(BENCHMARKS, name.removesuffix("_script.py") + ".py"))
    if parts[0] == BENCHMARKS and len(parts) > 2:
        return str(Path(*parts[:-1], name))
    if parts[:-1] == (TOOLS,):
        return str(Path(TOOLS, name))
    return str(Path(PACKAGE, *parts[:-1], name))


def check(root: Path, max_lines: int) -> list[str]:
    r"""Every violation under ``root``, as printable lines grouped by rule."""
    modules = sorted(
        str(p.relative_to(root))
        for p in (root / PACKAGE).rglob("*.py")
        if "__pycache__" not in p.parts
    )
    tests = sorted(
        str(p.relative_to(root))
        for p in (root / TESTS).rglob("test_*.py")
        if "__pycache__" not in p.parts
    )
    # the modules of the benchmarks' packages (benchmarks/<path>/<name>.py),
    # not the top-level scripts
    harness = sorted(
        str(p.relative_to(root))
        for p in (root / BENCHMARKS).glob("*/**/*.py")
        if "__pycache__" not in p.parts
    )
    exists = {*modules, *tests}
    problems: list[str] = []

    def section(title: str, lines: list[str]) -> None:
        if lines:
            problems.append(f"{title} ({len(lines)}):")
            problems.extend(f"  {line}" for line in lines)

    plain = [
        m
        for m in (*modules, *harness)
        if Path(m).name not in ("__init__.py", "__main__.py")
    ]
    section(
        "modules without a mirrored test file",
        [
            f"{m}: expected {mirrored_test(m)}"
            for m in plain
            if m not in UNTESTED_MODULES and mirrored_test(m) not in exists
        ],
    )
    section(
        "test files that mirror no module, benchmark script or tool",
        [
            f"{t}: no {mirrored_source(t)}"
            for t in tests
            if t not in UNMIRRORED_TESTS and not (root / mirrored_source(t)).is_file()
        ],
    )
    lengths = {m: count_lines(root / m) for m in modules}
    section(
        f"modules over {max_lines} lines",
        [
            f"{m}: {n} lines"
            for m, n in sorted(lengths.items(), key=lambda kv: -kv[1])
            if n > max_lines and m not in LONG_MODULES
        ],
    )
    stale = [
        f"UNTESTED_MODULES: {m} "
        + ("does not exist" if m not in exists else f"has {mirrored_test(m)}")
        for m in UNTESTED_MODULES
        if m not in exists or mirrored_test(m) in exists
    ]
    stale += [
        f"UNMIRRORED_TESTS: {t} "
        + ("does not exist" if t not in exists else f"mirrors {mirrored_source(t)}")
        for t in UNMIRRORED_TESTS
        if t not in exists or (root / mirrored_source(t)).is_file()
    ]
    stale += [
        f"LONG_MODULES: {m} "
        + ("does not exist" if m not in exists else f"has {lengths[m]} lines")
        for m in LONG_MODULES
        if m not in exists or lengths[m] <= max_lines
    ]
    section("allow-list entries that no longer apply (remove them)", stale)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check that tests mirror the package and modules stay small."
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the repository root (default: this repository)",
    )
    parser.add_argument("--max-lines", type=int, default=500, help="default: 500")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / PACKAGE / "__init__.py").is_file():
        raise SystemExit(f"error: {root / PACKAGE} is not a package (no __init__.py)")
    problems = check(root, args.max_lines)
    for line in problems:
        print(line)
    print("check_layout: " + ("FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
