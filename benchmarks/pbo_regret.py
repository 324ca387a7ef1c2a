r"""Preferential BO regret: prefbo's optimizer against a BoTorch-only EUBO loop.

For each problem, answer-noise level and seed, a simulated probit person
(:class:`~prefbo.test_functions.SimulatedPerson`) answers pairwise questions asked
by each configuration:

- ``botorch-eubo`` (the reference): BoTorch's ``PairwiseGP`` fitted with its
  ``PairwiseLaplaceMarginalLogLikelihood``, questions from BoTorch's analytic
  EUBO, written here with BoTorch alone;
- ``laplace-eubo``, ``ep-eubo``, ``skew-eubo``, ``variational-eubo``:
  prefbo's :class:`~prefbo.loop.PreferentialOptimizer` with each inference
  method;
- ``laplace-qeubo``, ``laplace-bald``, ``laplace-mes``, ``laplace-ts``,
  ``laplace-random``: the other questioning strategies.

Every configuration starts with ``initial_random`` uniformly random questions,
refits hyperparameters every ``--refit-every`` answers (the model is always
conditioned on all answers) and sees the same person seed. After every answer
the *recommendation* is the design with the highest posterior mean among the
designs seen; its simple regret is ``optimal_value - u(recommendation)``.

Noise: ``σ = 0.05 · spread`` ("low") and ``σ = 0.3 · spread`` ("human"), with
``spread`` the standard deviation of the utility over the box (1024 Sobol
points; ≈ 1 for the standardised problems).

Outputs ``<output>/pbo_regret.md`` (final regret mean ± s.e.; fraction of seeds
where a prefbo configuration's final regret is at most BoTorch's; ratio of
wall time per answer to BoTorch's) and ``<output>/pbo_regret.png`` (median
regret and inter-quartile range against the number of answers).

Run ``python benchmarks/pbo_regret.py`` (``--quick`` for a ≤ 1 minute check;
``--help`` for options).
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.exceptions.errors import ModelFittingError
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models.pairwise_gp import (
    PairwiseGP,
    PairwiseLaplaceMarginalLogLikelihood,
)
from botorch.optim import optimize_acqf
from linear_operator.utils.warnings import NumericalWarning as LONumericalWarning
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.loop.optimizer import PreferentialOptimizer, expected_fit_warnings
from prefbo.test_functions import (
    Ackley5,
    Branin,
    Hartmann3,
    Hartmann6,
    Hartmann6in20,
    SimulatedPerson,
    ThermalComfort,
    UtilityProblem,
)

PROBLEMS = {
    p.__name__: p
    for p in (Branin, Hartmann3, Hartmann6, Hartmann6in20, Ackley5, ThermalComfort)
}
DEFAULT_PROBLEMS = ("Branin", "Hartmann3", "Hartmann6", "Ackley5")
REFERENCE = "botorch-eubo"
CONFIGS = (
    REFERENCE,
    "laplace-eubo",
    "ep-eubo",
    "skew-eubo",
    "variational-eubo",
    "laplace-qeubo",
    "laplace-bald",
    "laplace-mes",
    "laplace-ts",
    "laplace-random",
)
NOISES = {"low": 0.05, "human": 0.3}
SKEW_OPTIONS = {"num_samples": 128, "num_chains": 4}


@contextmanager
def _botorch_warnings() -> Iterator[None]:
    r"""The warnings the BoTorch reference loop triggers by design, and only those.

    linear_operator's jitter on near-singular kernel matrices once questions
    concentrate, and L-BFGS-B stopping on its iteration or line-search limits
    (hyperparameters or acquisition); the point reached is used, as BoTorch
    itself does.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*not p\.d\., added jitter", category=LONumericalWarning
        )
        warnings.filterwarnings("ignore", category=OptimizationWarning)
        yield


def utility_spread(problem: UtilityProblem, n: int = 1024) -> float:
    r"""Standard deviation of the utility over the box (``n`` Sobol points)."""
    lo, hi = problem.bounds
    X = SobolEngine(problem.dim, scramble=True, seed=0).draw(n).to(lo)  # n x d
    return float(problem(lo + (hi - lo) * X).std())


def _uniform(bounds: Tensor, k: int, gen: torch.Generator) -> Tensor:
    r"""``k x d`` uniformly random designs in the ``2 x d`` box."""
    u = torch.rand(k, bounds.shape[-1], generator=gen, dtype=torch.float64)
    return bounds[0] + (bounds[1] - bounds[0]) * u


