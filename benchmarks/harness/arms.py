r"""Scripts that run arms over seeds fixed before the run, one record each.

Such a script (``serve_lone``, ``study_faces``) measures one outcome per
arm and seed. :func:`parse` reads the options they share (``--arms``,
``--seeds``, ``--output``, ``--report-only``), :func:`run_missing` runs each
arm and seed its store lacks (a rerun resumes; each record gets its seconds
and this process's environment) and :func:`write_page` writes the page,
keeping its hand-written block (:func:`~benchmarks.harness.reports.hand_written`).
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import environment, stores
from benchmarks.harness.reports import hand_written
from benchmarks.harness.runner import BENCHMARKS, RUNNER

#: Where the published pages and stores are.
RESULTS = BENCHMARKS / "results"


def parse(
    argv: Sequence[str],
    name: str,
    doc: str,
    arms: Sequence[str],
    seeds: Sequence[int],
) -> argparse.Namespace:
    r"""The options of script ``name`` (its docstring ``doc``): ``arms`` and
    ``seeds`` to run (default all), ``output`` (the folder of its store
    ``name.jsonl`` and page ``name.md``: ``args.store``, ``args.page``) and
    ``report_only``."""
    parser = argparse.ArgumentParser(
        prog=f"{RUNNER} {name}", description=doc.split("\n\n")[0]
    )
    parser.add_argument("--arms", nargs="+", choices=list(arms), default=list(arms))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(seeds))
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(list(argv))
    args.store = args.output / f"{name}.jsonl"
    args.page = args.output / f"{name}.md"
    return args


def run_missing(
    args: argparse.Namespace, run: Callable[[str, int], dict[str, Any]]
) -> None:
    r"""``run(arm, seed)`` for each of ``args.arms`` and ``args.seeds`` that
    ``args.store`` holds no record of, each record appended as it ends
    (``{"arm", "seed", **run(...), "seconds", "env"}``; warnings silenced)."""
    done = {(r["arm"], r["seed"]) for r in stores.read(args.store)}
    for arm in args.arms:
        for seed in args.seeds:
            if (arm, seed) in done:
                continue
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = run(arm, seed)
            record = {"arm": arm, "seed": seed, **out}
            record["seconds"] = round(time.perf_counter() - start, 2)
            record["env"] = environment.record()
            stores.append(args.store, record)
            print(f"{arm} seed {seed}: {out}", flush=True)


def write_page(page: Path, text: str) -> str:
    r"""Write ``text`` to ``page`` followed by the page's hand-written
    block, if it has one; returns what was written."""
    kept = hand_written(page)
    written = text + (f"\n{kept}\n" if kept else "")
    page.write_text(written, encoding="utf-8")
    return written
