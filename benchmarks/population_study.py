r"""A population study's warm start against independent per-person loops.

The setting (fixed before any run; nothing below was tuned on the outcomes):

- Designs: the unit square (``d = 2``).
- The population utility ``g``: a Gaussian bump ``exp(-|x - c|² / (2 w²))``,
  ``c = (0.7, 0.3)``, ``w = 0.25``, standardised over the square (mean and
  sd at 20,000 uniform points, generator seed 0): one clear optimum, sd 1.
  (Branin, the other candidate, has three equal optima: where a person's
  optimum lies would then be a coin toss between basins, not a population
  fact.)
- Participant ``p``'s utility ``u_p = g + h_p``: ``h_p`` a draw of a GP with
  an RBF kernel of lengthscale 0.3 and sd ``DEVIATION_SD = 0.4`` (0.4 of
  ``g``'s sd), by 500 random Fourier features.
- The simulated person answers ``P(x ≻ x') = Φ((u_p(x) − u_p(x')) / (√2 σ))``,
  ``σ = 0.1`` (:class:`~prefbo.test_functions.SimulatedPerson`).
- Regret of participant ``p`` after ``k`` answers: ``max u_p`` over a 201 x
  201 grid of the square minus ``u_p`` at the recommendation (clamped at 0).
  Target regrets, fixed before the run: ``r = 0.1`` (headline, 0.1 of ``g``'s
  sd) and ``r = 0.3``.
- Protocol: ``P = 8`` participants arrive one after another; each answers
  ``A = 12`` questions before the next arrives. ``study``: one
  :class:`~prefbo.loop.study.PopulationStudy` (``--model``, EP unless
  given; EUBO; seed = the run's seed) with
  ``ask(name)``/``tell(name, answer)``; the recommendation is
  ``best(name)``. ``independent``: each participant in their own
  :class:`~prefbo.loop.PreferentialOptimizer` with default settings; the
  recommendation is its ``best()``. Both see the same utilities and the same
  answer-noise seeds. The study also has a recommendation before a
  newcomer's first answer (``k = 0``: the population posterior plus a
  deviation's prior).
- Seeds (run in this order, the first ``--seeds`` of them): ``SEEDS``.
  Seed ``s``, participant ``p`` (0-based): deviation generator
  ``10_000 + 100 s + p``, answer noise ``20_000 + 100 s + p``, the
  independent loop's seed ``30_000 + 100 s + p``.
- Paired Wilcoxon signed-rank tests (scipy, two-sided) per position group
  (early arrivals 1-4, late arrivals 5-8), participants of all seeds as the
  pairs: on the regret at each reported ``k`` and on the answers needed to
  reach ``r`` (13 where never reached within 12).

Time per answer (``--timing``): a study is filled with random questions
answered by simulated participants (``tell(name, answer, options)``, no fit)
up to the last participants, whose answers (``ask`` + ``tell``, the fit
included in ``ask``) are timed; beside it, an independent loop at the same
per-participant answer count and at its first model-based question.

Runs are appended to a JSON-lines store (one record per seed and arm, with
its thread settings); a rerun skips what it holds. Run single-threaded::

    OMP_NUM_THREADS=1 python -m benchmarks population_study --seeds 6
    OMP_NUM_THREADS=1 python -m benchmarks population_study --timing-only \
        --timing 10x3:3 100x1:3 300x1:2 1000x1:1
    OMP_NUM_THREADS=1 python -m benchmarks population_study --report-only

``--model collaborative`` runs the study on the collaborative model kind
(its page and store are ``population_study_collaborative.*``), as users
run it (no thread variable)::

    python -m benchmarks population_study --model collaborative --seeds 6 \
        --timing 10x3:3 100x1:3 1000x1:20

``--quick`` (2 participants x 3 answers, one seed, a small timing) writes to
``<tempdir>/prefbo-quick/`` and never over the published results.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from benchmarks.harness import environment, reports, stores
from benchmarks.harness.configs import quiet as _quiet
from benchmarks.harness.reports import median as _median
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.study import PopulationStudy
from prefbo.test_functions import SimulatedPerson

RESULTS = Path(__file__).parent / "results"
NAME = "population_study"
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
CENTRE, WIDTH = (0.7, 0.3), 0.25
DEVIATION_SD, DEVIATION_LENGTHSCALE, FEATURES = 0.4, 0.3, 500
SIGMA = 0.1
PARTICIPANTS, ANSWERS = 8, 12
# 3: the answers after which a newcomer's regret is compared (added to the
# tables for the collaborative kind; the runs record every k)
KS = (1, 2, 3, 4, 8, 12)
#: The study's model kinds (``--model``); the default's results are
#: ``population_study.*``, another kind's ``population_study_<kind>.*``.
MODELS = ("ep", "laplace", "collaborative")
TARGETS = (0.1, 0.3)  # the headline first
SEEDS = tuple(range(10))
GROUPS = {"early (1-4)": range(0, 4), "late (5-8)": range(4, 8)}
# added after the first run showed the first arrival behind: tables only
POST_HOC = {"1st alone (post hoc)": range(0, 1)}
ARMS = ("study", "independent")
GRID = 201
# the page is generated above this line; what follows it is kept
HAND = "<!-- written by hand below -->"


class Population:
    r"""``g``, standardised, and each participant's deviation."""

    def __init__(self) -> None:
        gen = torch.Generator().manual_seed(0)
        U = torch.rand(20_000, 2, generator=gen, dtype=torch.float64)
        raw = self._bump(U)
        self.mean, self.std = raw.mean().item(), raw.std().item()
        t = torch.linspace(0, 1, GRID, dtype=torch.float64)
        self.grid = torch.cartesian_prod(t, t)

    @staticmethod
    def _bump(X: Tensor) -> Tensor:
        c = torch.tensor(CENTRE, dtype=X.dtype)
        return torch.exp(-((X - c) ** 2).sum(-1) / (2 * WIDTH**2))

    def g(self, X: Tensor) -> Tensor:
        r"""The standardised population utility at ``... x 2`` designs."""
        return (self._bump(X) - self.mean) / self.std

    def participant(self, seed: int, p: int) -> Utility:
        r"""Participant ``p``'s utility in run ``seed``."""
        gen = torch.Generator().manual_seed(10_000 + 100 * seed + p)
        omega = torch.randn(FEATURES, 2, generator=gen, dtype=torch.float64)
        omega = omega / DEVIATION_LENGTHSCALE
        phase = 2 * math.pi * torch.rand(FEATURES, generator=gen, dtype=torch.float64)
        weight = torch.randn(FEATURES, generator=gen, dtype=torch.float64)
        return Utility(self, omega, phase, weight)


