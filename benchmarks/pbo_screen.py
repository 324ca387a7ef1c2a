r"""A screen's summary: loop variants against a reference on the same runs.

The screens of ``results/pbo_regret_diagnosis.md`` (sections 12-21) run
variants of the loop (``pbo_variants.py`` and its siblings) on the tuning
seeds of ``pbo_regret.py``'s setting and compare each with the loop's
default, run by the same scripts under the name ``boundary-0.1``. This
script prints that comparison from the stores, per variant and budget:

- ``ratio`` (the table's "regret / reference's"): the geometric mean over
  paired runs of
  ``(r + 0.001) / (r_ref + 0.001)`` (``r``: final regret at the budget);
  ``median`` ("median ratio"): the exponential of the median log ratio;
- ``cells better``: cells (problem, σ) whose mean log ratio is below 0, and
  cells whose mean regret is below the reference's;
- ``stuck``: runs above 3x BoTorch's median of their cell (BoTorch's runs of
  the cell on the tuning seeds 0-5, in the tuning store
  ``pbo_regret_tuning.jsonl``), with the number of cells they fall in, the
  variant's and the reference's;
- ``drifting`` (whole run): the final regret above 3x the run's least regret
  from answer 20 on, and 0.05 more than it.

A loop's path depends on the last bits of its arithmetic, so a run is only
paired with a reference run made with the same library versions (the
``versions`` a record carries; records without them form one group of their
own). A store can hold the same configuration from several environments;
variants with no reference run in their environment are refused
(:class:`EnvironmentMismatch`) unless ``--any-environment`` is given.

Example (the stores default to the screen store and the reference's rerun
in the current environment, ``pbo_regret_tuning_screen_env2.jsonl``)::

    python benchmarks/pbo_screen.py boundary-dedupe hyper-folded-8
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import pbo_regret  # noqa: E402

REFERENCE = "boundary-0.1"
BUDGETS = (30, 60)
FLOOR = 1e-3  # added to both regrets of a ratio
STUCK = 3.0  # x BoTorch's median of the cell
DRIFT_FROM = 20  # answers after which a run's best counts
DRIFT_FACTOR, DRIFT_MARGIN = 3.0, 0.05
BOTORCH_SEEDS = tuple(range(6))  # the screens' tuning seeds

Run = tuple[str, float, int]  # problem, sigma, seed


class EnvironmentMismatch(ValueError):
    r"""A variant's runs have no reference runs made in their environment."""


def environment(record: dict[str, Any]) -> str:
    r"""The record's library versions as a key (``"unrecorded"`` without)."""
    versions = record.get("versions")
    return "unrecorded" if not versions else json.dumps(versions, sort_keys=True)


def group(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[Run, list]]:
    r"""``(config, environment) -> {(problem, σ, seed): regrets}``; a key met
    twice in one group keeps its first record (as a store's rerun does)."""
    out: dict[tuple[str, str], dict[Run, list]] = defaultdict(dict)
    for r in records:
        runs = out[r["config"], environment(r)]
        runs.setdefault((r["problem"], r["sigma"], r["seed"]), r["regret"])
    return dict(out)


def botorch_limits(
    tuning: Sequence[dict[str, Any]],
    cells: Sequence[tuple[str, float]],
    budget: int,
    seeds: Sequence[int] = BOTORCH_SEEDS,
) -> dict[tuple[str, float], float]:
    r"""Per cell: ``STUCK`` x the median of BoTorch's regret at ``budget``
    over its runs of the cell on ``seeds`` (the screens' tuning seeds, also
    where a screen ran fewer: every screen is counted against one limit).

    Raises:
        ValueError: The tuning store lacks BoTorch's run of a cell and seed.
    """
    values: dict[tuple[str, float], dict[int, float]] = defaultdict(dict)
    for r in tuning:
        cell = r["problem"], r["sigma"]
        if r["config"] == "botorch" and cell in cells and r["seed"] in seeds:
            values[cell].setdefault(r["seed"], r["regret"][budget - 1])
    missing = sorted(
        (c, s) for c in set(cells) for s in seeds if s not in values.get(c, {})
    )
    if missing:
        raise ValueError(f"tuning store has no BoTorch runs of (cell, seed) {missing}.")
    return {c: STUCK * statistics.median(values[c].values()) for c in set(cells)}


def drifting(regret: Sequence[float]) -> bool:
    r"""The run ends well above its best recommendation since ``DRIFT_FROM``."""
    best = min(regret[DRIFT_FROM - 1 :])
    return regret[-1] > DRIFT_FACTOR * best and regret[-1] > best + DRIFT_MARGIN


