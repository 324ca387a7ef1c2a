r"""High-throughput BO with sparse GPs: which inducing points help the search?

Reproduces, at laptop scale, the experiment of Moss, Ober & Picheny (2022),
"Information-theoretic inducing point placement for high-throughput Bayesian
optimisation": batches of ``B = 100`` Thompson samples per round from an SVGP
whose inducing points are chosen by an allocator, and the simple regret after
each round.

Regression problems (maximise the negated function, noise-free evaluations):
BoTorch ``Hartmann(dim=6)`` and ``Ackley(dim=5)``, both rescaled to the unit
cube. Per round:

1. standardise ``Y``; choose ``M`` inducing points among the training inputs
   with the allocator, the previous round's trained kernel and (ENT-DPP,
   ``GreedyImprovementReduction``) the previous round's model;
2. build a BoTorch ``SingleTaskVariationalGP`` with those fixed points
   (``learn_inducing_points=False``), kernel ``ScaleKernel(Matern-5/2, ARD)``
   warm-started from the previous round, and train kernel, likelihood and
   variational parameters with a fixed number of Adam steps on the
   ``VariationalELBO``;
3. ``thompson_batch``: ``B`` Matheron sample paths maximised at once; evaluate
   the ``B`` maximisers.

Before the first round every seed fits one warm-up SVGP (CVR points, default
kernel, twice the Adam steps) on the initial design; it is the "previous
model" of round 0 for every allocator, so all allocators start from the same
state. Seeds fix the initial design and torch's RNG at every round, the same
for all allocators. Allocators: prefbo ``ConditionalVarianceReduction`` (CVR),
``EntropyDPP`` (ENT-DPP, ``α = 0.5``), ``RandomSubset``, ``KMeans``, and
BoTorch's ``GreedyVarianceReduction`` (the same greedy as CVR: it should match
it up to ties) and ``GreedyImprovementReduction``. "Allocator seconds" is the
wall-clock of ``allocate_inducing_points`` per round (ENT-DPP and
``GreedyImprovementReduction`` include their calls to the previous model).

Preference problem (allocators do not apply): the standardised Branin utility
on ``[0, 1]²`` answered by a ``SimulatedPerson`` (probit noise ``σ = 0.1``).
A ``PairwiseLaplaceGP`` is refitted (``fit_gpytorch_mll``) every round; each
round asks ``B`` questions, either ``thompson_pairs`` (a Thompson maximiser
against the current best design) or uniformly random pairs. Its regret is
``u* - u(x̂)`` at the recommendation ``x̂``, the design with the highest
posterior mean (the person never reveals utilities).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/inducing_bo.py           # ~10 minutes
    OMP_NUM_THREADS=1 python benchmarks/inducing_bo.py --quick   # ~1 minute
    OMP_NUM_THREADS=1 python benchmarks/inducing_bo.py --seeds 10 --rounds 6

The markdown report is printed and written to
``benchmarks/results/inducing_bo.md`` (``--output``), the plot to
``benchmarks/results/inducing_bo.png`` (``--plot``); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import torch
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskVariationalGP
from botorch.models.utils.inducing_point_allocators import (
    GreedyImprovementReduction,
    GreedyVarianceReduction,
)
from botorch.test_functions import Ackley, Hartmann
from gpytorch.kernels import MaternKernel, ScaleKernel
from gpytorch.mlls import VariationalELBO
from torch import Tensor

from prefbo.acquisition.thompson import thompson_batch, thompson_pairs
from prefbo.exceptions import NumericalWarning
from prefbo.inducing import (
    ConditionalVarianceReduction,
    EntropyDPP,
    KMeans,
    RandomSubset,
)
from prefbo.mlls import PairwiseLaplaceMLL
from prefbo.models import PairwiseLaplaceGP
from prefbo.test_functions import Branin, SimulatedPerson

TKW = {"dtype": torch.float64}
RESULTS = Path(__file__).resolve().parent / "results"
ALLOCATORS = {
    "cvr": "CVR (prefbo)",
    "ent_dpp": "ENT-DPP α=0.5 (prefbo)",
    "random": "random subset",
    "kmeans": "k-means",
    "botorch_gvr": "GreedyVarianceReduction (BoTorch)",
    "botorch_gir": "GreedyImprovementReduction (BoTorch)",
}
PREFERENCE_METHODS = {"thompson": "Thompson pairs", "random": "random pairs"}


def make_problem(name: str):
    r"""A BoTorch test function to maximise (negated) and its optimum.

    Args:
        name: ``"hartmann6"`` or ``"ackley5"``.

    Returns:
        ``(f, optimum)``: ``f`` maps ``n x d`` points of the unit cube to ``n``
        values of the negated function (rescaled from its own box), and
        ``optimum`` is the maximum of ``f``.
    """
    fn = {"hartmann6": Hartmann(dim=6), "ackley5": Ackley(dim=5)}[name]
    fn = fn.to(**TKW)
    lo, hi = fn.bounds[0], fn.bounds[1]

    def f(U: Tensor) -> Tensor:
        return -fn.evaluate_true(lo + (hi - lo) * U)

    return f, -float(fn.optimal_value)


def make_allocator(name: str, prev_model, seed: int):
    r"""An ``InducingPointAllocator`` by name (``prev_model``: previous round's)."""
    if name == "cvr":
        return ConditionalVarianceReduction()
    if name == "ent_dpp":
        return EntropyDPP(prev_model, alpha=0.5)
    if name == "random":
        return RandomSubset(seed=seed)
    if name == "kmeans":
        return KMeans(seed=seed)
    if name == "botorch_gvr":
        return GreedyVarianceReduction()
    if name == "botorch_gir":
        return GreedyImprovementReduction(prev_model, maximize=True)
    raise ValueError(f"unknown allocator {name!r}; expected one of {list(ALLOCATORS)}.")


def fit_svgp(
    X: Tensor, Y: Tensor, Z: Tensor, covar_module, steps: int, lr: float
) -> SingleTaskVariationalGP:
    r"""Train an SVGP with fixed inducing points by Adam on the ELBO.

    Args:
        X: ``n x d`` training inputs.
        Y: ``n x 1`` standardised training targets.
        Z: ``M x d`` inducing points (kept fixed).
        covar_module: The kernel (trained in place; pass a copy).
        steps: Number of full-batch Adam steps.
        lr: Adam learning rate.

    Returns:
        The trained model in eval mode, its parameters frozen (so that sample
        paths drawn from it carry no autograd graph to them).
    """
    model = SingleTaskVariationalGP(
        X, Y, inducing_points=Z, covar_module=covar_module, learn_inducing_points=False
    )
    mll = VariationalELBO(model.likelihood, model.model, num_data=X.shape[-2])
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = -mll(model.model(X), Y.squeeze(-1))
        loss.backward()
        optimizer.step()
    model.eval()
    return model.requires_grad_(False)


def _standardise(Y: Tensor) -> Tensor:
    return (Y - Y.mean()) / Y.std().clamp_min(1e-9)


def _new_kernel(d: int) -> ScaleKernel:
    return ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=d)).to(**TKW)