def run_botorch(
    problem: UtilityProblem,
    person: SimulatedPerson,
    args: argparse.Namespace,
    seed: int,
) -> list[float]:
    r"""The reference loop (BoTorch only); returns the regret after each answer."""
    bounds = problem.bounds
    gen = torch.Generator().manual_seed(seed)
    designs = torch.empty(0, problem.dim, dtype=torch.float64)  # n x d
    comps = torch.empty(0, 2, dtype=torch.long)  # m x 2
    covar, model, regret = None, None, []
    for k in range(args.answers):
        if k < args.initial_random:
            pair = _uniform(bounds, 2, gen)  # 2 x d
        else:
            acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
            with _botorch_warnings():
                pair, _ = optimize_acqf(
                    acqf,
                    bounds=bounds,
                    q=2,
                    num_restarts=args.num_restarts,
                    raw_samples=args.raw_samples,
                    options={"seed": seed * 1000 + k, "maxiter": args.maxiter},
                )
            pair = pair.detach()
        winner = person.compare(pair[0], pair[1])
        n = designs.shape[0]
        designs = torch.cat([designs, pair])
        comps = torch.cat([comps, torch.tensor([[n + winner, n + 1 - winner]])])
        with _botorch_warnings():
            if (k + 1) % args.refit_every == 0 or covar is None:
                model = PairwiseGP(designs, comps)
                mll = PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model)
                try:
                    fit_gpytorch_mll(mll)
                except ModelFittingError:  # keep the default hyperparameters
                    pass
                covar = copy.deepcopy(model.covar_module)
            else:
                model = PairwiseGP(designs, comps, covar_module=copy.deepcopy(covar))
            model.eval()
            with torch.no_grad():
                mean = model.posterior(designs).mean.reshape(-1)  # n
        best = problem(designs[mean.argmax()]).item()
        regret.append(max(problem.optimal_value - best, 0.0))
    return regret


def run_prefbo(
    config: str,
    problem: UtilityProblem,
    person: SimulatedPerson,
    args: argparse.Namespace,
    seed: int,
) -> list[float]:
    r"""A :class:`PreferentialOptimizer` run; the regret after each answer."""
    model, strategy = config.split("-")
    opt = PreferentialOptimizer(
        problem.bounds,
        model=model,
        strategy=strategy,
        seed=seed,
        refit_every=args.refit_every,
        initial_random=args.initial_random,
        acqf_options={
            "optimizer": args.eubo_optimizer,
            "num_restarts": args.num_restarts,
            "raw_samples": args.raw_samples,
            "maxiter": args.maxiter,
            "mc_samples": args.mc_samples,
        },
        model_options=SKEW_OPTIONS if model == "skew" else None,
    )
    regret = []
    for _ in range(args.answers):
        X = opt.ask()  # 2 x d
        opt.tell(person.compare(X[0], X[1]))
        x, _, _ = opt.best()
        regret.append(max(problem.optimal_value - problem(x).item(), 0.0))
    return regret


def run(args: argparse.Namespace) -> dict:
    r"""All runs: ``{(problem, noise, config): (regret seeds x answers, s/answer)}``."""
    results = {}
    for pname in args.problems:
        problem = PROBLEMS[pname]()
        spread = utility_spread(problem)
        for noise in args.noises:
            sigma = NOISES[noise] * spread
            curves = {config: [] for config in args.configs}
            seconds = dict.fromkeys(args.configs, 0.0)
            # seeds outermost, configurations interleaved: a slow spell of a
            # shared machine then lands on every configuration, not on one
            # (each run is seeded on its own, so the order changes no result)
            for seed in range(args.seeds):
                for config in args.configs:
                    person = SimulatedPerson(problem, noise_std=sigma, seed=seed)
                    t0 = time.perf_counter()
                    with torch.random.fork_rng(devices=[]):
                        torch.manual_seed(seed)
                        if config == REFERENCE:
                            curve = run_botorch(problem, person, args, seed)
                        else:
                            with expected_fit_warnings(), _botorch_warnings():
                                curve = run_prefbo(config, problem, person, args, seed)
                    seconds[config] += time.perf_counter() - t0
                    curves[config].append(curve)
            for config in args.configs:
                R = torch.tensor(curves[config], dtype=torch.float64)  # seeds x answers
                per_answer = seconds[config] / (args.seeds * args.answers)
                results[pname, noise, config] = (R, per_answer)
                print(
                    f"{pname:>13s} {noise:>5s} σ={sigma:.3f} {config:>14s}: final "
                    f"regret median {R[:, -1].median().item():.4f}, "
                    f"{per_answer:.3f} s/answer",
                    flush=True,
                )
    return results


