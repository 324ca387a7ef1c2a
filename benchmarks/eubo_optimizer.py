r"""EUBO maximisation: prefbo's ``maximize_eubo`` against BoTorch's ``optimize_acqf``.

For each problem, model and number of answers ``m``, a
:class:`~prefbo.loop.PreferentialOptimizer` with ``strategy="random"`` asks
``m`` uniformly random pairs of a simulated probit person
(:class:`~prefbo.test_functions.SimulatedPerson`, ``σ = 0.1 · spread``) and its
model (hyperparameters fitted as in the loop) is the one both maximisers get:

- BoTorch: ``optimize_acqf(AnalyticExpectedUtilityOfBestOption(model), q=2,
  num_restarts, raw_samples, options={"maxiter", "seed"})`` under
  ``torch.manual_seed(seed)`` (its Boltzmann choice of starts draws from
  torch's global generator) — the loop's ``acqf_options={"optimizer":
  "scipy"}``;
- prefbo (``--prefbo maximize_eubo``, default): ``maximize_eubo(model,
  bounds, num_restarts, raw_samples, num_steps=maxiter, seed)`` (the loop's
  ``acqf_options={"optimizer": "torch"}``);
- prefbo (``--prefbo gen_candidates``): the same ``optimize_acqf`` call on
  :class:`~prefbo.acquisition.FastAnalyticEUBO` with
  ``gen_candidates=gen_candidates_eubo`` (the loop's default maximiser; it
  should return BoTorch's question: 0 better, 0 worse).

Two settings of ``(num_restarts, raw_samples, maxiter)``: the loop's defaults
``(4, 128, 100)`` and the regret benchmark's ``(2, 64, 50)``; both questions
kinds: a free pair (``q = 2``) and one design against a fixed previous winner
(``keep_winner``; the last answer's winner). Each maximiser is timed as the
minimum over ``--repeats`` calls (interleaved); the values are BoTorch's own
``AnalyticExpectedUtilityOfBestOption`` at each maximiser's result.

Table: per problem, model, setting and question kind, the median time of
each, the median of the per-case time ratios (BoTorch / prefbo) and the ratio
of total times, the fraction of cases where prefbo's EUBO is at least
BoTorch's minus 1e-6, the number of cases where it is more than 1e-6 higher
(lower), and the largest shortfall.

Usage::

    OMP_NUM_THREADS=1 python -m benchmarks eubo_optimizer           # ~1.5 minutes
    OMP_NUM_THREADS=1 python -m benchmarks eubo_optimizer --prefbo gen_candidates \
        --output benchmarks/results/eubo_gen_candidates.md
    OMP_NUM_THREADS=1 python -m benchmarks eubo_optimizer --quick   # ~10 s

The markdown report is printed and written to
``benchmarks/results/eubo_optimizer.md`` (``--output``; ``--append`` adds to
it, e.g. a run with ``--models skew variational``; ``--quick`` writes to
``<tempdir>/prefbo-quick/`` unless given ``--output``). Timings are
wall-clock on whatever else the machine runs (the load average is recorded).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.exceptions.warnings import OptimizationWarning
from botorch.optim import optimize_acqf
from linear_operator.utils.warnings import NumericalWarning as LONumericalWarning
from torch import Tensor
from torch.quasirandom import SobolEngine

import prefbo
from benchmarks.harness import environment, reports
from prefbo.acquisition import FastAnalyticEUBO, gen_candidates_eubo, maximize_eubo
from prefbo.loop.optimizer import PreferentialOptimizer, expected_fit_warnings
from prefbo.test_functions import Branin, Hartmann3, Hartmann6, SimulatedPerson

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "eubo_optimizer.md"
PROBLEMS = {p.__name__: p for p in (Branin, Hartmann3, Hartmann6)}
MODELS = ("laplace", "ep", "skew", "variational")
SETTINGS = {"loop": (4, 128, 100), "regret": (2, 64, 50)}  # restarts, raw, maxiter
TOL = 1e-6
ARMS = {
    "maximize_eubo": "`maximize_eubo`",
    "gen_candidates": (
        "`optimize_acqf(FastAnalyticEUBO, gen_candidates=gen_candidates_eubo)`"
    ),
}


@dataclass
class Case:
    r"""One model and question kind, both maximisers' time and EUBO."""

    problem: str
    model: str
    setting: str
    winner: bool
    m: int
    seed: int
    t_botorch: float
    t_prefbo: float
    v_botorch: float
    v_prefbo: float