def _thompson_kwargs(args: argparse.Namespace, seed: int) -> dict:
    return {
        "raw_samples": args.raw_samples,
        "num_restarts": args.num_restarts,
        "num_steps": args.ts_steps,
        "seed": seed,
    }


def run_regression(
    problem: str, allocator: str, m: int, seed: int, args: argparse.Namespace
) -> dict:
    r"""One BO run; returns the regret after each round and allocator seconds.

    Args:
        problem: ``"hartmann6"`` or ``"ackley5"``.
        allocator: A key of :data:`ALLOCATORS`.
        m: Number of inducing points.
        seed: Seed of the initial design and of every round's randomness.
        args: Parsed command-line options.

    Returns:
        ``{"regret": [rounds + 1 floats], "alloc_s": [rounds floats]}``.
    """
    f, optimum = make_problem(problem)
    d = {"hartmann6": 6, "ackley5": 5}[problem]
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(args.num_init, d, generator=g, **TKW)
    Y = f(X).unsqueeze(-1)
    bounds = torch.stack([torch.zeros(d, **TKW), torch.ones(d, **TKW)])
    # warm-up model: identical for every allocator of this (problem, M, seed)
    torch.manual_seed(seed)
    kernel = _new_kernel(d)
    Z = ConditionalVarianceReduction().allocate_inducing_points(
        X, kernel, m, torch.Size()
    )
    model = fit_svgp(X, _standardise(Y), Z, kernel, 2 * args.adam_steps, args.lr)
    regret, alloc_s = [optimum - float(Y.max())], []
    for r in range(args.rounds):
        torch.manual_seed(10_000 * seed + r)
        Ys = _standardise(Y)
        kernel = copy.deepcopy(model.model.covar_module).requires_grad_(True)
        alloc = make_allocator(allocator, model, seed=10_000 * seed + r)
        t0 = time.perf_counter()
        with torch.no_grad():
            Z = alloc.allocate_inducing_points(X, kernel, m, torch.Size())
        alloc_s.append(time.perf_counter() - t0)
        model = fit_svgp(X, Ys, Z, kernel, args.adam_steps, args.lr)
        X_new = thompson_batch(
            model, bounds, args.batch_size, **_thompson_kwargs(args, seed)
        )
        X = torch.cat([X, X_new])
        Y = torch.cat([Y, f(X_new).unsqueeze(-1)])
        regret.append(optimum - float(Y.max()))
    return {"regret": regret, "alloc_s": alloc_s}


