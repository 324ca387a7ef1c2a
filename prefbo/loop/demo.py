r"""Demo: preferential BO with EUBO on Branin against random questions, over seeds.

A simulated person (:class:`~prefbo.test_functions.SimulatedPerson`, probit
answer noise ``σ = 0.1``) holds the negative Branin utility
(:class:`~prefbo.test_functions.Branin`, standardised over the unit square).
For each of ``--seeds`` seeds (8 by default: seeds 0-7, ``--seed`` the
first), a :class:`~prefbo.loop.PreferentialOptimizer` with its defaults
(``strategy="eubo"``, model ``"ep"``; ``--model laplace`` for the Laplace
approximation) asks that seed's person ``--initial-pairs`` (4) random pairs,
then ``--iterations`` (25) pairs maximising the Expected Utility of the Best
Option, refitting after every answer. The same optimiser with
``strategy="random"``, asking an identical person the same initial pairs, is
the baseline. After every answer the *inference regret* of each is recorded:
the optimal utility minus the true utility of its recommendation
(:meth:`~prefbo.loop.PreferentialOptimizer.best`, the told design with the
highest posterior mean). The demo adds only the statistics and the plot.

This setting (Branin, ``σ = 0.1``, 4 + 25 answers, seeds 0-7) was fixed
before the demo was run on those seeds; one run is noisy, so the headline is
the median over seeds, never one seed.

Run ``python -m prefbo.loop.demo`` (``--help`` for options). The seeds run in
``--workers`` processes (by default one per usable core, at most one per
seed). It prints a line per seed as it finishes, a table of the median and
interquartile range (IQR) of the regret over the seeds every 5 answers, and a
final line with each strategy's median final regret, its IQR and which did
better: the seeds pair the runs (same person, same first questions), so the
final regrets are compared by an exact two-sided Wilcoxon signed-rank test,
and a difference with ``p >= 0.05`` is reported as not distinguishable. It
writes ``<output>/demo.png`` (median regret curves with the IQR shaded; each
seed's final recommendations on the true utility) and
``<output>/demo_summary.json`` (every seed's curves and the statistics).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from prefbo.loop import options as _options
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.repeats import (
    MIN_INFORMATION,
    REPEAT_TOL,
    answer_information,
    repeats,
)
from prefbo.test_functions import Branin, SimulatedPerson, UtilityProblem
from prefbo.utils.threads import child_threads, children_with_threads, usable_cores

MODELS = ("ep", "laplace")
STRATEGIES = ("eubo", "random")
LABELS = {"eubo": "EUBO", "random": "random"}
STYLES = {"eubo": ("C0", "o"), "random": ("C1", "s")}  # colour, marker
#: a final difference with a two-sided p-value below this is reported
ALPHA = 0.05
#: the regret table has a row every this many answers (and the last)
TABLE_EVERY = 5


@dataclass(frozen=True)
class Settings:
    r"""One seed's run: the loop's settings and the person's noise."""

    iterations: int = 25
    initial_pairs: int = 4
    noise: float = 0.1
    model: str = "ep"
    acqf_options: dict[str, Any] | None = None  # None: the loop's defaults


@dataclass
class Curve:
    r"""One strategy's record on one seed (plain data, sent between processes)."""

    regret: list[float] = field(default_factory=list)  # after every answer
    best_utility: list[float] = field(default_factory=list)
    recommended: list[float] = field(default_factory=list)  # the last, d
    failed_fits: int = 0
    repeats: int = 0  # questions (near-)identical to an earlier one
    resolved_repeats: int = 0  # of those, ones the model had already resolved


@dataclass
class SeedRun:
    r"""Both strategies' curves on one seed."""

    seed: int
    answers: list[int]  # answers told at each point of the curves
    curves: dict[str, Curve]
    seconds: float


@dataclass
class Arm:
    r"""One strategy's optimiser, questions and curve, in this process."""

    name: str
    opt: PreferentialOptimizer
    asked: list[Tensor] = field(default_factory=list)  # q x d questions
    answers: list[int] = field(default_factory=list)
    curve: Curve = field(default_factory=Curve)


def _ask(arm: Arm) -> Tensor:
    r"""The optimiser's next question, counted as a repeat if it is one (and
    as a resolved repeat if its answer carries under ``MIN_INFORMATION``
    nats under the model before it, see :mod:`prefbo.loop.repeats`)."""
    X = arm.opt.ask()  # 2 x d
    to_unit = arm.opt.to_unit
    if repeats(to_unit(X), [to_unit(A) for A in arm.asked], REPEAT_TOL):
        arm.curve.repeats += 1
        model = arm.opt.model
        if (
            model is not None
            and answer_information(model, to_unit(X)) < MIN_INFORMATION
        ):
            arm.curve.resolved_repeats += 1
    arm.asked.append(X)
    return X


