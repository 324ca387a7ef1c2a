r"""Demo: preferential BO with EUBO on Branin, against random questions.

A simulated person (:class:`~prefbo.test_functions.SimulatedPerson`, probit answer
noise) holds the negative Branin utility (:class:`~prefbo.test_functions.Branin`).
Each iteration fits a :class:`~prefbo.models.PairwiseEPGP` (default; ``--model
laplace`` for :class:`~prefbo.models.PairwiseLaplaceGP`) to all answers
so far, asks the pair that maximises BoTorch's analytic Expected Utility of the
Best Option (EUBO; ``optimize_acqf`` on
:class:`~prefbo.acquisition.FastAnalyticEUBO`, the same values), and records
the regret of the recommendation (the design seen so far with the highest
posterior mean). The same number of uniformly random questions, answered by an
identical person, is the baseline.

Run ``python -m prefbo.loop.demo`` (``--help`` for options). It prints one line
per iteration and writes ``<output>/demo.png`` and ``<output>/demo_summary.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from botorch.exceptions.errors import ModelFittingError
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.optim import optimize_acqf
from torch import Tensor

from prefbo.acquisition.eubo import FastAnalyticEUBO
from prefbo.exceptions import ConvergenceWarning, NumericalWarning
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.test_functions import Branin, SimulatedPerson, UtilityProblem

MODELS = {
    "ep": (PairwiseEPGP, PairwiseEPMLL),
    "laplace": (PairwiseLaplaceGP, PairwiseLaplaceMLL),
}

REPEAT_ATOL = 0.02  # two questions closer than this (max-norm) count as a repeat


@dataclass
class Arm:
    r"""The designs, answers and regret curve of one questioning strategy."""

    name: str
    designs: Tensor  # n x d, float64
    comparisons: Tensor  # m x 2 long, rows [winner, loser]
    answers: list[int] = field(default_factory=list)
    regret: list[float] = field(default_factory=list)
    best_utility: list[float] = field(default_factory=list)
    model: PairwiseLaplaceGP | None = None
    fit_seconds: float = 0.0
    failed_fits: int = 0
    repeats: int = 0  # questions (near-)identical to an earlier one


@contextmanager
def _expected_warnings():
    r"""Silence the warnings this loop triggers by design, and only those.

    - prefbo's ``NumericalWarning`` from the Cholesky of ``K``: once questions
      concentrate near the optimum (or repeat a design), ``K`` becomes
      numerically singular and a little announced jitter is added.
    - prefbo's ``ConvergenceWarning`` from Newton's mode search or EP's
      sweeps: at some hyperparameters visited by L-BFGS-B (a near-singular
      ``K``, or the outputscale near its cap with nearly separable answers)
      the site/step tolerance is not met within the iteration budget; the
      approximation is then accurate to about what ``K`` allows, which is
      enough for the fit to move on.
    - BoTorch's ``OptimizationWarning`` from L-BFGS-B (hyperparameters or
      acquisition) stopping on its iteration or line-search limits; the point
      reached is still used, as BoTorch does.

    Inside ``fit_gpytorch_mll`` an unfiltered warning would also abort the
    attempt and refit from hyperparameters sampled from their priors (slow and
    random), so these are ignored rather than recorded.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r".*not numerically positive definite",
            category=NumericalWarning,
        )
        warnings.filterwarnings(
            "ignore",
            message=r"(Laplace mode finding|EP) stopped",
            category=ConvergenceWarning,
        )
        warnings.filterwarnings("ignore", category=OptimizationWarning)
        yield


def _fit(arm: Arm, kind: str = "ep") -> PairwiseLaplaceGP | PairwiseEPGP:
    r"""Fit a fresh model to the arm's data and record its recommendation."""
    t0 = time.perf_counter()
    cls, mll_cls = MODELS[kind]
    model = cls(arm.designs, arm.comparisons)
    with _expected_warnings():
        try:
            fit_gpytorch_mll(mll_cls(model.likelihood, model))
        except ModelFittingError:  # keep the default hyperparameters
            arm.failed_fits += 1
        model.eval()
    arm.fit_seconds = time.perf_counter() - t0
    arm.model = model
    return model


def _recommend(problem: UtilityProblem, arm: Arm) -> None:
    r"""Append the true utility and regret of the best-posterior-mean design."""
    with torch.no_grad(), _expected_warnings():
        mean = arm.model.posterior(arm.designs.unsqueeze(-2)).mean.reshape(-1)
    best = problem(arm.designs[mean.argmax()]).item()
    arm.answers.append(arm.comparisons.shape[0])
    arm.best_utility.append(best)
    arm.regret.append(max(problem.optimal_value - best, 0.0))


def _append(arm: Arm, pair: Tensor, person: SimulatedPerson) -> None:
    r"""Ask ``person`` about a ``2 x d`` pair and append it to the arm."""
    if arm.designs.shape[0]:
        asked = arm.designs.reshape(-1, 2, arm.designs.shape[-1])  # m x 2 x d
        for p in (pair, pair.flip(0)):
            if bool(((asked - p).abs().amax((-2, -1)) <= REPEAT_ATOL).any()):
                arm.repeats += 1
                break
    winner = person.compare(pair[0], pair[1])  # 0: pair[0] preferred
    n = arm.designs.shape[0]
    row = torch.tensor([[n + winner, n + 1 - winner]], dtype=torch.long)
    arm.designs = torch.cat([arm.designs, pair])
    arm.comparisons = torch.cat([arm.comparisons, row])


