r"""Demo: preferential BO with EUBO on Branin, against random questions.

A simulated person (:class:`~prefbo.test_functions.SimulatedPerson`, probit
answer noise) holds the negative Branin utility
(:class:`~prefbo.test_functions.Branin`). A
:class:`~prefbo.loop.PreferentialOptimizer` (``strategy="eubo"``, model
``"ep"`` by default, ``--model laplace`` for the Laplace approximation) asks
it ``--initial-pairs`` random pairs, then ``--iterations`` pairs maximising
the Expected Utility of the Best Option, refitting after every answer; the
regret of its recommendation (:meth:`~prefbo.loop.PreferentialOptimizer.best`,
the told design with the highest posterior mean) is recorded after every
answer. The same optimiser with ``strategy="random"``, asking an identical
person the same initial pairs, is the baseline. The demo only adds the plot
and the summary to the loop.

Run ``python -m prefbo.loop.demo`` (``--help`` for options). It prints one line
per iteration and writes ``<output>/demo.png`` and ``<output>/demo_summary.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.repeats import (
    MIN_INFORMATION,
    REPEAT_TOL,
    answer_information,
    repeats,
)
from prefbo.test_functions import Branin, SimulatedPerson, UtilityProblem

MODELS = ("ep", "laplace")


@dataclass
class Arm:
    r"""One questioning strategy's optimiser, questions and regret curve."""

    name: str
    opt: PreferentialOptimizer
    asked: list[Tensor] = field(default_factory=list)  # q x d questions
    answers: list[int] = field(default_factory=list)
    regret: list[float] = field(default_factory=list)
    best_utility: list[float] = field(default_factory=list)
    repeats: int = 0  # questions (near-)identical to an earlier one
    resolved_repeats: int = 0  # of those, ones the model had already resolved

    @property
    def model(self):
        r"""The optimiser's model conditioned on every answer."""
        return self.opt.model

    @property
    def designs(self) -> Tensor:
        r"""``n x d`` told designs."""
        return self.opt.data()[0]

    @property
    def comparisons(self) -> Tensor:
        r"""``m x 2`` ``[winner, loser]`` indices into :attr:`designs`."""
        return self.opt.data()[1]


def _ask(arm: Arm) -> Tensor:
    r"""The optimiser's next question, counted as a repeat if it is one (and
    as a resolved repeat if its answer carries under ``MIN_INFORMATION``
    nats under the model before it, see :mod:`prefbo.loop.repeats`)."""
    X = arm.opt.ask()  # 2 x d
    to_unit = arm.opt.to_unit
    if repeats(to_unit(X), [to_unit(A) for A in arm.asked], REPEAT_TOL):
        arm.repeats += 1
        model = arm.opt.model
        if (
            model is not None
            and answer_information(model, to_unit(X)) < MIN_INFORMATION
        ):
            arm.resolved_repeats += 1
    arm.asked.append(X)
    return X


def _recommend(problem: UtilityProblem, arm: Arm) -> None:
    r"""Append the true utility and regret of the optimiser's recommendation."""
    x, _, _ = arm.opt.best()
    best = problem(x).item()
    arm.answers.append(len(arm.opt.history))
    arm.best_utility.append(best)
    arm.regret.append(max(problem.optimal_value - best, 0.0))