def _recommend(problem: UtilityProblem, arm: Arm) -> None:
    r"""Append the true utility and regret of the optimiser's recommendation."""
    x, _, _ = arm.opt.best()  # refits the model
    best = problem(x).item()
    arm.answers.append(len(arm.opt.history))
    arm.curve.best_utility.append(best)
    arm.curve.regret.append(max(problem.optimal_value - best, 0.0))
    arm.curve.recommended = x.tolist()


def run_arm(name: str, seed: int, settings: Settings) -> Arm:
    r"""Run one strategy on one seed: the initial random pairs, then
    ``settings.iterations`` of its own, recording the regret after the
    initial pairs and after every later answer."""
    problem = Branin()
    # identical people and initial questions for both strategies
    person = SimulatedPerson(problem, noise_std=settings.noise, seed=seed)
    opt = PreferentialOptimizer(
        problem.bounds,
        model=settings.model,
        strategy=name,
        seed=seed,
        initial_random=settings.initial_pairs,
        acqf_options=settings.acqf_options,
    )
    arm = Arm(name, opt)
    for _ in range(settings.initial_pairs):
        X = _ask(arm)
        opt.tell(person.compare(X[0], X[1]))  # 0: X[0] preferred
    _recommend(problem, arm)
    for _ in range(settings.iterations):
        X = _ask(arm)
        opt.tell(person.compare(X[0], X[1]))
        _recommend(problem, arm)
    arm.curve.failed_fits = opt.failed_fits
    return arm


def run_seed(seed: int, settings: Settings) -> SeedRun:
    r"""Both strategies on one seed, under torch's global RNG seeded by it."""
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        arms = {name: run_arm(name, seed, settings) for name in STRATEGIES}
    answers = arms[STRATEGIES[0]].answers
    curves = {name: arm.curve for name, arm in arms.items()}
    return SeedRun(seed, answers, curves, time.perf_counter() - t0)


def run_seeds(
    seeds: Sequence[int], settings: Settings, workers: int = 1
) -> list[SeedRun]:
    r"""Run every seed (in ``workers`` fresh processes, or here when 1),
    printing a line as each finishes; returns the runs in ``seeds``' order."""
    runs: dict[int, SeedRun] = {}

    def done(run: SeedRun) -> None:
        runs[run.seed] = run
        final = {k: f"{c.regret[-1]:.4f}" for k, c in run.curves.items()}
        print(
            f"seed {run.seed:>3d} done ({len(runs)}/{len(seeds)}, "
            f"{run.seconds:.1f}s): final regret EUBO {final['eubo']}, "
            f"random {final['random']}",
            flush=True,
        )

    if workers <= 1:
        for seed in seeds:
            done(run_seed(seed, settings))
    else:  # spawn: fresh interpreters, no fork of torch's thread pools
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            # the processes start at the submits: each with its share of
            # the cores (threads x workers <= cores, unless the user chose)
            with children_with_threads(child_threads(workers)):
                futures = [pool.submit(run_seed, s, settings) for s in seeds]
            for future in as_completed(futures):
                done(future.result())
    return [runs[s] for s in seeds]


def quartiles(runs: Sequence[SeedRun], name: str) -> Tensor:
    r"""``3 x steps``: the 25 %, 50 % and 75 % quantiles over the seeds of
    ``name``'s regret after each recorded answer (linear interpolation)."""
    R = torch.tensor([r.curves[name].regret for r in runs], dtype=torch.float64)
    probs = torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)
    return torch.quantile(R, probs, dim=0)  # 3 x steps


def compare_final(runs: Sequence[SeedRun]) -> dict[str, Any]:
    r"""The paired comparison of the final regrets (EUBO minus random).

    Returns:
        ``seeds``; ``eubo_lower`` and ``random_lower``, the seeds where each
        ended lower; ``p_value`` of the exact two-sided Wilcoxon signed-rank
        test (seeds with equal regrets left out; ``None`` when no seed
        differs); and ``better``: ``"eubo"``, ``"random"`` or ``None`` (not
        distinguishable: ``p_value`` missing or at least :data:`ALPHA`).
    """
    from scipy.stats import rankdata, wilcoxon

    diff = [r.curves["eubo"].regret[-1] - r.curves["random"].regret[-1] for r in runs]
    nonzero = [d for d in diff if d != 0.0]
    p, better = None, None
    if nonzero:  # exact, or an exact permutation test where |d| has ties
        p = float(wilcoxon(nonzero, alternative="two-sided", method="auto").pvalue)
        ranks = rankdata([abs(d) for d in nonzero])
        eubo_ranks = sum(r for r, d in zip(ranks, nonzero) if d < 0)
        if p < ALPHA:
            better = "eubo" if eubo_ranks > ranks.sum() / 2 else "random"
    return {
        "seeds": len(diff),
        "eubo_lower": sum(d < 0 for d in diff),
        "random_lower": sum(d > 0 for d in diff),
        "p_value": p,
        "better": better,
    }