def _random_pairs(problem: UtilityProblem, k: int, gen: torch.Generator) -> Tensor:
    r"""``k x 2 x d`` uniformly random designs in the problem's box."""
    lo, hi = problem.bounds
    u = torch.rand(k, 2, problem.dim, generator=gen, dtype=torch.float64)
    return lo + (hi - lo) * u


def _start(
    name: str,
    problem: UtilityProblem,
    args,
    person: SimulatedPerson,
    gen: torch.Generator,
) -> Arm:
    r"""An arm holding the initial random pairs and their answers."""
    arm = Arm(
        name,
        torch.empty(0, problem.dim, dtype=torch.float64),
        torch.empty(0, 2, dtype=torch.long),
    )
    for pair in _random_pairs(problem, args.initial_pairs, gen):
        _append(arm, pair, person)
    _fit(arm, args.model)
    _recommend(problem, arm)
    return arm


def _next_eubo_pair(model, problem, args, it: int) -> tuple[Tensor, float]:
    r"""The ``2 x d`` pair maximising EUBO, and the seconds it took."""
    t0 = time.perf_counter()
    acq = FastAnalyticEUBO(model)  # BoTorch's EUBO values, no posterior objects
    with _expected_warnings():
        cand, _ = optimize_acqf(
            acq,
            bounds=problem.bounds,
            q=2,
            num_restarts=args.num_restarts,
            raw_samples=args.raw_samples,
            options={"seed": 1000 * args.seed + it, "maxiter": args.maxiter},
        )
    return cand.detach(), time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict:
    r"""Run EUBO and the random baseline; return the summary dictionary."""
    problem = Branin()
    arms = {}
    for name in ("eubo", "random"):
        # identical people and initial questions for both strategies
        person = SimulatedPerson(problem, noise_std=args.noise, seed=args.seed)
        gen = torch.Generator().manual_seed(args.seed)
        arm = _start(name, problem, args, person, gen)
        for it in range(1, args.iterations + 1):
            acq_s = 0.0
            if name == "eubo":
                pair, acq_s = _next_eubo_pair(arm.model, problem, args, it)
            else:
                pair = _random_pairs(problem, 1, gen)[0]
            _append(arm, pair, person)
            _fit(arm, args.model)
            _recommend(problem, arm)
            if name == "eubo":
                print(
                    f"iter {it:>3d}/{args.iterations}  answers {arm.answers[-1]:>3d}"
                    f"  best utility {arm.best_utility[-1]:.4f}"
                    f"  regret {arm.regret[-1]:.4f}  fit {arm.fit_seconds:.2f}s"
                    f"  acq {acq_s:.2f}s",
                    flush=True,
                )
        arms[name] = arm
    return {
        "problem": problem.name,
        "optimal_value": problem.optimal_value,
        "settings": {
            k: getattr(args, k)
            for k in (
                "iterations",
                "model",
                "initial_pairs",
                "noise",
                "seed",
                "smoke",
                "num_restarts",
                "raw_samples",
                "maxiter",
            )
        },
        "answers": arms["eubo"].answers,
        "regret": {k: a.regret for k, a in arms.items()},
        "best_utility": {k: a.best_utility for k, a in arms.items()},
        "failed_fits": {k: a.failed_fits for k, a in arms.items()},
        "repeated_questions": {k: a.repeats for k, a in arms.items()},
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
    with torch.no_grad(), _expected_warnings():
        mean = arm.model.posterior(grid.reshape(-1, 1, 2)).mean.reshape(grid.shape[:2])
        rec = arm.model.posterior(arm.designs.unsqueeze(-2)).mean.reshape(-1).argmax()
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
        choices=sorted(MODELS),
        default="ep",
        help="inference: EP (default; learns from decisive answers) or Laplace",
    )
    p.add_argument("--output", type=Path, default=Path("demo_output"))
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny run (3 iterations, cheap optimiser) for tests",
    )
    args = p.parse_args(argv)
    if args.iterations < 0 or args.initial_pairs < 1:
        p.error("--iterations must be >= 0 and --initial-pairs >= 1")
    if args.smoke:
        args.iterations = min(args.iterations, 3)
        args.num_restarts, args.raw_samples, args.maxiter = 2, 32, 50
    else:
        args.num_restarts, args.raw_samples, args.maxiter = 4, 128, 200
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
        f"EUBO {final['eubo']:.4f}  vs  random {final['random']:.4f}"
    )
    reps = summary["repeated_questions"]
    print(
        f"questions repeating an earlier one (within {REPEAT_ATOL}): "
        f"EUBO {reps['eubo']}  random {reps['random']}"
    )
    print(
        f"wrote {args.output / 'demo.png'} and "
        f"{args.output / 'demo_summary.json'} ({summary['wall_seconds']:.1f}s)"
    )
    return summary


if __name__ == "__main__":
    main()