def _fit_preference(X: Tensor, comparisons: Tensor) -> PairwiseLaplaceGP:
    model = PairwiseLaplaceGP(X, comparisons)
    with warnings.catch_warnings():
        # L-BFGS stopping on its iteration limit is expected and harmless here
        warnings.simplefilter("ignore", OptimizationWarning)
        fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    model.eval()
    return model.requires_grad_(False)


def _recommendation_regret(model: PairwiseLaplaceGP, problem: Branin) -> float:
    with torch.no_grad():
        designs = model.datapoints
        mean = model.posterior(designs.unsqueeze(-2)).mean.reshape(-1)
    return problem.optimal_value - float(problem(designs[mean.argmax()]))


def run_preference(method: str, seed: int, args: argparse.Namespace) -> dict:
    r"""One preference-BO run on Branin with a simulated person (see below)."""
    with warnings.catch_warnings():
        # Thompson maximisers cluster near the best design, so the prior
        # covariance of the designs needs jitter; expected and harmless here
        warnings.filterwarnings(
            "ignore",
            message=r".*not numerically positive definite",
            category=NumericalWarning,
        )
        return _run_preference(method, seed, args)


def _run_preference(method: str, seed: int, args: argparse.Namespace) -> dict:
    r"""One preference-BO run on Branin with a simulated person.

    Args:
        method: ``"thompson"`` or ``"random"``.
        seed: Seed of the initial design, the person and every round.
        args: Parsed command-line options.

    Returns:
        ``{"regret": [rounds + 1 floats]}``, the recommendation's regret.
    """
    problem = Branin()
    person = SimulatedPerson(problem, noise_std=0.1, seed=seed)
    g = torch.Generator().manual_seed(seed)
    n0 = args.pref_init
    X = torch.rand(n0, 2, **TKW, generator=g)
    pairs = torch.stack([torch.arange(n0), torch.randperm(n0, generator=g)], -1)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]  # q x 2 indices

    def answer(X: Tensor, idx: Tensor) -> Tensor:
        first_loses = person.compare_batch(X[idx]).bool()  # q
        return torch.where(first_loses.unsqueeze(-1), idx.flip(-1), idx)  # winner first

    comparisons = answer(X, pairs)
    model = _fit_preference(X, comparisons)
    regret = [_recommendation_regret(model, problem)]
    bounds = problem.bounds.to(**TKW)
    for r in range(args.rounds):
        torch.manual_seed(10_000 * seed + r)
        n, b = X.shape[0], args.batch_size
        if method == "thompson":
            questions = thompson_pairs(model, bounds, b, **_thompson_kwargs(args, seed))
            # the second option is the current best design, a training design
            best = int((X == questions[0, 1]).all(-1).nonzero()[0, 0])
            X = torch.cat([X, questions[:, 0]])
            idx = torch.stack([torch.arange(n, n + b), torch.full((b,), best)], -1)
        else:
            X = torch.cat([X, torch.rand(2 * b, 2, **TKW, generator=g)])
            idx = torch.arange(n, n + 2 * b).reshape(b, 2)
        comparisons = torch.cat([comparisons, answer(X, idx)])
        model = _fit_preference(X, comparisons)
        regret.append(_recommendation_regret(model, problem))
    return {"regret": regret}


def _mean_se(values: list[float]) -> tuple[float, float]:
    t = torch.tensor(values, **TKW)
    se = float(t.std() / math.sqrt(len(values))) if len(values) > 1 else float("nan")
    return float(t.mean()), se


def _fmt(mean: float, se: float) -> str:
    return f"{mean:.3g} ± {se:.2g}" if math.isfinite(se) else f"{mean:.3g}"