def _arm(name: str, problem: UtilityProblem, args: argparse.Namespace) -> Arm:
    r"""Run one strategy: the initial random pairs, then ``args.iterations``."""
    # identical people and initial questions for both strategies
    person = SimulatedPerson(problem, noise_std=args.noise, seed=args.seed)
    opt = PreferentialOptimizer(
        problem.bounds,
        model=args.model,
        strategy=name,
        seed=args.seed,
        initial_random=args.initial_pairs,
        acqf_options=args.acqf_options,
    )
    arm = Arm(name, opt)
    for _ in range(args.initial_pairs):
        X = _ask(arm)
        opt.tell(person.compare(X[0], X[1]))  # 0: X[0] preferred
    _recommend(problem, arm)
    for it in range(1, args.iterations + 1):
        t0 = time.perf_counter()
        X = _ask(arm)
        t1 = time.perf_counter()
        opt.tell(person.compare(X[0], X[1]))
        _recommend(problem, arm)  # refits the model
        if name == "eubo":
            print(
                f"iter {it:>3d}/{args.iterations}  answers {arm.answers[-1]:>3d}"
                f"  best utility {arm.best_utility[-1]:.4f}"
                f"  regret {arm.regret[-1]:.4f}"
                f"  fit {time.perf_counter() - t1:.2f}s  acq {t1 - t0:.2f}s",
                flush=True,
            )
    return arm


def run(args: argparse.Namespace) -> dict:
    r"""Run EUBO and the random baseline; return the summary dictionary."""
    problem = Branin()
    arms = {name: _arm(name, problem, args) for name in ("eubo", "random")}
    acqf = arms["eubo"].opt.acqf_options
    settings = {
        k: getattr(args, k)
        for k in ("iterations", "model", "initial_pairs", "noise", "seed", "smoke")
    }
    settings |= {k: acqf[k] for k in ("num_restarts", "raw_samples", "maxiter")}
    return {
        "problem": problem.name,
        "optimal_value": problem.optimal_value,
        "settings": settings,
        "answers": arms["eubo"].answers,
        "regret": {k: a.regret for k, a in arms.items()},
        "best_utility": {k: a.best_utility for k, a in arms.items()},
        "failed_fits": {k: a.opt.failed_fits for k, a in arms.items()},
        "repeated_questions": {k: a.repeats for k, a in arms.items()},
        "resolved_repeats": {k: a.resolved_repeats for k, a in arms.items()},
        "_arms": arms,
        "_problem": problem,
    }