def fitted_model(problem_name: str, model: str, m: int, seed: int):
    r"""The loop's model after ``m`` answered random pairs, and the last winner."""
    problem = PROBLEMS[problem_name]()
    lo, hi = problem.bounds
    sobol = SobolEngine(problem.dim, scramble=True, seed=0).draw(1024).double()
    spread = problem(lo + (hi - lo) * sobol).std()
    person = SimulatedPerson(problem, noise_std=0.1 * float(spread), seed=seed)
    opt = PreferentialOptimizer(
        problem.bounds,
        model=model,
        strategy="random",
        seed=seed,
        model_options={"num_samples": 128} if model == "skew" else None,
    )
    for _ in range(m):
        X = opt.ask()
        opt.tell(person.compare(X[0], X[1]))
    with expected_fit_warnings():
        fitted = opt.model
    last = opt.history[-1]
    return problem.bounds, fitted, last.options[last.answer]


def _timed(fn: Callable[[], Tensor]) -> tuple[float, Tensor]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_case(
    bounds, model, winner, setting: str, seed: int, repeats: int, arm: str
) -> tuple[float, float, float, float]:
    r"""``(t_botorch, t_prefbo, v_botorch, v_prefbo)`` for one question
    (``arm``: prefbo's maximiser, see the module docstring)."""
    restarts, raw, maxiter = SETTINGS[setting]
    acqf = AnalyticExpectedUtilityOfBestOption(
        pref_model=model,
        previous_winner=None if winner is None else winner.unsqueeze(0),
    )
    q = 1 if winner is not None else 2

    def optimize(acquisition, **kwargs):
        X, _ = optimize_acqf(
            acquisition,
            bounds=bounds,
            q=q,
            num_restarts=restarts,
            raw_samples=raw,
            options={"seed": seed, "maxiter": maxiter},
            **kwargs,
        )
        return X.detach()

    def botorch_max():
        return optimize(acqf)

    def prefbo_max():
        if arm == "gen_candidates":
            fast = FastAnalyticEUBO(
                model, previous_winner=None if winner is None else winner[None]
            )
            return optimize(fast, gen_candidates=gen_candidates_eubo)
        return maximize_eubo(
            model,
            bounds,
            previous_winner=winner,
            raw_samples=raw,
            num_restarts=restarts,
            num_steps=maxiter,
            seed=seed,
        )

    t_b, t_p = float("inf"), float("inf")
    with torch.random.fork_rng(devices=[]):
        for _ in range(repeats):  # interleaved: both see the same machine load
            # optimize_acqf's seed covers its raw samples, not its choice of
            # starts (torch's global generator): seed that too, as the loop does
            torch.manual_seed(seed)
            tb, X_b = _timed(botorch_max)
            torch.manual_seed(seed)
            tp, X_p = _timed(prefbo_max)
            t_b, t_p = min(t_b, tb), min(t_p, tp)
    with torch.no_grad():
        v_b, v_p = acqf(X_b.unsqueeze(0)).item(), acqf(X_p.unsqueeze(0)).item()
    return t_b, t_p, v_b, v_p


def run(args: argparse.Namespace) -> list[Case]:
    r"""Every case of the grid."""
    cases = []
    for pname in args.problems:
        for model_name in args.models:
            for m in args.answers:
                for seed in range(args.seeds):
                    bounds, model, winner = fitted_model(pname, model_name, m, seed)
                    for setting in args.settings:
                        for with_winner in (False, True):
                            w = winner if with_winner else None
                            with _expected_warnings():
                                res = run_case(
                                    bounds,
                                    model,
                                    w,
                                    setting,
                                    seed,
                                    args.repeats,
                                    args.prefbo,
                                )
                            cases.append(
                                Case(
                                    pname,
                                    model_name,
                                    setting,
                                    with_winner,
                                    m,
                                    seed,
                                    *res,
                                )
                            )
                print(
                    f"{pname} {model_name} m={m}: "
                    + ", ".join(
                        f"{c.t_botorch / c.t_prefbo:.1f}x"
                        for c in cases
                        if (c.problem, c.model, c.m) == (pname, model_name, m)
                    ),
                    flush=True,
                )
    return cases