class Utility:
    r"""``u_p = g + h_p`` (``h_p`` by random Fourier features)."""

    def __init__(self, pop: Population, omega: Tensor, phase: Tensor, w: Tensor):
        self.pop, self.omega, self.phase, self.w = pop, omega, phase, w
        self._best: float | None = None

    @property
    def best_value(self) -> float:
        r"""``max u_p`` over the grid (computed on first use)."""
        if self._best is None:
            self._best = self(self.pop.grid).max().item()
        return self._best

    def h(self, X: Tensor) -> Tensor:
        r"""The deviation at ``... x 2`` designs."""
        feats = torch.cos(X @ self.omega.T + self.phase)
        return DEVIATION_SD * math.sqrt(2 / FEATURES) * feats @ self.w

    def __call__(self, X: Tensor) -> Tensor:
        return self.pop.g(X) + self.h(X)

    def regret(self, x: Tensor) -> float:
        r"""``max u_p − u_p(x)`` at one design (clamped at 0)."""
        return max(self.best_value - self(x.unsqueeze(0)).item(), 0.0)


def _person(u: Utility, seed: int, p: int) -> SimulatedPerson:
    return SimulatedPerson(u, noise_std=SIGMA, seed=20_000 + 100 * seed + p)


# ---------------------------------------------------------------- runs


