r"""Batch preference BO on Branin: Thompson pairs against random pairs.

The preference counterpart of ``inducing_bo.py``'s high-throughput setting,
without inducing points: the standardised Branin utility on ``[0, 1]²``
answered by a ``SimulatedPerson`` (probit noise ``σ = 0.1``). A
``PairwiseLaplaceGP`` is refitted (``fit_gpytorch_mll``) every round; each
round asks ``B`` questions, either ``thompson_pairs`` (a Thompson maximiser
against the current best design) or uniformly random pairs. The regret is
``u* - u(x̂)`` at the recommendation ``x̂``, the design with the highest
posterior mean (the person never reveals utilities). Seeds fix the initial
design, the person, torch's RNG at the start of a run and every round, the
same for both methods, so a run does not depend on the runs before it.

Usage::

    OMP_NUM_THREADS=1 python -m benchmarks preference_thompson          # ~2 minutes
    OMP_NUM_THREADS=1 python -m benchmarks preference_thompson --quick  # seconds

The report is printed and written to ``--output``: by default
``benchmarks/results/preference_thompson.md`` for the published setting (every
size option at its default) and ``<tempdir>/prefbo-quick/preference_thompson.md``
for any other (``--quick`` included), so a trial run never overwrites the
published page. The text between ``<!-- hand -->`` and ``<!-- /hand -->`` of
an existing report (hand-written notes) is kept when it is rewritten.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import torch
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from scipy.stats import wilcoxon
from torch import Tensor

from benchmarks.harness import environment, reports
from prefbo.acquisition.thompson import thompson_pairs
from prefbo.exceptions import NumericalWarning
from prefbo.mlls import PairwiseLaplaceMLL
from prefbo.models import PairwiseLaplaceGP
from prefbo.test_functions import Branin, SimulatedPerson

TKW = {"dtype": torch.float64}
RESULTS = Path(__file__).resolve().parent / "results"
METHODS = {"thompson": "Thompson pairs", "random": "random pairs"}
#: The options whose defaults make up the published setting.
PUBLISHED = (
    "seeds", "rounds", "batch_size", "init", "raw_samples", "num_restarts", "ts_steps"
)  # fmt: skip


def _fit(X: Tensor, comparisons: Tensor) -> PairwiseLaplaceGP:
    model = PairwiseLaplaceGP(X, comparisons)
    with warnings.catch_warnings():
        # L-BFGS stopping on its iteration limit is expected and harmless here
        warnings.simplefilter("ignore", OptimizationWarning)
        fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    model.eval()
    return model.requires_grad_(False)


def recommendation_regret(model: PairwiseLaplaceGP, problem: Branin) -> float:
    r"""Regret of the training design with the highest posterior mean."""
    with torch.no_grad():
        designs = model.datapoints
        mean = model.posterior(designs.unsqueeze(-2)).mean.reshape(-1)
    return problem.optimal_value - float(problem(designs[mean.argmax()]))


def run(method: str, seed: int, args: argparse.Namespace) -> list[float]:
    r"""One run; returns the recommendation's regret after each round.

    Args:
        method: ``"thompson"`` or ``"random"``.
        seed: Seed of the initial design, the person and every round.
        args: Parsed command-line options.

    Returns:
        ``rounds + 1`` regrets (the first before any batch).
    """
    with warnings.catch_warnings():
        # Thompson maximisers cluster near the best design, so the prior
        # covariance of the designs needs jitter; expected and harmless here
        warnings.filterwarnings(
            "ignore",
            message=r".*not numerically positive definite",
            category=NumericalWarning,
        )
        return _run(method, seed, args)


def _run(method: str, seed: int, args: argparse.Namespace) -> list[float]:
    torch.manual_seed(seed)  # the first fit's randomness: independent of earlier runs
    problem = Branin()
    person = SimulatedPerson(problem, noise_std=0.1, seed=seed)
    g = torch.Generator().manual_seed(seed)
    n0 = args.init
    X = torch.rand(n0, 2, **TKW, generator=g)
    pairs = torch.stack([torch.arange(n0), torch.randperm(n0, generator=g)], -1)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]  # q x 2 indices

    def answer(X: Tensor, idx: Tensor) -> Tensor:
        first_loses = person.compare_batch(X[idx]).bool()  # q
        return torch.where(first_loses.unsqueeze(-1), idx.flip(-1), idx)  # winner first

    comparisons = answer(X, pairs)
    model = _fit(X, comparisons)
    regret = [recommendation_regret(model, problem)]
    bounds = problem.bounds.to(**TKW)
    for r in range(args.rounds):
        torch.manual_seed(10_000 * seed + r)
        n, b = X.shape[0], args.batch_size
        if method == "thompson":
            questions = thompson_pairs(
                model,
                bounds,
                b,
                raw_samples=args.raw_samples,
                num_restarts=args.num_restarts,
                num_steps=args.ts_steps,
                seed=10_000 * seed + r,  # fresh Sobol raw points every round
            )
            # the second option is the current best design, a training design
            best = int((X == questions[0, 1]).all(-1).nonzero()[0, 0])
            X = torch.cat([X, questions[:, 0]])
            idx = torch.stack([torch.arange(n, n + b), torch.full((b,), best)], -1)
        else:
            X = torch.cat([X, torch.rand(2 * b, 2, **TKW, generator=g)])
            idx = torch.arange(n, n + 2 * b).reshape(b, 2)
        comparisons = torch.cat([comparisons, answer(X, idx)])
        model = _fit(X, comparisons)
        regret.append(recommendation_regret(model, problem))
    return regret


def _mean_se(values: list[float]) -> tuple[float, float]:
    t = torch.tensor(values, **TKW)
    se = float(t.std() / math.sqrt(len(values))) if len(values) > 1 else float("nan")
    return float(t.mean()), se


def _fmt(mean: float, se: float) -> str:
    return f"{mean:.3g} ± {se:.2g}" if math.isfinite(se) else f"{mean:.3g}"


def parse(argv: list[str] | None) -> argparse.Namespace:
    r"""The options; ``published`` says whether they are the published setting."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--quick", action="store_true", help="a run of seconds (overrides sizes)")
    add("--seeds", type=int, default=20, help="seeds 0 … N-1")
    add("--rounds", type=int, default=4, help="rounds")
    add("--batch-size", type=int, default=100, help="questions per round")
    add("--init", type=int, default=32, help="initial designs")
    add("--raw-samples", type=int, default=256, help="Sobol points per path")
    add("--num-restarts", type=int, default=4, help="refined starts per path")
    add("--ts-steps", type=int, default=30, help="Adam steps per path")
    add(
        "--output",
        type=Path,
        help="report (default: results/preference_thompson.md for the published "
        "setting, else <tempdir>/prefbo-quick/preference_thompson.md)",
    )
    args = parser.parse_args(argv)
    defaults = parser.parse_args([])
    args.published = not args.quick and all(
        getattr(args, k) == getattr(defaults, k) for k in PUBLISHED
    )
    if args.quick:
        args.seeds, args.rounds, args.batch_size, args.init = 1, 1, 8, 10
        args.raw_samples, args.num_restarts, args.ts_steps = 32, 2, 5
    return args