def _cell(q: Tensor, j: int) -> str:
    r"""``median [q25, q75]`` at step ``j`` of a ``3 x steps`` quartile tensor."""
    return f"{q[1, j]:.4f} [{q[0, j]:.4f}, {q[2, j]:.4f}]"


def table(summary: dict) -> str:
    r"""The median [IQR] regret of both strategies every :data:`TABLE_EVERY`
    answers (and after the last)."""
    answers, n = summary["answers"], len(summary["seeds"])
    q = {k: torch.tensor(summary["quartiles"][k]) for k in STRATEGIES}
    lines = [
        f"inference regret over {n} seeds: median [25%, 75%]",
        f"{'answers':>7s}  {'EUBO':<26s}  random",
    ]
    rows = [j for j, a in enumerate(answers) if (a - answers[0]) % TABLE_EVERY == 0]
    if rows[-1] != len(answers) - 1:
        rows.append(len(answers) - 1)
    for j in rows:
        lines.append(
            f"{answers[j]:>7d}  {_cell(q['eubo'], j):<26s}  {_cell(q['random'], j)}"
        )
    return "\n".join(lines)


def headline(summary: dict) -> str:
    r"""The final line: each strategy's median final regret with its IQR,
    the number of seeds and which did better (or that neither did)."""
    test, n = summary["comparison"], len(summary["seeds"])
    q = {k: torch.tensor(summary["quartiles"][k])[:, -1] for k in STRATEGIES}
    parts = [
        f"{LABELS[k]} {q[k][1]:.4f} (IQR {q[k][0]:.4f}-{q[k][2]:.4f})"
        for k in STRATEGIES
    ]
    p = test["p_value"]
    tally = (
        f"EUBO lower on {test['eubo_lower']} of {n} seeds, random on "
        f"{test['random_lower']}"
        + ("" if p is None else f"; Wilcoxon signed-rank p = {p:.3f}")
    )
    if test["better"] is None:
        verdict = f"not distinguishable on {n} seed{'s' * (n != 1)}"
    else:
        verdict = f"{LABELS[test['better']]} did better"
    return (
        f"median regret after {summary['answers'][-1]} answers over {n} "
        f"seed{'s' * (n != 1)}: {parts[0]} vs {parts[1]}: {verdict} ({tally})"
    )