def _progress(arm: str, seed: int, p: int, r: list, s: list) -> None:
    print(
        f"  {arm} seed {seed} participant {p + 1}: regret {r[-1]:.3f} after "
        f"{len(s)} answers, {sum(s):.1f} s",
        flush=True,
    )


def run_study(
    pop: Population, seed: int, participants: int, answers: int, model: str = "ep"
) -> dict[str, Any]:
    r"""One study: participants one after another; per participant the
    regret after ``k = 0..answers`` answers (``None`` at ``k = 0`` for the
    first, who has no recommendation) and the seconds of each answer (ask +
    tell + best)."""
    study = PopulationStudy(BOUNDS, seed=seed, model=model)
    regret, seconds = [], []
    with torch.random.fork_rng(devices=[]), _quiet():
        torch.manual_seed(seed)
        for p in range(participants):
            u, name = pop.participant(seed, p), f"p{p}"
            person = _person(u, seed, p)
            t0 = time.perf_counter()
            X = study.ask(name)
            first_ask = time.perf_counter() - t0
            r = [u.regret(study.best(name)[0]) if p else None]
            s = []
            for k in range(answers):
                t0 = time.perf_counter()
                X = study.ask(name)
                t1 = time.perf_counter()
                winner = person.compare(X[0], X[1])
                t2 = time.perf_counter()
                study.tell(name, winner)
                x = study.best(name)[0]
                s.append(
                    (t1 - t0) + (time.perf_counter() - t2) + (first_ask if not k else 0)
                )
                r.append(u.regret(x))
            regret.append(r)
            seconds.append(s)
            _progress("study", seed, p, r, s)
    study.close()
    return {
        "seed": seed,
        "arm": "study",
        "regret": regret,
        "seconds": seconds,
        "failed_fits": study.failed_fits,
        "random_fallbacks": study.random_fallbacks,
    }


def run_independent(
    pop: Population, seed: int, participants: int, answers: int
) -> dict[str, Any]:
    r"""The same participants, each in their own ``PreferentialOptimizer``."""
    regret, seconds = [], []
    with torch.random.fork_rng(devices=[]), _quiet():
        torch.manual_seed(seed)
        for p in range(participants):
            u = pop.participant(seed, p)
            person = _person(u, seed, p)
            opt = PreferentialOptimizer(BOUNDS, seed=30_000 + 100 * seed + p)
            r, s = [None], []
            for _ in range(answers):
                t0 = time.perf_counter()
                X = opt.ask()
                t1 = time.perf_counter()
                winner = person.compare(X[0], X[1])
                t2 = time.perf_counter()
                opt.tell(winner)
                x = opt.best()[0]
                s.append((t1 - t0) + (time.perf_counter() - t2))
                r.append(u.regret(x))
            regret.append(r)
            seconds.append(s)
            _progress("independent", seed, p, r, s)
    return {"seed": seed, "arm": "independent", "regret": regret, "seconds": seconds}


load = stores.read  # the records of a store (a torn last line skipped)


def run_regret(args: argparse.Namespace, pop: Population) -> None:
    r"""Every missing (seed, arm) run, appended to the store."""
    done = {
        (r["seed"], r["arm"])
        for r in load(args.store)
        if r.get("kind") == "regret"
        and len(r["regret"]) == args.participants
        and len(r["regret"][0]) == args.answers + 1
    }
    for seed in SEEDS[: args.seeds]:
        for arm in ARMS:
            if (seed, arm) in done:
                continue
            t0 = time.perf_counter()
            if arm == "study":
                rec = run_study(pop, seed, args.participants, args.answers, args.model)
            else:
                rec = run_independent(pop, seed, args.participants, args.answers)
            rec["kind"] = "regret"
            rec["wall"] = time.perf_counter() - t0
            rec |= environment.record()
            stores.append(args.store, rec)
            last = [r[-1] for r in rec["regret"]]
            print(
                f"seed {seed} {arm:>11s}: final regret mean {sum(last) / len(last):.3f}"
                f" ({rec['wall']:.0f} s)",
                flush=True,
            )


# ---------------------------------------------------------------- timing


def _random_pair(gen: torch.Generator) -> Tensor:
    return torch.rand(2, 2, generator=gen, dtype=torch.float64)