def paired_test(diff: Tensor, draws: int = 2**16) -> tuple[float, float]:
    r"""One-sided sign-flip permutation p-values for a paired mean difference.

    Under the null, each seed's difference ``d_s`` (prefbo - reference, same
    seed and person) is as likely to have either sign. Exact (all ``2^S`` sign
    patterns) for ``S ≤ 16`` seeds, else ``draws`` seeded random patterns.

    Args:
        diff: ``S`` paired differences.
        draws: Number of random sign patterns when ``S > 16``.

    Returns:
        ``(p_worse, p_better)``: the probabilities under the null of a mean
        difference at least as large (resp. as small) as the observed one.
    """
    d = diff.to(torch.float64).flatten()
    S = d.numel()
    if S > 16:
        gen = torch.Generator().manual_seed(0)
        signs = torch.randint(0, 2, (draws, S), generator=gen).to(d) * 2 - 1
    else:
        codes = torch.arange(2**S).unsqueeze(-1)  # 2^S x 1
        bits = (codes >> torch.arange(S)) & 1  # 2^S x S
        signs = bits.to(d) * 2 - 1
    means = (signs * d.abs()).mean(-1)
    obs = d.mean()
    tol = 1e-12 * (1.0 + d.abs().max())
    p_worse = (means >= obs - tol).double().mean().item()
    p_better = (means <= obs + tol).double().mean().item()
    return p_worse, p_better