def plot(summary: dict, path: Path, grid_size: int = 60) -> None:
    r"""Draw the 1 x 3 figure: true utility, EUBO posterior mean, regret."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problem, arm = summary["_problem"], summary["_arms"]["eubo"]
    (x0, y0), (x1, y1) = problem.bounds.tolist()  # lower, upper
    g0 = torch.linspace(x0, x1, grid_size, dtype=torch.float64)
    g1 = torch.linspace(y0, y1, grid_size, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(g0, g1, indexing="xy"), dim=-1)  # g x g x 2
    mean = arm.opt.predict(grid.reshape(-1, 2))[0].reshape(grid.shape[:2])
    rec = arm.opt.predict(arm.designs)[0].argmax()
    G0, G1 = grid[..., 0].numpy(), grid[..., 1].numpy()
    opt, X = problem.optimizers.numpy(), arm.designs.numpy()

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for ax, Z, title in (
        (axes[0], problem(grid), f"true utility ({problem.name})"),
        (axes[1], mean, "EUBO: posterior mean (final model)"),
    ):
        cs = ax.contourf(G0, G1, Z.numpy(), levels=25, cmap="viridis")
        fig.colorbar(cs, ax=ax)
        ax.scatter(
            opt[:, 0],
            opt[:, 1],
            marker="*",
            s=180,
            c="red",
            edgecolors="white",
            label="true optima",
            zorder=4,
        )
        ax.set(title=title, xlabel="$x_1$", ylabel="$x_2$", aspect="equal")
        ax.set(xlim=(x0 - 0.02, x1 + 0.02), ylim=(y0 - 0.02, y1 + 0.02))
    ax = axes[1]
    W, L = X[arm.comparisons[:, 0].numpy()], X[arm.comparisons[:, 1].numpy()]
    for w, l in zip(W, L):
        ax.plot([w[0], l[0]], [w[1], l[1]], c="white", lw=0.8, alpha=0.7)
    ax.scatter(
        L[:, 0],
        L[:, 1],
        s=14,
        facecolors="none",
        edgecolors="white",
        label="loser",
        zorder=3,
    )
    ax.scatter(
        W[:, 0],
        W[:, 1],
        s=18,
        c="orange",
        edgecolors="black",
        linewidths=0.4,
        label="winner",
        zorder=3,
    )
    ax.scatter(
        X[rec, 0],
        X[rec, 1],
        marker="X",
        s=120,
        c="cyan",
        edgecolors="black",
        label="recommended",
        zorder=5,
    )
    ax.legend(loc="lower left", fontsize=8, facecolor="0.55", framealpha=0.9)

    ax = axes[2]
    for name, style, label in (("eubo", "o-", "EUBO"), ("random", "s--", "random")):
        ax.plot(summary["answers"], summary["regret"][name], style, ms=3, label=label)
    positive = all(r > 0 for v in summary["regret"].values() for r in v)
    ax.set_yscale("log" if positive else "linear")
    ax.set(
        title="regret of the recommendation",
        xlabel="answers",
        ylabel="optimal value - utility(recommended)",
    )
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    r"""Parse the command line (``--smoke`` shrinks everything for tests)."""
    p = argparse.ArgumentParser(
        prog="python -m prefbo.loop.demo", description=__doc__.splitlines()[0]
    )
    p.add_argument("--iterations", type=int, default=25, help="EUBO questions")
    p.add_argument(
        "--initial-pairs",
        type=int,
        default=4,
        help="random questions answered before the first EUBO one",
    )
    p.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="the person's utility noise std σ (0: noiseless)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--model",
        choices=MODELS,
        default="ep",
        help="inference: EP (default; learns from decisive answers) or Laplace",
    )
    p.add_argument("--output", type=Path, default=Path("demo_output"))
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny run (3 iterations, cheap acquisition maximiser) for tests",
    )
    args = p.parse_args(argv)
    if args.iterations < 0 or args.initial_pairs < 1:
        p.error("--iterations must be >= 0 and --initial-pairs >= 1")
    args.acqf_options = None  # the loop's defaults
    if args.smoke:
        args.iterations = min(args.iterations, 3)
        args.acqf_options = {"num_restarts": 2, "raw_samples": 32, "maxiter": 50}
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    r"""Run the demo; return the summary (as written to ``demo_summary.json``)."""
    args = parse_args(argv)
    t0 = time.perf_counter()
    print(
        f"Branin utility, person noise σ={args.noise}, seed {args.seed}: "
        f"{args.initial_pairs} random pairs, then {args.iterations} EUBO pairs "
        f"(baseline: {args.iterations} more random pairs)",
        flush=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        summary = run(args)
    args.output.mkdir(parents=True, exist_ok=True)
    plot(summary, args.output / "demo.png")
    summary = {k: v for k, v in summary.items() if not k.startswith("_")}
    summary["settings"]["output"] = str(args.output)
    summary["wall_seconds"] = time.perf_counter() - t0
    with open(args.output / "demo_summary.json", "w") as f:
        json.dump(summary, f, indent=2)
    final = {k: v[-1] for k, v in summary["regret"].items()}
    print(
        f"final regret after {summary['answers'][-1]} answers: "
        f"EUBO {final['eubo']:.4f}  vs  random {final['random']:.4f} "
        f"(one run, seed {args.seed}; many seeds: benchmarks/pbo_regret.py)"
    )
    reps, done = summary["repeated_questions"], summary["resolved_repeats"]
    print(
        f"questions repeating an earlier one (within {REPEAT_TOL}): EUBO "
        f"{reps['eubo']} ({done['eubo']} the model had resolved)  random "
        f"{reps['random']} ({done['random']} resolved)"
    )
    print(
        f"wrote {args.output / 'demo.png'} and "
        f"{args.output / 'demo_summary.json'} ({summary['wall_seconds']:.1f}s)"
    )
    return summary


if __name__ == "__main__":
    main()