def time_study(
    pop: Population,
    participants: int,
    per: int,
    timed: int,
    seed: int = 0,
    model: str = "ep",
) -> dict[str, Any]:
    r"""A study of ``participants x per`` answers whose last ``timed``
    participants answer through ``ask`` + ``tell`` (timed, the fit in ``ask``)
    and the others through random questions told without a fit."""
    study = PopulationStudy(BOUNDS, seed=seed, model=model)
    gen = torch.Generator().manual_seed(40_000 + participants)
    times = []
    with torch.random.fork_rng(devices=[]), _quiet():
        torch.manual_seed(seed)
        for p in range(participants):
            u, name = pop.participant(seed + 50, p), f"p{p}"
            person = _person(u, seed + 50, p)
            for _ in range(per):
                if p < participants - timed:
                    X = _random_pair(gen)
                    study.tell(name, person.compare(X[0], X[1]), options=X)
                    continue
                t0 = time.perf_counter()
                X = study.ask(name)
                t1 = time.perf_counter()
                w = person.compare(X[0], X[1])
                t2 = time.perf_counter()
                study.tell(name, w)
                times.append((t1 - t0) + (time.perf_counter() - t2))
    study.close()
    return {
        "participants": participants,
        "per": per,
        "designs": 2 * participants * per,
        "seconds": times,
    }


def time_independent(pop: Population, told: int, reps: int) -> list[float]:
    r"""Seconds of answer ``told + 1`` (ask + tell) of an independent loop
    told ``told`` random answers first, ``reps`` participants."""
    out = []
    gen = torch.Generator().manual_seed(41_000 + told)
    with torch.random.fork_rng(devices=[]), _quiet():
        for p in range(reps):
            u = pop.participant(60, p)
            person = _person(u, 60, p)
            opt = PreferentialOptimizer(BOUNDS, seed=p)
            for _ in range(told):
                X = _random_pair(gen)
                opt.tell(person.compare(X[0], X[1]), options=X)
            t0 = time.perf_counter()
            X = opt.ask()
            t1 = time.perf_counter()
            w = person.compare(X[0], X[1])
            t2 = time.perf_counter()
            opt.tell(w)
            out.append((t1 - t0) + (time.perf_counter() - t2))
    return out


def run_timing(args: argparse.Namespace, pop: Population) -> None:
    r"""The time-per-answer measurements, appended to the store."""
    for participants, per, timed in args.timing:
        t0 = time.perf_counter()
        rec = time_study(pop, participants, per, timed, model=args.model)
        rec["kind"] = "timing"
        # the independent loop at the same per-participant count (answer
        # ``per``) and at its first model-based question (answer 3)
        rec["independent_same"] = time_independent(pop, per - 1, 3)
        rec["independent_model"] = time_independent(pop, 2, 3)
        rec["wall"] = time.perf_counter() - t0
        rec |= environment.record()
        stores.append(args.store, rec)
        print(
            f"timing {participants} x {per}: study "
            f"{_median(rec['seconds']):.2f} s/answer ({rec['wall']:.0f} s)",
            flush=True,
        )


# ---------------------------------------------------------------- report


def _mse(x: Sequence[float]) -> str:
    t = torch.tensor(list(x), dtype=torch.float64)
    se = t.std().item() / math.sqrt(t.numel()) if t.numel() > 1 else 0.0
    return f"{t.mean():.3f} ± {se:.3f}"


def _needed(regret: Sequence[float | None], r: float) -> int:
    r"""The first ``k ≥ 1`` with regret ``≤ r``; ``len`` (13 for 12) if none."""
    for k in range(1, len(regret)):
        if regret[k] <= r:
            return k
    return len(regret)


def _wilcoxon(a: Sequence[float], b: Sequence[float]) -> str:
    from scipy.stats import wilcoxon

    d = [x - y for x, y in zip(a, b)]
    if all(v == 0 for v in d):
        return "— (all equal)"
    return f"{wilcoxon(a, b).pvalue:.3g}"