def output_path(args: argparse.Namespace) -> Path:
    r"""``--output``, or the default for the setting (never results/ unless
    the setting is the published one)."""
    if args.output is not None:
        return args.output
    base = RESULTS if args.published else reports.scratch_dir()
    return base / "preference_thompson.md"


def main(argv: list[str] | None = None) -> str:
    r"""Run both methods on every seed; write and return the markdown report."""
    args = parse(argv)
    output = output_path(args)
    if not args.published:
        print(f"not the published setting: report {output}", file=sys.stderr)
    start, load = time.perf_counter(), environment.load_average()
    final = {}
    for method in METHODS:
        final[method] = [run(method, s, args)[-1] for s in range(args.seeds)]
        print(f"{method}: {final[method]}", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start
    ts, rnd = final["thompson"], final["random"]
    diff = [a - b for a, b in zip(ts, rnd, strict=True)]
    nonzero = [d for d in diff if d != 0]
    p_w = float(wilcoxon(nonzero).pvalue) if nonzero else 1.0
    hand = reports.hand_written(output)
    hand = hand + "\n" if hand else ""
    rows = [
        f"| {METHODS[k]} | {_fmt(*_mean_se(v))} | {reports.median(v):.3g} |"
        for k, v in final.items()
    ]
    cmd = reports.command("preference_thompson", sys.argv[1:] if argv is None else argv)
    text = "\n".join(
        [
            "# Batch preference BO on Branin: Thompson pairs vs random pairs",
            "",
            f"Command: `{cmd}`",
            "",
            f"Set-up: {args.seeds} seeds (0 … {args.seeds - 1}), Branin on [0, 1]², "
            f"simulated person with probit noise σ = 0.1, {args.init} initial "
            f"designs, {args.rounds} rounds of {args.batch_size} questions, "
            "`PairwiseLaplaceGP` refitted each round; Thompson: "
            f"{args.raw_samples} Sobol points, {args.num_restarts} restarts, "
            f"{args.ts_steps} steps per path. Regret of the recommendation (the "
            "design of highest posterior mean) after the last round. No inducing "
            "points are involved.",
            "",
            "| method | final regret (mean ± s.e.) | median |",
            "|---|---|---|",
            *rows,
            "",
            f"Paired difference Thompson − random: {_fmt(*_mean_se(diff))}; "
            f"Thompson lower on {sum(d < 0 for d in diff)}/{len(diff)} seeds, "
            f"higher on {sum(d > 0 for d in diff)}; two-sided Wilcoxon "
            f"signed-rank p = {p_w:.2g} (ties dropped).",
            "",
            f"Run time {elapsed:.0f} s, {environment.machine()}; "
            f"{environment.versions_text()}; threads: {environment.threads()}; "
            f"load average {load:.2f} before, {environment.load_average():.2f} "
            "after.",
            "",
            *([hand] if hand else []),
        ]
    )
    reports.write(output, text)
    print(text)
    return text