@contextmanager
def _expected_warnings() -> Iterator[None]:
    r"""BoTorch's L-BFGS-B stopping on its limits and linear_operator's jitter."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=OptimizationWarning)
        warnings.filterwarnings("ignore", category=LONumericalWarning)
        yield


def _summary(rows: list[Case]) -> tuple:
    ratios = [c.t_botorch / c.t_prefbo for c in rows]
    diffs = [c.v_prefbo - c.v_botorch for c in rows]
    return (
        1e3 * statistics.median(c.t_botorch for c in rows),
        1e3 * statistics.median(c.t_prefbo for c in rows),
        statistics.median(ratios),
        sum(c.t_botorch for c in rows) / sum(c.t_prefbo for c in rows),
        sum(d >= -TOL for d in diffs) / len(rows),
        sum(d > TOL for d in diffs),
        sum(d < -TOL for d in diffs),
        max(0.0, -min(diffs)),
    )


def report(
    cases: list[Case], args: argparse.Namespace, load: tuple, argv: Sequence[str]
) -> str:
    r"""The markdown report."""
    lines = [
        f"# EUBO maximisation: {ARMS[args.prefbo]} vs BoTorch's `optimize_acqf`",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- versions: {environment.versions_text()}, prefbo {prefbo.__version__}",
        f"- machine: {environment.machine()}; threads: {environment.threads()}; "
        f"load average {load[0]:.2f} at the start, {load[1]:.2f} at the end "
        "(other processes share the machine)",
        f"- command: `{reports.command('eubo_optimizer', argv)}`",
        f"- grid: problems {', '.join(args.problems)}; models "
        f"{', '.join(args.models)}; m = {', '.join(map(str, args.answers))} "
        f"answered random pairs; seeds 0..{args.seeds - 1}; settings "
        + ", ".join(
            f"{s} (num_restarts, raw_samples, maxiter) = {SETTINGS[s]}"
            for s in args.settings
        )
        + f"; time = min over {args.repeats} calls",
        "",
        "Question `pair`: both options chosen (q = 2); `winner`: one option "
        "against the last answer's winner (BoTorch's `previous_winner`). Times "
        "in ms (medians); *ratio*: median over cases of BoTorch's time / "
        "prefbo's, *total*: ratio of the summed times. *≥*: fraction of cases "
        f"with prefbo's EUBO ≥ BoTorch's − {TOL:g}; *better* / *worse*: cases "
        f"more than {TOL:g} above / below; *max shortfall*: largest amount "
        "below BoTorch's.",
        "",
        "| problem | model | setting | question | cases | BoTorch ms | prefbo ms "
        "| ratio | total | ≥ | better | worse | max shortfall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted(
        {(c.problem, c.model, c.setting, c.winner) for c in cases},
        key=lambda k: (
            args.problems.index(k[0]),
            args.models.index(k[1]),
            args.settings.index(k[2]),
            k[3],
        ),
    )
    for key in keys:
        rows = [c for c in cases if (c.problem, c.model, c.setting, c.winner) == key]
        tb, tp, ratio, total, frac, better, worse, short = _summary(rows)
        kind = "winner" if key[3] else "pair"
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {kind} | {len(rows)} | {tb:.1f} "
            f"| {tp:.1f} | {ratio:.1f} | {total:.1f} | {frac:.2f} | {better} "
            f"| {worse} | {short:.2g} |"
        )
    lines.append("")
    for setting in args.settings:
        rows = [c for c in cases if c.setting == setting]
        tb, tp, ratio, total, frac, better, worse, short = _summary(rows)
        lines.append(
            f"- **{setting} setting, all {len(rows)} cases**: median time ratio "
            f"{ratio:.1f}x (total {total:.1f}x; {tb:.1f} ms vs {tp:.1f} ms); "
            f"prefbo ≥ BoTorch − {TOL:g} in {frac:.0%} of cases ({better} better, "
            f"{worse} worse, largest shortfall {short:.2g})."
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    r"""Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS)
    )
    p.add_argument("--models", nargs="+", default=["laplace", "ep"], choices=MODELS)
    p.add_argument("--answers", nargs="+", type=int, default=[10, 20, 30, 40])
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    p.add_argument(
        "--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS)
    )
    p.add_argument("--repeats", type=int, default=3, help="timed calls per case")
    p.add_argument(
        "--prefbo",
        default="maximize_eubo",
        choices=list(ARMS),
        help="prefbo's maximiser (see the module docstring)",
    )
    p.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"the report (default {DEFAULT_OUTPUT.name} in benchmarks/results/, "
        "with --quick in <tempdir>/prefbo-quick/)",
    )
    p.add_argument("--append", action="store_true", help="append to --output")
    p.add_argument(
        "--quick", action="store_true", help="Branin and Hartmann6, m = 10, 30, 1 seed"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.problems, args.answers, args.seeds = ["Branin", "Hartmann6"], [10, 30], 1
        args.repeats = 2
    if args.output is None:
        base = reports.scratch_dir() if args.quick else DEFAULT_OUTPUT.parent
        args.output = base / DEFAULT_OUTPUT.name
    return args


def main(argv: Sequence[str] | None = None) -> str:
    r"""Run the benchmark; returns the markdown report (also written to disk)."""
    args = parse_args(argv)
    load_start = environment.load_average()
    t0 = time.perf_counter()
    cases = run(args)
    argv = list(sys.argv[1:] if argv is None else argv)
    text = report(cases, args, (load_start, environment.load_average()), argv)
    text += f"\nTotal wall time: {time.perf_counter() - t0:.0f} s.\n"
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if args.append and args.output.exists():
        text = args.output.read_text() + "\n" + text
    args.output.write_text(text)
    return text