def paired(records: list[dict[str, Any]]) -> tuple[list[int], dict[str, list]]:
    r"""The seeds both arms ran, and per arm the participants' regret
    traces (seed-major, then position)."""
    by = {(r["seed"], r["arm"]): r for r in records if r.get("kind") == "regret"}
    seeds = sorted(s for s, a in by if a == "study" and (s, "independent") in by)
    return seeds, {arm: [by[s, arm]["regret"] for s in seeds] for arm in ARMS}


def reference_regret(pop: Population, seeds: list[int], ps: Sequence[int]) -> list:
    r"""The regret of ``g``'s own optimum (on the grid) for each participant:
    what recommending the population's favourite, and nothing personal,
    would give."""
    x = pop.grid[pop.g(pop.grid).argmax()]
    return [pop.participant(s, p).regret(x) for s in seeds for p in ps]


def report(records: list[dict[str, Any]], figure: Path | None, pop: Population) -> str:
    r"""The tables of the page."""
    seeds, tr = paired(records)
    if not seeds:
        return "No regret runs in the store.\n"
    P = len(tr["study"][0])
    A = len(tr["study"][0][0]) - 1
    ks = [k for k in KS if k <= A]
    out = [
        f"Seeds: {', '.join(map(str, seeds))} ({len(seeds)} studies of {P} "
        f"participants x {A} answers; {len(seeds) * P} participants per arm).",
        "",
        "### Regret by arrival position (mean ± s.e. over the seeds)",
        "",
        "| position | arm | k = 0 | " + " | ".join(f"k = {k}" for k in ks) + " |",
        "|---|---|---|" + "---|" * len(ks),
    ]
    for p in range(P):
        for arm in ARMS:
            rows = [tr[arm][i][p] for i in range(len(seeds))]
            k0 = _mse([r[0] for r in rows]) if rows[0][0] is not None else "—"
            cells = [_mse([r[k] for r in rows]) for k in ks]
            out.append(f"| {p + 1} | {arm} | {k0} | " + " | ".join(cells) + " |")
    out += [
        "",
        "### By position group: regret, paired difference and Wilcoxon p",
        "",
        "| group | k | study | independent | study median | independent median "
        "| study − independent | Wilcoxon p (two-sided) | study lower in |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    groups = {g: [p for p in ps if p < P] for g, ps in {**GROUPS, **POST_HOC}.items()}
    for g, ps in groups.items():
        if not ps:
            continue
        for k in ks:
            a = [tr["study"][i][p][k] for i in range(len(seeds)) for p in ps]
            b = [tr["independent"][i][p][k] for i in range(len(seeds)) for p in ps]
            lower = sum(x < y for x, y in zip(a, b))
            out.append(
                f"| {g} | {k} | {_mse(a)} | {_mse(b)} | {_median(a):.3f} | "
                f"{_median(b):.3f} | {_mse([x - y for x, y in zip(a, b)])} | "
                f"{_wilcoxon(a, b)} | "
                f"{lower}/{len(a)} |"
            )
    out += [
        "",
        "### Answers needed to reach regret ≤ r",
        "",
        f"The first k ≥ 1 whose recommendation has regret ≤ r; {A + 1} where "
        f"none of the {A} did (counted as {A + 1} in the mean and the test).",
        "",
        "| group | r | study: mean answers | study: reached | independent: mean "
        "answers | independent: reached | Wilcoxon p | study fewer / equal / more |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g, ps in groups.items():
        if not ps:
            continue
        for r in TARGETS:
            a = [_needed(tr["study"][i][p], r) for i in range(len(seeds)) for p in ps]
            b = [
                _needed(tr["independent"][i][p], r)
                for i in range(len(seeds))
                for p in ps
            ]
            n = len(a)
            fewer = sum(x < y for x, y in zip(a, b))
            same = sum(x == y for x, y in zip(a, b))
            out.append(
                f"| {g} | {r} | {_mse(a)} | {sum(x <= A for x in a)}/{n} | "
                f"{_mse(b)} | {sum(x <= A for x in b)}/{n} | {_wilcoxon(a, b)} | "
                f"{fewer} / {same} / {n - fewer - same} |"
            )
    out += [
        "",
        "### Reference: recommending g's optimum to everyone",
        "",
        "The regret of the population utility's own optimum (the grid point "
        "maximising g) for the same participants: what a loop that learnt g "
        "perfectly and nothing of the person would give.",
        "",
        "| group | mean ± s.e. | median | share ≤ 0.1 |",
        "|---|---|---|---|",
    ]
    for g, ps in groups.items():
        if ps:
            ref = reference_regret(pop, seeds, ps)
            out.append(
                f"| {g} | {_mse(ref)} | {_median(ref):.3f} | "
                f"{sum(v <= TARGETS[0] for v in ref)}/{len(ref)} |"
            )
    st = [r for r in records if r.get("kind") == "regret" and r["seed"] in seeds]
    fails = sum(r.get("failed_fits", 0) for r in st)
    falls = sum(r.get("random_fallbacks", 0) for r in st)
    sec = {
        arm: [
            s for r in st if r["arm"] == arm for person in r["seconds"] for s in person
        ]
        for arm in ARMS
    }
    wall = {arm: sum(r["wall"] for r in st if r["arm"] == arm) for arm in ARMS}
    out += [
        "",
        f"Study fits that failed (starting hyperparameters kept): {fails}; "
        f"questions that fell back to uniform: {falls}.",
        "",
        "Seconds per answer in these runs (ask + tell + best): study median "
        f"{_median(sec['study']):.2f} (mean "
        f"{sum(sec['study']) / len(sec['study']):.2f}),"
        f" independent median {_median(sec['independent']):.2f} (mean "
        f"{sum(sec['independent']) / len(sec['independent']):.2f}); ratio of means "
        f"{sum(sec['study']) / max(sum(sec['independent']), 1e-12):.2f}. Wall "
        f"time: study {wall['study']:.0f} s, independent {wall['independent']:.0f} s.",
    ]
    latest = {
        (r["participants"], r["per"]): r for r in records if r.get("kind") == "timing"
    }
    tim = sorted(latest.values(), key=lambda r: r["designs"])
    if tim:
        out += [
            "",
            "### Time per answer (ask + tell), by study size",
            "",
            "| participants x answers each | designs in the model | study: s/answer "
            "(median of the timed answers) | study: slowest answer (ms) | "
            "independent at the same answer count (median of 3) | "
            "ratio | independent at its first EUBO question (answer 3) | ratio | "
            "load average after |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in tim:
            s = _median(r["seconds"])
            i1, i3 = _median(r["independent_same"]), _median(r["independent_model"])
            out.append(
                f"| {r['participants']} x {r['per']} | {r['designs']} | {s:.3f} "
                f"({len(r['seconds'])} answers) | {1000 * max(r['seconds']):.1f} | "
                f"{1000 * i1:.1f} ms | "
                f"{s / i1:,.0f}x | {i3:.2f} s | {s / i3:,.1f}x | "
                f"{r.get('load', float('nan')):.1f} |"
            )
    if figure is not None:
        plot(seeds, tr, figure, pop)
    return "\n".join(out) + "\n"


def plot(seeds: list[int], tr: dict[str, list], path: Path, pop: Population) -> None:
    r"""Mean regret (± s.e.) against answers, early and late arrivals; the
    study's recommendation before a newcomer's first answer at ``k = 0``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    P = len(tr["study"][0])
    A = len(tr["study"][0][0]) - 1
    groups = {g: [p for p in ps if p < P] for g, ps in GROUPS.items()}
    groups = {g: ps for g, ps in groups.items() if ps}
    fig, axes = plt.subplots(
        1, len(groups), figsize=(5 * len(groups), 3.8), sharey=True, squeeze=False
    )
    ks = list(range(1, A + 1))
    for ax, (g, ps) in zip(axes[0], groups.items()):
        for arm, colour in (("study", "C0"), ("independent", "C1")):
            traces = [tr[arm][i][p] for i in range(len(seeds)) for p in ps]
            R = torch.tensor([t[1:] for t in traces], dtype=torch.float64)
            m = R.mean(0)
            se = R.std(0) / math.sqrt(R.shape[0]) if R.shape[0] > 1 else 0 * m
            ax.plot(ks, m.numpy(), "-o", color=colour, ms=3, label=arm)
            ax.fill_between(
                ks, (m - se).numpy(), (m + se).numpy(), color=colour, alpha=0.2
            )
            k0 = [t[0] for t in traces if t[0] is not None]
            if k0:
                ax.plot(
                    [0],
                    [sum(k0) / len(k0)],
                    "s",
                    color=colour,
                    ms=6,
                    label=f"{arm}: before the first answer",
                )
        ax.axhline(TARGETS[0], color="k", lw=0.8, ls=":", label=f"r = {TARGETS[0]}")
        ref = reference_regret(pop, seeds, ps)
        ax.axhline(
            sum(ref) / len(ref), color="C2", lw=1, ls="--", label="g's optimum (mean)"
        )
        ax.set(
            title=f"{g} arrivals ({len(seeds)} seeds x {len(ps)})",
            xlabel="answers of the participant",
            yscale="log",
        )
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("regret (mean ± s.e.)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    r"""Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=6, help="the first N of SEEDS")
    p.add_argument("--participants", type=int, default=PARTICIPANTS)
    p.add_argument("--answers", type=int, default=ANSWERS)
    p.add_argument(
        "--timing",
        nargs="*",
        default=["10x3:3", "100x1:3"],
        help="PxA:T — a study of P participants x A answers, the last T "
        "participants timed",
    )
    p.add_argument("--timing-only", action="store_true")
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--quick", action="store_true", help="a run of a minute or two")
    p.add_argument(
        "--model", choices=MODELS, default="ep", help="the study's model kind"
    )
    p.add_argument(
        "--output",
        type=Path,
        default=None,
        help="folder of the page, figure and store (default benchmarks/results "
        "for the published setting, else <tempdir>/prefbo-quick)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.participants, args.answers = 1, 2, 3
        args.timing = ["4x2:1"]
    args.timing = [
        tuple(int(v) for v in t.replace(":", "x").split("x")) for t in args.timing
    ]
    published = (
        not args.quick and args.participants == PARTICIPANTS and args.answers == ANSWERS
    )
    if args.output is None:
        args.output = RESULTS if published else reports.scratch_dir()
    args.output.mkdir(parents=True, exist_ok=True)
    args.name = NAME if args.model == "ep" else f"{NAME}_{args.model}"
    args.store = args.output / f"{args.name}.jsonl"
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def main(argv: Sequence[str] | None = None) -> str:
    r"""Run what is missing, then write the page's tables."""
    args = parse_args(argv)
    pop = Population()
    start, load0 = time.perf_counter(), environment.load_average()
    if not args.report_only:
        if not args.timing_only:
            run_regret(args, pop)
        if not args.no_timing:
            run_timing(args, pop)
    records = load(args.store)
    text = report(records, args.output / f"{args.name}.png", pop)
    head = (
        f"Machine: {environment.machine()}; {environment.versions_text()}; "
        f"threads: {environment.threads()}; load average {load0:.2f} before, "
        f"{environment.load_average():.2f} after; this invocation "
        f"{time.perf_counter() - start:.0f} s "
        f"(`{reports.command('population_study', args.argv)}`). The runs' "
        "machine, versions and threads: their records in the store (threads "
        "only, before these records held the others).\n\n"
    )
    page = args.output / f"{args.name}.md"
    kept = page.read_text().split(HAND, 1)[1] if page.exists() else ""
    kept = kept if kept.strip() else "\n(the reading of the results goes here)\n"
    page.write_text(
        "# Population study: warm start against independent loops"
        f"{'' if args.model == 'ep' else f' (model={args.model!r})'}\n\n"
        "Setting, seeds and protocol: the docstring of "
        f"`benchmarks/population_study.py`. Figure: `{args.name}.png`; runs: "
        f"`{args.name}.jsonl`.\n\n{head}{text}\n{HAND}{kept}"
    )
    print(head + text)
    return text
