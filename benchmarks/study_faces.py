r"""Participants whose best lies on a face: ``PopulationStudy``'s boundary step.

The collaborative study keeps its questions a step inside the faces of
the box with virtual comparisons there (``boundary_step``,
:data:`~prefbo.loop.boundary.DEFAULT_STEP` by default; the loop's for a
lone participant, the batched step's for everyone else). This benchmark
measures what that costs people whose best design lies on a face, against
``boundary_step=None``.

The setting (fixed before the run; seeds ``SEEDS``):

- designs: the unit square; participant ``p`` (0, 1, 2) has the utility
  ``u_p(x) = 2 x_0 - ((x_1 - y_p) / 0.25)^2 / 2``, ``y_p = 0.3 + 0.1 p``:
  a ramp up to the face ``x_0 = 1`` and a bump in ``x_1``; answers with
  noise ``σ = 0.1`` (:class:`~prefbo.test_functions.SimulatedPerson`,
  seed ``1000 seed + p``);
- one :class:`~prefbo.loop.PopulationStudy` per seed and arm (the default
  collaborative kind and EUBO, study seed = the run's seed); the
  participants arrive one after another, 12 answers each;
- regret of participant ``p``: ``max u_p`` over a 201 x 201 grid minus
  ``u_p`` at ``best(name)`` after their 12 answers;
- arms: ``default`` (``boundary_step = DEFAULT_STEP``) and ``none``
  (``boundary_step=None``); a paired Wilcoxon signed-rank test (scipy,
  two-sided) over the participants of all seeds.

Each run appends one record per seed and arm to a JSON-lines store; a
rerun skips what it holds. As users run it (no thread variable)::

    python -m benchmarks study_faces
    python -m benchmarks study_faces --report-only
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
from scipy.stats import wilcoxon

from benchmarks.harness import arms, environment, stores
from prefbo.loop.boundary import DEFAULT_STEP
from prefbo.loop.study import PopulationStudy
from prefbo.test_functions import SimulatedPerson

SEEDS = tuple(range(70, 80))
ARMS = {"default": DEFAULT_STEP, "none": None}
PEOPLE, ANSWERS = 3, 12
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
_AXIS = torch.linspace(0, 1, 201, dtype=torch.float64)
GRID = torch.cartesian_prod(_AXIS, _AXIS)


def utility(p: int):
    r"""Participant ``p``'s utility of ``... x 2`` designs."""
    y = 0.3 + 0.1 * p
    return lambda X: 2.0 * X[..., 0] - ((X[..., 1] - y) / 0.25) ** 2 / 2


def run(arm: str, seed: int) -> dict:
    r"""One study of ``PEOPLE`` participants: each one's regret and the
    first coordinate of their recommendation."""
    study = PopulationStudy(BOUNDS, seed=seed, boundary_step=ARMS[arm])
    out: dict = {}
    for p in range(PEOPLE):
        u = utility(p)
        person = SimulatedPerson(u, noise_std=0.1, seed=1000 * seed + p)
        for _ in range(ANSWERS):
            X = study.ask(f"p{p}")
            study.tell(f"p{p}", int(person.compare(X[0], X[1])))
        x = study.best(f"p{p}")[0]
        out[f"regret_{p}"] = float(u(GRID).max()) - float(u(x.unsqueeze(0)))
        out[f"x_{p}"] = float(x[0])
    study.close()
    return out


def report(store: Path) -> str:
    r"""The page of the runs in ``store``."""
    records = stores.latest(stores.read(store), lambda r: (r["arm"], r["seed"]))
    by = {(r["arm"], r["seed"]): r for r in records}
    seeds = [s for s in SEEDS if all((a, s) in by for a in ARMS)]
    if not seeds:
        return "No seed has a run of every arm yet.\n"
    lines = [
        "# Participants whose best lies on a face: the study's boundary step",
        "",
        "Written by `python -m benchmarks study_faces` from "
        "`study_faces.jsonl`; the setting is the script's docstring. "
        f"Seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}), fixed before the run.",
        "",
        f"After {ANSWERS} answers each, mean (median) over the seeds: regret, "
        "and the recommendation's first coordinate (the best is at 1).",
        "",
        "| participant | default: regret | default: x_0 | none: regret | none: x_0 |",
        "|---|---|---|---|---|",
    ]

    def cell(values: list[float]) -> str:
        return f"{statistics.mean(values):.3f} ({statistics.median(values):.3f})"

    for p in range(PEOPLE):
        row = [str(p + 1)]
        for arm in ARMS:
            row.append(cell([by[arm, s][f"regret_{p}"] for s in seeds]))
            row.append(cell([by[arm, s][f"x_{p}"] for s in seeds]))
        lines.append("| " + " | ".join(row) + " |")
    pooled = {
        arm: [by[arm, s][f"regret_{p}"] for s in seeds for p in range(PEOPLE)]
        for arm in ARMS
    }
    p_value = wilcoxon(pooled["none"], pooled["default"]).pvalue
    lower = sum(a < b for a, b in zip(pooled["none"], pooled["default"], strict=True))
    lines += [
        "",
        f"Pooled over the {len(pooled['none'])} participants: regret "
        f"{statistics.mean(pooled['none']):.3f} with `boundary_step=None` "
        f"against {statistics.mean(pooled['default']):.3f} with the default "
        f"(paired Wilcoxon p = {p_value:.2g}; lower for {lower}).",
        "",
        "Machine (of the first record):",
        *environment.lines(by["default", seeds[0]].get("env")),
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    return arms.parse(argv, "study_faces", __doc__, list(ARMS), SEEDS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.report_only:
        arms.run_missing(args, run)
    print(arms.write_page(args.page, report(args.store)))
    return 0
