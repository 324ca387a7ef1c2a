r"""A lone participant of ``prefbo serve``: the model kinds' questions compared.

The first participant of a study run as one-at-a-time sessions (a lab's) is
alone: every answer the model has is theirs. This benchmark asks such a
participant through each serve engine, in process (no server, no database),
as a worker does: the next question is made while the participant looks at
the current one, at the posterior after the answer the model finds likelier,
and stored with the virtual comparisons it carries; a participant answering
with no model question waiting is shown a uniform one.

The setting (fixed before the run; seeds ``SEEDS``):

- the person: ``benchmarks/population_study.py``'s participant 0 of the
  seed (the population bump plus a deviation, answers with noise
  ``σ = 0.1``), on its unit square, a space of two continuous variables;
- ``A = 12`` answers; regret of the favourite the researcher's page shows
  (the told design of highest posterior mean) after 3 and after 12;
- arms: ``collaborative`` (``model.kind = "collaborative"``, the default:
  a lone participant asked as the loop asks, on a refitted copy of the
  model told the believed answer); ``batched`` (the same kind with every
  question from the batched step over candidates, with its virtual
  comparisons at the faces: ``prefbo.serve.collaborative.ASK_ONE_STRATEGIES``
  emptied);
  ``population`` (the exact EP population kind) and ``individual`` (one
  loop per participant), each through
  :class:`~prefbo.serve.engine.QuestionEngine`; ``loop`` (the library's
  loop alone, asked after each answer: no question made ahead);
- study seed = the run's seed; the uniform questions' generator
  ``50_000 + seed``; the loop's seed ``30_000 + 100 seed`` (as
  ``population_study``'s independent arm);
- paired Wilcoxon signed-rank tests (scipy, two-sided) of each arm against
  ``collaborative`` over the seeds.

Each run appends one record (seed and arm, with its thread settings) to a
JSON-lines store; a rerun skips what it holds. As users run it (no thread
variable)::

    python -m benchmarks serve_lone
    python -m benchmarks serve_lone --arms loop individual   # a part
    python -m benchmarks serve_lone --report-only
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from scipy.stats import wilcoxon

import prefbo.serve.collaborative as served
from benchmarks.harness import arms, environment, stores
from benchmarks.population_study import BOUNDS, Population, _person
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.serve.collaborative import CollaborativeEngine
from prefbo.serve.config import study_from_dict
from prefbo.serve.engine import QuestionEngine
from prefbo.serve.rows import QuestionRow

SEEDS = tuple(range(30, 50))
ARMS = ("collaborative", "batched", "population", "individual", "loop")
ANSWERS = 12
KS = (3, 12)
SPACE = [{"name": n, "type": "continuous", "lower": 0.0, "upper": 1.0} for n in "xy"]


def config_of(arm: str, seed: int):
    r"""The study file of ``arm`` (the serve kinds)."""
    kind = arm if arm in ("population", "individual") else "collaborative"
    data = {
        "space": SPACE,
        "answers_per_participant": ANSWERS,
        "model": {"kind": kind},
        "seed": seed,
    }
    return study_from_dict(data, root=tempfile.gettempdir(), name="study.toml")


class Served:
    r"""One arm's serve engine for participant 0: ``ahead`` makes the next
    question while the one on screen is unanswered, ``favourite`` reads the
    researcher's page's favourite."""

    def __init__(self, arm: str, seed: int) -> None:
        self.arm, self.config = arm, config_of(arm, seed)
        self.engine = None
        if arm in ("collaborative", "batched"):
            self.engine = CollaborativeEngine(self.config, background=False)
        self.optimizers: dict = {}

    def ahead(self, rows: list[QuestionRow], shown: torch.Tensor, virtual):
        r"""``(question, its virtual comparisons)``, or ``(None, None)``."""
        if self.engine is not None:
            self.engine.update(0, rows)
            self.engine.maintain()
            strategies = served.ASK_ONE_STRATEGIES
            if self.arm == "batched":
                served.ASK_ONE_STRATEGIES = ()
            try:
                question = self.engine.propose({0: shown.tolist()}, {0: virtual})
            finally:
                served.ASK_ONE_STRATEGIES = strategies
            return question.get(0), self.engine.carried.get(0)
        engine = QuestionEngine(self.config, rows, optimizers=self.optimizers)
        if self.arm == "population" and not rows:
            return None, None  # the population kind's first questions
        question = engine.propose({0: shown.tolist()}, {0: virtual})
        return question.get(0), engine.carried.get(0)

    def favourite(self, rows: list[QuestionRow]) -> torch.Tensor:
        if self.engine is not None:
            self.engine.update(0, rows)
            self.engine.maintain()
            fav = self.engine.favourites([0])
        else:
            engine = QuestionEngine(self.config, rows, optimizers=self.optimizers)
            fav = engine.favourites([0])
        values = fav["participants"]["0"]["values"]
        return torch.tensor([values["x"], values["y"]], dtype=torch.float64)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


def run_served(arm: str, seed: int, pop: Population) -> dict:
    r"""Participant 0 of ``seed`` answering ``ANSWERS`` questions of ``arm``."""
    u = pop.participant(seed, 0)
    person = _person(u, seed, 0)
    served_arm = Served(arm, seed)
    gen = torch.Generator().manual_seed(50_000 + seed)
    shown = torch.rand(2, 2, generator=gen, dtype=torch.float64)
    virtual, origin = None, "random"
    rows: list[QuestionRow] = []
    out: dict = {"origins": "", "virtual": 0}
    for k in range(1, ANSWERS + 1):
        question, carried = served_arm.ahead(rows, shown, virtual)
        choice = int(person.compare(shown[0], shown[1]))
        rows.append(
            QuestionRow(
                id=f"q{k}",
                participant_id=0,
                seq=k - 1,
                options=shown.tolist(),
                origin=origin,
                based_on=k - 1,
                created_at=float(k),
                shown_at=float(k),
                answered_at=float(k),
                choice=choice,
                virtual_comparisons=virtual,
            )
        )
        out["origins"] += origin[0]
        out["virtual"] += len(virtual or [])
        if question is None:
            shown = torch.rand(2, 2, generator=gen, dtype=torch.float64)
            virtual, origin = None, "random"
        else:
            shown, origin = question.double(), "model"
            virtual = None if carried is None else carried.tolist()
        if k in KS:
            out[f"regret_{k}"] = u.regret(served_arm.favourite(rows))
    served_arm.close()
    return out


def run_loop(seed: int, pop: Population) -> dict:
    r"""Participant 0 of ``seed`` in the library's loop alone."""
    u = pop.participant(seed, 0)
    person = _person(u, seed, 0)
    opt = PreferentialOptimizer(BOUNDS, seed=30_000 + 100 * seed)
    out: dict = {}
    for k in range(1, ANSWERS + 1):
        X = opt.ask()
        opt.tell(person.compare(X[0], X[1]))
        if k in KS:
            out[f"regret_{k}"] = u.regret(opt.best()[0])
    return out