def summarise(results: dict, args: argparse.Namespace) -> tuple[list[str], list[str]]:
    r"""The markdown table rows and the ENT-DPP vs CVR summary lines."""
    rows = [
        "| problem | M | method | final regret (mean ± s.e.) | median | "
        "allocator s / round |",
        "|---|---|---|---|---|---|",
    ]
    lines = []
    for (problem, m), per_alloc in results["regression"].items():
        for name, runs in per_alloc.items():
            final = [run["regret"][-1] for run in runs]
            secs = [s for run in runs for s in run["alloc_s"]]
            mean, se = _mean_se(final)
            med = float(torch.tensor(final).median())
            rows.append(
                f"| {problem} | {m} | {ALLOCATORS[name]} | {_fmt(mean, se)} | "
                f"{med:.3g} | {sum(secs) / max(len(secs), 1):.3f} |"
            )
        if "ent_dpp" in per_alloc and "cvr" in per_alloc:
            ent = [run["regret"][-1] for run in per_alloc["ent_dpp"]]
            cvr = [run["regret"][-1] for run in per_alloc["cvr"]]
            diff = [e - c for e, c in zip(ent, cvr, strict=True)]
            dm, dse = _mean_se(diff)
            wins = sum(e < c for e, c in zip(ent, cvr, strict=True))
            ties = sum(e == c for e, c in zip(ent, cvr, strict=True))
            if math.isfinite(dse) and abs(dm) > 2 * dse:
                verdict = "ENT-DPP better" if dm < 0 else "CVR better"
            else:
                verdict = "no significant difference (|mean| ≤ 2 s.e.)"
            lines.append(
                f"- {problem}, M = {m}: ENT-DPP {_fmt(*_mean_se(ent))} vs CVR "
                f"{_fmt(*_mean_se(cvr))}; paired difference ENT-DPP − CVR "
                f"{_fmt(dm, dse)}, ENT-DPP lower on {wins}/{len(diff)} seeds"
                f"{f' ({ties} ties)' if ties else ''}: {verdict}."
            )
    for name, runs in results["preference"].items():
        final = [run["regret"][-1] for run in runs]
        mean, se = _mean_se(final)
        med = float(torch.tensor(final).median())
        rows.append(
            f"| branin (preference) | – | {PREFERENCE_METHODS[name]} | "
            f"{_fmt(mean, se)} | {med:.3g} | – |"
        )
    pref = results["preference"]
    if "thompson" in pref and "random" in pref:
        ts = [run["regret"][-1] for run in pref["thompson"]]
        rnd = [run["regret"][-1] for run in pref["random"]]
        dm, dse = _mean_se([a - b for a, b in zip(ts, rnd, strict=True)])
        wins = sum(a < b for a, b in zip(ts, rnd, strict=True))
        lines.append(
            f"- branin preference: Thompson pairs {_fmt(*_mean_se(ts))} vs random "
            f"pairs {_fmt(*_mean_se(rnd))}; paired difference {_fmt(dm, dse)}, "
            f"Thompson lower on {wins}/{len(ts)} seeds."
        )
    return rows, lines