def table(results: dict, args: argparse.Namespace) -> str:
    r"""The markdown report."""
    lines = [
        "# Preferential BO: simple regret, prefbo vs BoTorch",
        "",
        f"Command: `python benchmarks/pbo_regret.py {' '.join(args.argv)}`".rstrip()
        + f" — {args.seeds} seeds (0..{args.seeds - 1}), {args.answers} answers, "
        f"{args.initial_random} random first, hyperparameters refitted every "
        f"{args.refit_every} answers, optimize_acqf(num_restarts="
        f"{args.num_restarts}, raw_samples={args.raw_samples}, maxiter="
        f"{args.maxiter}), prefbo's EUBO maximiser {args.eubo_optimizer!r}, "
        "single-threaded.",
        "",
        "Final regret: mean ± standard error over seeds. *≥ BoTorch*: fraction "
        "of seeds whose final regret is at most the BoTorch reference's "
        "(same seed, same person). *time ratio*: wall time per answer over "
        "the reference's. *Δ final (paired)*: mean ± s.e. over seeds of "
        "(final regret - the reference's on the same seed); *p worse* / "
        "*p better*: one-sided sign-flip permutation p-values of that mean "
        "(exact over all sign patterns). A configuration is called worse "
        "(better) on a cell when p worse (p better) < 0.05.",
        "",
    ]
    verdicts: dict[str, list[tuple[str, float, float, float]]] = {}
    for pname in args.problems:
        for noise in args.noises:
            lines += [
                f"## {pname}, noise {noise} (σ = {NOISES[noise]} · spread)",
                "",
                "| configuration | final regret | ≥ BoTorch | s/answer | time ratio "
                "| Δ final (paired) | p worse | p better |",
                "|---|---|---|---|---|---|---|---|",
            ]
            ref = results.get((pname, noise, REFERENCE))
            for config in args.configs:
                R, sec = results[pname, noise, config]
                final = R[:, -1]
                se = final.std().item() / math.sqrt(len(final)) if len(final) > 1 else 0
                if ref is None or config == REFERENCE:
                    frac = ratio = delta = p_w = p_b = "—"
                else:
                    frac = f"{(final <= ref[0][:, -1] + 1e-9).double().mean():.2f}"
                    ratio = f"{sec / ref[1]:.2f}"
                    d = final - ref[0][:, -1]
                    d_se = d.std().item() / math.sqrt(len(d)) if len(d) > 1 else 0
                    delta = f"{d.mean():+.4f} ± {d_se:.4f}"
                    pw, pb = paired_test(d)
                    verdicts.setdefault(config, []).append(
                        (f"{pname}/{noise}", pw, pb, d.mean().item())
                    )
                    p_w, p_b = f"{pw:.3f}", f"{pb:.3f}"
                lines.append(
                    f"| {config} | {final.mean():.4f} ± {se:.4f} | {frac} | "
                    f"{sec:.3f} | {ratio} | {delta} | {p_w} | {p_b} |"
                )
            lines.append("")
    if verdicts:
        lines += [
            "## Paired verdicts (p < 0.05, one-sided)",
            "",
            "| configuration | worse than BoTorch on | better than BoTorch on "
            "| lower mean on |",
            "|---|---|---|---|",
        ]
        for config, cells in verdicts.items():
            worse = [c for c, pw, _, _ in cells if pw < 0.05]
            better = [c for c, _, pb, _ in cells if pb < 0.05]
            lower = [c for c, _, _, mean in cells if mean < 0]
            lines.append(
                f"| {config} | {', '.join(worse) or 'none'} | "
                f"{', '.join(better) or 'none'} | {len(lower)} of {len(cells)} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot(results: dict, args: argparse.Namespace, path: Path) -> None:
    r"""Median regret and IQR vs answers: rows problems, columns noise levels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols = len(args.problems), len(args.noises)
    fig, axes = plt.subplots(
        rows, cols, figsize=(5.5 * cols, 3.6 * rows), squeeze=False
    )
    x = torch.arange(1, args.answers + 1).numpy()
    for i, pname in enumerate(args.problems):
        for j, noise in enumerate(args.noises):
            ax = axes[i][j]
            for config in args.configs:
                R = results[pname, noise, config][0]
                q = torch.quantile(R, torch.tensor([0.25, 0.5, 0.75]).double(), dim=0)
                style = "k-" if config == REFERENCE else "-"
                ax.plot(x, q[1].numpy(), style, lw=1.5, label=config)
                ax.fill_between(x, q[0].numpy(), q[2].numpy(), alpha=0.12)
            ax.set(
                title=f"{pname}, {noise} noise",
                xlabel="answers",
                ylabel="simple regret",
            )
            ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    r"""Parse the command line."""
    argv = list(argv) if argv is not None else None
    p = argparse.ArgumentParser(
        prog="python benchmarks/pbo_regret.py", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--problems", nargs="+", default=list(DEFAULT_PROBLEMS), choices=list(PROBLEMS)
    )
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS)
    p.add_argument("--noises", nargs="+", default=list(NOISES), choices=list(NOISES))
    p.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1")
    p.add_argument("--answers", type=int, default=20)
    p.add_argument("--initial-random", type=int, default=2)
    p.add_argument("--refit-every", type=int, default=4)
    p.add_argument("--num-restarts", type=int, default=2)
    p.add_argument("--raw-samples", type=int, default=64)
    p.add_argument("--maxiter", type=int, default=50)
    p.add_argument("--mc-samples", type=int, default=64)
    p.add_argument(
        "--eubo-optimizer",
        choices=["scipy", "torch"],
        default="scipy",
        help="prefbo loops' EUBO maximiser: optimize_acqf (the loop's default) "
        "or prefbo.acquisition.maximize_eubo",
    )
    p.add_argument("--output", type=Path, default=Path(__file__).parent / "results")
    p.add_argument(
        "--quick",
        action="store_true",
        help="Branin, 2 seeds, 6 answers (about a minute)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.problems, args.seeds, args.answers = ["Branin"], 2, 6
        args.refit_every, args.raw_samples, args.maxiter = 3, 32, 30
    if args.seeds < 1 or args.answers < 1 or args.refit_every < 1:
        p.error("--seeds, --answers and --refit-every must be >= 1")
    args.argv = sys.argv[1:] if argv is None else argv
    return args


def main(argv: Sequence[str] | None = None) -> str:
    r"""Run the benchmark; returns the markdown report (also written to disk)."""
    args = parse_args(argv)
    t0 = time.perf_counter()
    results = run(args)
    text = table(results, args)
    text += f"\nTotal wall time: {time.perf_counter() - t0:.0f} s.\n"
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "pbo_regret.md").write_text(text)
    plot(results, args, args.output / "pbo_regret.png")
    print(text)
    return text


if __name__ == "__main__":
    main()