def run(arm: str, seed: int, pop: Population) -> dict:
    r"""Participant 0 of ``seed`` through ``arm``."""
    return run_loop(seed, pop) if arm == "loop" else run_served(arm, seed, pop)


def report(store: Path) -> str:
    r"""The page of the runs in ``store``."""
    records = stores.latest(stores.read(store), lambda r: (r["arm"], r["seed"]))
    by = {(r["arm"], r["seed"]): r for r in records}
    arms = [a for a in ARMS if any(k[0] == a for k in by)]
    seeds = [s for s in SEEDS if all((a, s) in by for a in arms)]
    if "collaborative" not in arms or not seeds:
        return "No seed has a run of every arm, the collaborative one among them.\n"
    lines = [
        "# A lone participant of `prefbo serve`",
        "",
        "Written by `python -m benchmarks serve_lone` from "
        "`serve_lone.jsonl`; the setting is the script's docstring. "
        f"Seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}), fixed before the run.",
        "",
        "Regret of the favourite after k answers, mean (median); p: paired "
        "Wilcoxon against `collaborative`, with the seeds where the arm was "
        "lower.",
        "",
        "| arm | k = 3 | k = 12 | p (k = 12) | lower of "
        f"{len(seeds)} | s per run (median) |",
        "|---|---|---|---|---|---|",
    ]
    base = [by["collaborative", s]["regret_12"] for s in seeds]
    for arm in arms:
        cells = []
        for k in KS:
            v = [by[arm, s][f"regret_{k}"] for s in seeds]
            cells.append(f"{statistics.mean(v):.3f} ({statistics.median(v):.3f})")
        v = [by[arm, s]["regret_12"] for s in seeds]
        if arm == "collaborative" or v == base:
            p, lower = "", ""
        else:
            p = f"{wilcoxon(base, v).pvalue:.2g}"
            lower = str(sum(x < b for b, x in zip(base, v, strict=True)))
        secs = statistics.median(by[arm, s]["seconds"] for s in seeds)
        lines.append(
            f"| {arm} | {cells[0]} | {cells[1]} | {p} | {lower} | {secs:.1f} |"
        )
    env = by[arms[0], seeds[0]].get("env")
    lines += ["", "Machine (of the first record):", *environment.lines(env), ""]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    return arms.parse(argv, "serve_lone", __doc__, ARMS, SEEDS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.report_only:
        pop = Population()
        arms.run_missing(args, lambda arm, seed: run(arm, seed, pop))
    print(arms.write_page(args.page, report(args.store)))
    return 0