def plot(results: dict, args: argparse.Namespace, path: Path) -> None:
    r"""Regret curves: median and interquartile band, one panel per problem × M."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(f"{p}, M = {m}", runs) for (p, m), runs in results["regression"].items()]
    if results["preference"]:
        names = {k: PREFERENCE_METHODS[k] for k in results["preference"]}
        panels.append(("branin preference (no allocator)", results["preference"]))
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4.6 * ncols, 3.6 * nrows), squeeze=False
    )
    for ax, (title, per_method) in zip(axes.flat, panels, strict=False):
        for name, runs in per_method.items():
            curves = torch.tensor([run["regret"] for run in runs], **TKW)
            curves = curves.clamp_min(1e-6)  # log axis
            q = torch.quantile(curves, torch.tensor([0.25, 0.5, 0.75], **TKW), dim=0)
            x = [args.num_init + r * args.batch_size for r in range(curves.shape[1])]
            if "preference" in title:
                label = names[name]
                x = list(range(curves.shape[1]))
            else:
                label = ALLOCATORS[name]
            (line,) = ax.plot(x, q[1], label=label)
            ax.fill_between(x, q[0], q[2], color=line.get_color(), alpha=0.15)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("round" if "preference" in title else "evaluations")
        ax.set_ylabel("simple regret")
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(
        f"Thompson batches of {args.batch_size}; median and IQR over "
        f"{args.seeds} seeds",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> str:
    r"""Run the benchmark; write and return the markdown report."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="~1-minute run (overrides sizes)"
    )
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 … N-1")
    parser.add_argument("--rounds", type=int, default=4, help="BO rounds")
    parser.add_argument("--batch-size", type=int, default=100, help="designs/round")
    parser.add_argument("--num-init", type=int, default=512, help="initial design")
    parser.add_argument(
        "--inducing", default="50,200", help="comma-separated numbers of points M"
    )
    parser.add_argument(
        "--problems", default="hartmann6,ackley5", help="regression problems"
    )
    parser.add_argument(
        "--allocators", default=",".join(ALLOCATORS), help="allocators to compare"
    )
    parser.add_argument("--adam-steps", type=int, default=50, help="Adam steps")
    parser.add_argument("--lr", type=float, default=0.05, help="Adam learning rate")
    parser.add_argument(
        "--raw-samples", type=int, default=256, help="Sobol points per sample path"
    )
    parser.add_argument(
        "--num-restarts", type=int, default=4, help="refined starts per path"
    )
    parser.add_argument(
        "--ts-steps", type=int, default=30, help="Adam steps per path maximisation"
    )
    parser.add_argument(
        "--pref-init", type=int, default=32, help="initial designs (preference)"
    )
    parser.add_argument(
        "--no-preference", action="store_true", help="skip the preference problem"
    )
    parser.add_argument(
        "--output", type=Path, default=RESULTS / "inducing_bo.md", help="report"
    )
    parser.add_argument(
        "--plot", type=Path, default=RESULTS / "inducing_bo.png", help="PNG plot"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.rounds, args.num_init = min(args.seeds, 2), 2, 256
        args.inducing, args.adam_steps, args.batch_size = "50", 30, 50
    sizes = [int(s) for s in args.inducing.split(",")]
    problems = args.problems.split(",") if args.problems else []
    allocators = args.allocators.split(",")
    start, load = time.perf_counter(), [os.getloadavg()[0]]
    results: dict = {"regression": {}, "preference": {}}
    for problem in problems:
        for m in sizes:
            cell = results["regression"].setdefault((problem, m), {})
            for name in allocators:
                t0 = time.perf_counter()
                cell[name] = [
                    run_regression(problem, name, m, seed, args)
                    for seed in range(args.seeds)
                ]
                _progress(
                    f"{problem} M={m} {name}: {time.perf_counter() - t0:.1f}s, final "
                    f"regret {[round(r['regret'][-1], 3) for r in cell[name]]}"
                )
    if not args.no_preference:
        for method in PREFERENCE_METHODS:
            t0 = time.perf_counter()
            results["preference"][method] = [
                run_preference(method, seed, args) for seed in range(args.seeds)
            ]
            _progress(f"branin preference {method}: {time.perf_counter() - t0:.1f}s")
    elapsed = time.perf_counter() - start
    load.append(os.getloadavg()[0])
    rows, lines = summarise(results, args)
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    plot(results, args, args.plot)
    text = "\n".join(
        [
            "# High-throughput BO: inducing-point allocators (SVGP + Thompson)",
            "",
            "Command: `OMP_NUM_THREADS=1 python benchmarks/inducing_bo.py"
            + "".join(f" {a}" for a in (sys.argv[1:] if argv is None else argv))
            + "`",
            "",
            f"Set-up: {args.seeds} seeds (0 … {args.seeds - 1}, the same for every "
            f"allocator), {args.num_init} initial points, {args.rounds} rounds of "
            f"{args.batch_size} Thompson samples, M ∈ {{{args.inducing}}}, "
            f"{args.adam_steps} Adam steps (lr {args.lr}) per round; Thompson: "
            f"{args.raw_samples} Sobol points, {args.num_restarts} restarts, "
            f"{args.ts_steps} steps per path. Preference: Branin, "
            f"{args.pref_init} initial designs, {args.rounds} rounds of "
            f"{args.batch_size} questions. Simple regret after the last round "
            "(regression: best evaluated value; preference: recommendation).",
            "",
            *rows,
            "",
            "ENT-DPP vs CVR (paired over seeds):",
            "",
            *lines,
            "",
            f"![regret curves]({args.plot.name})",
            "",
            f"Run time {elapsed:.0f} s, single-threaded torch "
            f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}), "
            f"{platform.processor() or platform.machine()}, torch {torch.__version__}; "
            f"load average {load[0]:.2f} before, {load[1]:.2f} after "
            "(shared machine: times may be inflated).",
            "",
        ]
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