def compare(
    mine: dict[Run, list],
    ref: dict[Run, list],
    tuning: Sequence[dict[str, Any]],
    budgets: Sequence[int] = BUDGETS,
) -> dict[str, Any]:
    r"""The summary of ``mine`` against ``ref`` on the runs both hold."""
    keys = sorted(set(mine) & set(ref))
    if not keys:
        raise ValueError("no run is held by both the variant and the reference.")
    out: dict[str, Any] = {"runs": len(keys)}
    for b in budgets:
        logs = [
            math.log((mine[k][b - 1] + FLOOR) / (ref[k][b - 1] + FLOOR)) for k in keys
        ]
        cells: dict[tuple[str, float], list[float]] = defaultdict(list)
        means: dict[tuple[str, float], list[float]] = defaultdict(list)
        for k, x in zip(keys, logs):
            cells[k[:2]].append(x)
            means[k[:2]].append(mine[k][b - 1] - ref[k][b - 1])
        limit = botorch_limits(tuning, sorted({k[:2] for k in keys}), b)
        stuck = [k for k in keys if mine[k][b - 1] > limit[k[:2]]]
        stuck_ref = [k for k in keys if ref[k][b - 1] > limit[k[:2]]]
        out[b] = {
            "ratio": math.exp(statistics.fmean(logs)),
            "median": math.exp(statistics.median(logs)),
            "cells_better": sum(statistics.fmean(c) < 0 for c in cells.values()),
            "cells_lower_mean": sum(statistics.fmean(d) < 0 for d in means.values()),
            "cells": len(cells),
            "stuck": (len(stuck), len({k[:2] for k in stuck})),
            "stuck_ref": (len(stuck_ref), len({k[:2] for k in stuck_ref})),
            "mean": statistics.fmean(mine[k][b - 1] for k in keys),
            "mean_ref": statistics.fmean(ref[k][b - 1] for k in keys),
        }
    out["drifting"] = sum(drifting(mine[k]) for k in keys)
    out["drifting_ref"] = sum(drifting(ref[k]) for k in keys)
    return out


def pairs(
    groups: dict[tuple[str, str], dict[Run, list]],
    variants: Sequence[str],
    reference: str,
    any_environment: bool = False,
) -> list[tuple[str, str, str]]:
    r"""``(variant, its environment, the reference's)`` for every environment
    a variant ran in: the same one, or with ``any_environment`` the
    reference's environment sharing the most runs."""
    ref_envs = [e for c, e in groups if c == reference]
    if not ref_envs:
        raise ValueError(f"reference: {reference!r} has no runs in the stores.")
    out = []
    for v in variants:
        envs = [e for (c, e) in groups if c == v]
        if not envs:
            raise ValueError(f"variants: {v!r} has no runs in the stores.")
        for e in envs:
            if (reference, e) in groups:
                out.append((v, e, e))
                continue
            if not any_environment:
                raise EnvironmentMismatch(
                    f"{v!r} ran in {e}; the reference {reference!r} has runs in "
                    f"{ref_envs}: rerun it there, or pass --any-environment."
                )
            shared = max(
                ref_envs,
                key=lambda e2: len(set(groups[v, e]) & set(groups[reference, e2])),
            )
            out.append((v, e, shared))
    return out


def _budgets(at: Sequence[dict[str, Any]], name: str, fmt: str = "{}") -> str:
    return " / ".join(fmt.format(x[name]) for x in at)


def table(
    records: Sequence[dict[str, Any]],
    tuning: Sequence[dict[str, Any]],
    variants: Sequence[str],
    reference: str = REFERENCE,
    any_environment: bool = False,
) -> str:
    r"""The markdown table of ``variants`` against ``reference``."""
    groups = group(records)
    names = {e: f"E{i}" for i, e in enumerate(sorted({e for _, e in groups}))}
    lines = [
        f"| variant (environment; reference's) | runs | regret / {reference}'s "
        "@30 / @60 | median ratio | cells better @30 / @60 (by ratio; by mean) "
        f"| stuck @30 / @60 (cells) | {reference}'s stuck | drifting "
        f"({reference}'s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v, e, e_ref in pairs(groups, variants, reference, any_environment):
        s = compare(groups[v, e], groups[reference, e_ref], tuning)
        at = [s[b] for b in BUDGETS]
        lines.append(
            f"| `{v}` ({names[e]}; {names[e_ref]}) | {s['runs']} | "
            f"{_budgets(at, 'ratio', '{:.2f}')} | {_budgets(at, 'median', '{:.2f}')} | "
            f"{_budgets(at, 'cells_better')}; {_budgets(at, 'cells_lower_mean')} "
            f"of {at[-1]['cells']} | {_budgets(at, 'stuck', '{0[0]} ({0[1]})')} | "
            f"{_budgets(at, 'stuck_ref', '{0[0]} ({0[1]})')} | "
            f"{s['drifting']} ({s['drifting_ref']}) |"
        )
    lines.append("")
    lines += [f"- {n}: {e}" for e, n in names.items()]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:  # noqa: D103
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("variants", nargs="+", help="configurations to summarise")
    p.add_argument(
        "--reference",
        default=REFERENCE,
        help=f"the configuration they are compared with (default {REFERENCE})",
    )
    p.add_argument(
        "--store",
        nargs="+",
        type=Path,
        default=[
            pbo_regret.RESULTS / "pbo_regret_tuning_screen.jsonl",
            pbo_regret.RESULTS / "pbo_regret_tuning_screen_env2.jsonl",
        ],
        help="JSON-lines stores of the runs (default: the screen store and the "
        "reference's rerun in the current environment); give the variants first",
    )
    p.add_argument(
        "--tuning",
        type=Path,
        default=pbo_regret.RESULTS / "pbo_regret_tuning.jsonl",
        help="the store of BoTorch's tuning runs (the stuck limits)",
    )
    p.add_argument(
        "--any-environment",
        action="store_true",
        help="pair a variant's runs with the reference's of another environment "
        "where the reference has none in the variant's",
    )
    args = p.parse_args(argv)
    for path in [*args.store, args.tuning]:
        if not path.is_file():
            p.error(f"--store / --tuning: no file {path}.")
    return args


def main(argv: Sequence[str] | None = None) -> str:
    r"""Print (and return) the table."""
    args = parse_args(argv)
    records = [r for store in args.store for r in pbo_regret.load(store)]
    text = table(
        records,
        pbo_regret.load(args.tuning),
        args.variants,
        args.reference,
        args.any_environment,
    )
    print(text)
    return text


if __name__ == "__main__":
    main()