def plot(summary: dict, path: Path, grid_size: int = 80) -> None:
    r"""Draw the 1 x 2 figure: the median regret curves with their IQR shaded,
    and every seed's final recommendations on the true utility."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problem, n, answers = Branin(), len(summary["seeds"]), summary["answers"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    ax = axes[0]
    for name, (color, marker) in STYLES.items():
        q = torch.tensor(summary["quartiles"][name]).numpy()  # 3 x steps
        ax.fill_between(answers, q[0], q[2], color=color, alpha=0.25)
        label = f"{LABELS[name]}: median, IQR shaded"
        ax.plot(answers, q[1], f"{marker}-", color=color, ms=3, label=label)
    lows = [v for name in STRATEGIES for v in summary["quartiles"][name][0]]
    ax.set_yscale("log" if min(lows) > 0 else "linear")
    ax.set(
        title=f"regret of the recommendation over {n} seeds",
        xlabel="answers",
        ylabel="optimal value - utility(recommended)",
    )
    ax.grid(alpha=0.3)
    ax.legend()

    ax = axes[1]
    (x0, y0), (x1, y1) = problem.bounds.tolist()  # lower, upper
    g0 = torch.linspace(x0, x1, grid_size, dtype=torch.float64)
    g1 = torch.linspace(y0, y1, grid_size, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(g0, g1, indexing="xy"), dim=-1)  # g x g x 2
    G0, G1, U = grid[..., 0].numpy(), grid[..., 1].numpy(), problem(grid).numpy()
    fig.colorbar(ax.contourf(G0, G1, U, levels=25, cmap="viridis"), ax=ax)
    opt = problem.optimizers.numpy()
    ax.scatter(opt[:, 0], opt[:, 1], marker="*", s=200, c="red", label="optima")
    for name, (color, marker) in STYLES.items():
        X = torch.tensor(summary["recommended"][name]).numpy()  # seeds x 2
        label = f"{LABELS[name]}: final recommendation"
        style = {"marker": marker, "s": 40, "c": color, "edgecolors": "white"}
        ax.scatter(X[:, 0], X[:, 1], label=label, **style)
    ax.set(title=f"true utility ({problem.name}), {n} seeds", aspect="equal")
    ax.set(xlabel="$x_1$", ylabel="$x_2$", xlim=(x0, x1), ylim=(y0, y1))
    ax.legend(loc="upper right", fontsize=8, facecolor="0.85", framealpha=0.9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summarise(runs: Sequence[SeedRun], settings: Settings) -> dict:
    r"""The summary dictionary (as written to ``demo_summary.json``)."""
    acqf = _options.acqf_options(settings.acqf_options)

    def per_seed(get: Any) -> dict[str, list]:
        return {k: [get(r.curves[k]) for r in runs] for k in STRATEGIES}

    problem = Branin()
    return {
        "problem": problem.name,
        "optimal_value": problem.optimal_value,
        "settings": asdict(settings) | {"acqf_options": acqf},
        "seeds": [r.seed for r in runs],
        "answers": runs[0].answers,
        "quartiles": {k: quartiles(runs, k).tolist() for k in STRATEGIES},
        "comparison": compare_final(runs),
        "regret": per_seed(lambda c: c.regret),
        "best_utility": per_seed(lambda c: c.best_utility),
        "recommended": per_seed(lambda c: c.recommended),
        "failed_fits": per_seed(lambda c: c.failed_fits),
        "repeated_questions": per_seed(lambda c: c.repeats),
        "resolved_repeats": per_seed(lambda c: c.resolved_repeats),
        "seed_seconds": [r.seconds for r in runs],
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    r"""Parse the command line (``--smoke`` shrinks everything for tests)."""
    p = argparse.ArgumentParser(
        prog="python -m prefbo.loop.demo", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=8,
        help="number of seeds (runs; default %(default)s)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="the first seed (default %(default)s)"
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=25,
        help="EUBO questions per seed (default %(default)s)",
    )
    p.add_argument(
        "--initial-pairs",
        type=int,
        default=4,
        help="random questions answered before the first EUBO one (default "
        "%(default)s)",
    )
    p.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="the person's utility noise std σ (0: noiseless)",
    )
    p.add_argument(
        "--model",
        choices=MODELS,
        default="ep",
        help="inference: EP (default; learns from decisive answers) or Laplace",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes running the seeds (default: one per usable core, at "
        "most one per seed; 1: all in this process)",
    )
    p.add_argument("--output", type=Path, default=Path("demo_output"))
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny run (2 seeds, 3 iterations, cheap acquisition maximiser) for tests",
    )
    args = p.parse_args(argv)
    if args.iterations < 0 or args.initial_pairs < 1 or args.seeds < 1:
        p.error("--iterations must be >= 0, --initial-pairs and --seeds >= 1")
    if args.workers is not None and args.workers < 1:
        p.error(f"--workers must be >= 1; got {args.workers}")
    acqf_options = None  # the loop's defaults
    if args.smoke:
        args.seeds = min(args.seeds, 2)
        args.iterations = min(args.iterations, 3)
        acqf_options = {"num_restarts": 2, "raw_samples": 32, "maxiter": 50}
    if args.workers is None:
        args.workers = min(args.seeds, usable_cores())
    args.settings = Settings(
        args.iterations, args.initial_pairs, args.noise, args.model, acqf_options
    )
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    r"""Run the demo; return the summary (as written to ``demo_summary.json``)."""
    args = parse_args(argv)
    t0 = time.perf_counter()
    seeds = list(range(args.seed, args.seed + args.seeds))
    print(
        f"Branin utility, person noise σ={args.noise}, {args.seeds} seeds "
        f"({seeds[0]}-{seeds[-1]}) in {args.workers} process"
        f"{'es' * (args.workers > 1)}: {args.initial_pairs} random pairs, then "
        f"{args.iterations} EUBO pairs (baseline: {args.iterations} more "
        "random pairs)",
        flush=True,
    )
    runs = run_seeds(seeds, args.settings, args.workers)
    summary = summarise(runs, args.settings)
    args.output.mkdir(parents=True, exist_ok=True)
    plot(summary, args.output / "demo.png")
    summary["settings"] |= {"seed": args.seed, "smoke": args.smoke}
    summary["settings"] |= {"workers": args.workers, "output": str(args.output)}
    summary["wall_seconds"] = time.perf_counter() - t0
    with open(args.output / "demo_summary.json", "w") as f:
        json.dump(summary, f, indent=2)
    print(table(summary))
    reps, done = summary["repeated_questions"], summary["resolved_repeats"]
    print(
        f"questions repeating an earlier one (within {REPEAT_TOL}), all seeds: "
        f"EUBO {sum(reps['eubo'])} ({sum(done['eubo'])} the model had "
        f"resolved)  random {sum(reps['random'])} ({sum(done['random'])} "
        "resolved)"
    )
    print(
        f"wrote {args.output / 'demo.png'} and "
        f"{args.output / 'demo_summary.json'} ({summary['wall_seconds']:.1f}s)"
    )
    print(headline(summary))
    return summary


if __name__ == "__main__":
    main()
