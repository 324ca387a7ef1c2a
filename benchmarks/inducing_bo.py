r"""High-throughput BO with sparse GPs: does ENT-DPP's quality term help?

Reproduces, at laptop scale, the setting of Moss, Ober & Picheny (2022),
"Information-theoretic inducing point placement for high-throughput Bayesian
optimisation": batches of ``B = 100`` Thompson samples per round from an SVGP
whose inducing points are chosen by an allocator; simple regret after each
round. It tests the paper's mechanism too: is the SVGP more accurate near the
optimum with ENT-DPP's points?

Problems (maximise the negated function, noise-free evaluations, rescaled to
the unit cube): BoTorch ``Hartmann(dim=6)`` and ``Ackley(dim=5)``. Per round:

1. standardise ``Y``; choose ``M`` inducing points among the training inputs
   with the method, the previous round's trained kernel and (ENT-DPP,
   anchored CVR, ``GreedyImprovementReduction``) the previous round's model;
2. train a BoTorch ``SingleTaskVariationalGP`` with those fixed points
   (``ScaleKernel(Matern-5/2, ARD)`` warm-started from the previous round) by
   a fixed number of Adam steps on the ``VariationalELBO``;
3. ``thompson_batch``: ``B`` Matheron sample paths maximised at once; evaluate
   the ``B`` maximisers.

Before round 0 every seed fits one warm-up SVGP (CVR points, twice the Adam
steps) on the initial design, the "previous model" of round 0 for every
method. torch's RNG is reseeded with the same value before the allocation and
again before training and Thompson sampling, so methods that draw random
numbers in their allocation (ENT-DPP) do not shift the others' streams: two
methods that choose the same points in the same order produce the same run.
The same set in another order does not: the SVGP's whitened parametrisation
(``u = L v``, ``L`` the Cholesky factor of ``K_ZZ`` in the order of ``Z``)
and the fixed number of Adam steps make the fit depend on the order.

Methods (:data:`METHODS`): ``cvr`` (``greedy_dpp_map`` without a quality: the
greedy that prefbo's ``ConditionalVarianceReduction`` runs, the same indices),
``cvr_anchored`` (:class:`AnchoredCVR`: CVR whose first point is the input of
highest posterior mean, ENT-DPP's first pick when prior variances tie),
``ent_<α>`` (``EntropyDPP(alpha=α)``; ``α = 1`` is CVR exactly and is not
run) and ``gir`` (BoTorch's ``GreedyImprovementReduction``).

Recorded per round: the regret, allocator seconds, for every method how many
of its ``M`` points differ from CVR's and from anchored CVR's on the same
state (set difference; since the order was found to matter also how many
positions of the ordered picks differ, ``misplaced_*``), for ENT-DPP the
spread of its quality ``q`` over the inputs, and the accuracy of the round's
SVGP near the optimum (:func:`accuracy`). In the CVR runs, at the first and
last round, every method, an SVGP with inducing points learned on the ELBO
(``learn_inducing_points=True``, started at CVR's points) and an exact
``SingleTaskGP`` are fitted to the same data and scored the same way (the
"common data" panel).

Results go to a JSONL store (one line per finished run or panel), so a killed
run resumes where it stopped; ``--shard i/k`` runs every k-th job (without
``OMP_NUM_THREADS``, each of ``k`` shards on its share of the cores:
:mod:`benchmarks.harness.shards`); each record carries its process's thread
settings (``prefbo.utils.threads.describe()``), its machine and the library
versions. The report (:mod:`benchmarks.inducing_bo_report`) is built from
the store.

Usage::

    OMP_NUM_THREADS=1 python -m benchmarks inducing_bo            # the study
    OMP_NUM_THREADS=1 python -m benchmarks inducing_bo --report-only
    OMP_NUM_THREADS=1 python -m benchmarks inducing_bo --quick    # ~1 minute

Only the published setting (every option that changes the runs at its default;
``--shard`` and ``--report-only`` may be given) reads and writes
``benchmarks/results/inducing_bo.*`` by default. Any other setting, ``--quick``
included, defaults ``--store``, ``--output`` and ``--plot`` to
``<tempdir>/prefbo-quick/`` and says so; give the paths to write elsewhere.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import time
import warnings
from pathlib import Path

from benchmarks.harness.shards import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

import torch
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP, SingleTaskVariationalGP
from botorch.models.utils.inducing_point_allocators import GreedyImprovementReduction
from botorch.test_functions import Ackley, Hartmann
from gpytorch.kernels import MaternKernel, ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood, VariationalELBO
from linear_operator.utils.warnings import NumericalWarning as LONumericalWarning
from torch import Tensor

from benchmarks import inducing_bo_report as report
from benchmarks.harness import environment, reports, stores
from prefbo.acquisition.thompson import thompson_batch
from prefbo.inducing import EntropyDPP, GreedyDPPAllocator, greedy_dpp_map
from prefbo.inducing.quality import MaxValueEntropyQuality, QualityFunction

TKW = {"dtype": torch.float64}
RESULTS = Path(__file__).resolve().parent / "results"
ALPHAS = (0.002, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75)
METHODS = {
    "cvr": "CVR",
    "cvr_anchored": "CVR anchored at the best point",
    **{f"ent_{a:g}": f"ENT-DPP α={a:g}" for a in ALPHAS},
    "gir": "GreedyImprovementReduction (BoTorch)",
}
DIMS = {"hartmann6": 6, "ackley5": 5}
NUM_TEST, TOP_FRACTION, MAX_SAMPLES = 8192, 0.05, 128


def make_problem(name: str) -> tuple:
    r"""A BoTorch test function to maximise (negated), its optimum and maximiser.

    Args:
        name: ``"hartmann6"`` or ``"ackley5"``.

    Returns:
        ``(f, optimum, x_star)``: ``f`` maps ``n x d`` points of the unit cube
        to ``n`` values of the negated function (rescaled from its own box),
        ``optimum`` is the maximum of ``f`` and ``x_star`` a ``1 x d``
        maximiser in the unit cube.
    """
    fn = {"hartmann6": Hartmann(dim=6), "ackley5": Ackley(dim=5)}[name]
    fn = fn.to(**TKW)
    lo, hi = fn.bounds[0], fn.bounds[1]

    def f(U: Tensor) -> Tensor:
        return -fn.evaluate_true(lo + (hi - lo) * U)

    x_star = ((fn.optimizers[:1].to(**TKW) - lo) / (hi - lo)).clamp(0, 1)
    return f, -float(fn.optimal_value), x_star


def test_set(name: str) -> dict:
    r"""The points on which accuracy is measured, the same for every run.

    Returns:
        ``{"X": NUM_TEST x d Sobol points, "f": their values, "top": indices
        of the TOP_FRACTION highest values, "f_star", "x_star"}``.
    """
    f, optimum, x_star = make_problem(name)
    X = torch.quasirandom.SobolEngine(DIMS[name], scramble=True, seed=0).draw(
        NUM_TEST, dtype=torch.float64
    )
    values = f(X)
    top = values.topk(int(TOP_FRACTION * NUM_TEST)).indices
    return {"X": X, "f": values, "top": top, "f_star": optimum, "x_star": x_star}


class AnchoredQuality(QualityFunction):
    r"""``q = 1`` except a large value at the input of highest posterior mean."""

    def __init__(self, model) -> None:
        self.mean = MaxValueEntropyQuality(model)

    def __call__(self, inputs: Tensor, num_inducing: int = 1) -> Tensor:
        q = torch.ones(inputs.shape[:-1], **TKW)  # batch x n
        best = self.mean.posterior_mean(inputs).argmax(-1, keepdim=True)
        return q.scatter(-1, best, 1e3)


class AnchoredCVR(GreedyDPPAllocator):
    r"""CVR whose first point is the input with the highest posterior mean.

    With a stationary kernel all prior variances tie, so ENT-DPP's first pick
    is the input of largest information gain about the maximum, i.e. of highest
    posterior mean; this control isolates that anchor. The large quality of the
    anchor only decides the first step (its residual variance is zero after).
    """

    def __init__(self, model) -> None:
        super().__init__()
        self.quality = AnchoredQuality(model)

    def _get_quality_function(self) -> QualityFunction:
        return self.quality


def _new_kernel(d: int) -> ScaleKernel:
    return ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=d)).to(**TKW)


def fit_svgp(X, Y, Z, kernel, steps: int, lr: float, learn: bool = False):
    r"""Train an SVGP on ``X, Y`` (``n x 1``) by Adam on the ELBO.

    ``Z`` (``M x d``) is fixed unless ``learn``; ``kernel`` is trained in
    place (pass a copy). Returns the model in eval mode, parameters frozen.
    """
    model = SingleTaskVariationalGP(
        X,
        Y,
        inducing_points=Z.clone(),
        covar_module=kernel,
        learn_inducing_points=learn,
    )
    mll = VariationalELBO(model.likelihood, model.model, num_data=X.shape[-2])
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        (-mll(model.model(X), Y.squeeze(-1))).backward()
        optimizer.step()
    model.eval()
    return model.requires_grad_(False)


def fit_exact_gp(X: Tensor, Y: Tensor):
    r"""An exact ``SingleTaskGP`` (Matérn-5/2 ARD) fitted by L-BFGS-B."""
    model = SingleTaskGP(X, Y, covar_module=_new_kernel(X.shape[-1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizationWarning)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    model.eval()
    return model.requires_grad_(False)


@torch.no_grad()
def accuracy(model, y_mean: float, y_std: float, test: dict) -> dict:
    r"""Accuracy of ``model`` (trained on standardised ``Y``) near the optimum.

    Returns:
        ``rmse_top``: RMSE of the posterior mean on the test points whose true
        value is in the top 5 %; ``max_z``: ``(f* - E[max]) / sd[max]`` of the
        true maximum under ``MAX_SAMPLES`` joint posterior samples of the
        maximum over the top-5 % points, the model's top-5 % points and
        ``x_star``; ``max_cover``: whether ``f*`` is inside their 5-95 %
        interval; ``mean_at_star``: posterior mean error ``μ(x*) - f*``.
    """
    X = test["X"]
    mean = torch.cat(
        [
            model.posterior(X[i : i + 2048]).mean.squeeze(-1)
            for i in range(0, len(X), 2048)
        ]
    )
    mean = y_mean + y_std * mean  # n_test
    top = test["top"]
    rmse = float((mean[top] - test["f"][top]).pow(2).mean().sqrt())
    mine = mean.topk(len(top)).indices
    C = torch.cat([X[torch.unique(torch.cat([top, mine]))], test["x_star"]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LONumericalWarning)
        paths = model.posterior(C).rsample(torch.Size([MAX_SAMPLES])).squeeze(-1)
    maxima = y_mean + y_std * paths.amax(-1)  # S
    f_star = test["f_star"]
    lo, hi = torch.quantile(maxima, torch.tensor([0.05, 0.95], **TKW))
    return {
        "rmse_top": rmse,
        "max_z": float((f_star - maxima.mean()) / maxima.std().clamp_min(1e-12)),
        "max_cover": bool(lo <= f_star <= hi),
        "mean_at_star": float(y_mean + y_std * paths.mean(0)[-1] - f_star),
    }


def select(method: str, X: Tensor, kernel, m: int, prev_model) -> tuple[Tensor, dict]:
    r"""Indices (``m``) of ``method``'s inducing points and its diagnostics."""
    info: dict = {}
    if method == "cvr":
        idx = greedy_dpp_map(X, kernel, m)[0]
    elif method == "cvr_anchored":
        idx = AnchoredCVR(prev_model).select_indices(X, kernel, m)[0]
    elif method.startswith("ent_"):
        alpha = float(method[4:])
        q = EntropyDPP(prev_model, alpha=alpha).quality_function(X, m)
        idx = greedy_dpp_map(X, kernel, m, quality=q)[0]  # as select_indices
        q_min = float(q.min())
        coef = (1 - alpha) / (alpha * m)
        info = {
            "q_min": q_min,
            "ig_range": -math.log(q_min) / coef if 0 < q_min and coef else None,
        }
    elif method == "gir":
        alloc = GreedyImprovementReduction(prev_model, maximize=True)
        Z = alloc.allocate_inducing_points(X, kernel, m, torch.Size())
        idx = torch.cdist(Z, X).argmin(-1)
    else:
        raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}.")
    return idx, info


def _differ(a: Tensor, b: Tensor) -> int:
    return len(set(a.tolist()) - set(b.tolist()))


def _misplaced(a: Tensor, b: Tensor) -> int:
    return int((a != b).sum())


def run_one(problem: str, method: str, m: int, seed: int, args, test: dict) -> list:
    r"""One BO run. Returns records: the run's and, for CVR, the common-data panels."""
    f, optimum, _ = make_problem(problem)
    d = DIMS[problem]
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(args.num_init, d, generator=g, **TKW)
    Y = f(X).unsqueeze(-1)
    bounds = torch.stack([torch.zeros(d, **TKW), torch.ones(d, **TKW)])
    torch.manual_seed(seed)
    Ys = (Y - Y.mean()) / Y.std()
    Z = X[greedy_dpp_map(X, _new_kernel(d), m)[0]]
    model = fit_svgp(X, Ys, Z, _new_kernel(d), 2 * args.adam_steps, args.lr)
    key = {"problem": problem, "m": m, "seed": seed, "config": config_tag(args)}
    rounds, panels = [], []
    for r in range(args.rounds):
        rseed = 10_000 * seed + r
        y_mean, y_std = float(Y.mean()), float(Y.std())
        Ys = (Y - y_mean) / y_std
        kernel = copy.deepcopy(model.model.covar_module).requires_grad_(True)
        prev_model = model
        torch.manual_seed(rseed)
        t0 = time.perf_counter()
        with torch.no_grad():
            idx, info = select(method, X, kernel, m, prev_model)
        alloc_s = time.perf_counter() - t0
        with torch.no_grad():  # the same state: kernel before this round's training
            cvr = greedy_dpp_map(X, kernel, m)[0]
            anchored = AnchoredCVR(prev_model).select_indices(X, kernel, m)[0]
        torch.manual_seed(rseed)
        model = fit_svgp(X, Ys, X[idx], kernel, args.adam_steps, args.lr)
        X_new = thompson_batch(
            model,
            bounds,
            args.batch_size,
            raw_samples=args.raw_samples,
            num_restarts=args.num_restarts,
            num_steps=args.ts_steps,
            seed=rseed,
        )
        torch.manual_seed(rseed + 5_000)
        rec = {
            "alloc_s": alloc_s,
            "diff_cvr": _differ(idx, cvr),
            "diff_anchored": _differ(idx, anchored),
            "misplaced_cvr": _misplaced(idx, cvr),
            "misplaced_anchored": _misplaced(idx, anchored),
            **info,
            **accuracy(model, y_mean, y_std, test),
        }
        if method == "cvr" and r in (0, args.rounds - 1):
            state = (X, Ys, y_mean, y_std, prev_model)
            panels.append(
                {"kind": "panel", **key, "round": r, **panel(state, args, m, test)}
            )
        X = torch.cat([X, X_new])
        Y = torch.cat([Y, f(X_new).unsqueeze(-1)])
        rec["regret"] = optimum - float(Y.max())
        rounds.append(rec)
    run = {
        "kind": "run",
        **key,
        "method": method,
        "regret0": optimum - float(Y[: args.num_init].max()),
    }
    return [{**run, "rounds": rounds}, *panels]


def panel(state: tuple, args, m: int, test: dict) -> dict:
    r"""Every method, the ELBO-learned SVGP and the exact GP on the same data."""
    X, Ys, y_mean, y_std, prev_model = state
    kernel0 = prev_model.model.covar_module
    scores = {}
    for method in args.methods:
        kernel = copy.deepcopy(kernel0).requires_grad_(True)
        torch.manual_seed(7)
        with torch.no_grad():
            idx, _ = select(method, X, kernel, m, prev_model)
        torch.manual_seed(7)
        model = fit_svgp(X, Ys, X[idx], kernel, args.adam_steps, args.lr)
        scores[method] = accuracy(model, y_mean, y_std, test)
        if method == "cvr":
            kernel = copy.deepcopy(kernel0).requires_grad_(True)
            torch.manual_seed(7)
            learned = fit_svgp(X, Ys, X[idx], kernel, args.adam_steps, args.lr, True)
            scores["elbo_learned"] = accuracy(learned, y_mean, y_std, test)
    if len(X) <= args.exact_max_n:
        torch.manual_seed(7)
        scores["exact_gp"] = accuracy(fit_exact_gp(X, Ys), y_mean, y_std, test)
    return {"n": len(X), "scores": scores}


def config_tag(args) -> str:
    r"""The settings a stored record depends on (others' records are ignored)."""
    return (
        f"init{args.num_init}-R{args.rounds}-B{args.batch_size}-adam{args.adam_steps}"
        f"-lr{args.lr}-ts{args.raw_samples}.{args.num_restarts}.{args.ts_steps}"
    )


def jobs(args) -> list[tuple]:
    r"""``(problem, m, seed, method)`` of the study, seed-major (paired runs early)."""
    return [
        (p, m, s, meth)
        for s in args.seeds
        for p in args.problems
        for m in args.inducing
        for meth in args.methods
    ]


#: The options whose defaults make up the published setting.
PUBLISHED = (
    "seeds", "rounds", "batch_size", "num_init", "inducing", "problems", "methods",
    "adam_steps", "lr", "raw_samples", "num_restarts", "ts_steps", "exact_max_n",
)  # fmt: skip


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--quick", action="store_true", help="~1-minute run (overrides sizes)")
    add("--seeds", default="0-19", help="seed range a-b or comma list")
    add("--rounds", type=int, default=8, help="BO rounds")
    add("--batch-size", type=int, default=100, help="Thompson samples per round")
    add("--num-init", type=int, default=100, help="initial design")
    add("--inducing", default="50", help="comma-separated numbers of points M")
    add("--problems", default="hartmann6,ackley5", help="problems")
    add("--methods", default=",".join(METHODS), help="methods")
    add("--adam-steps", type=int, default=50, help="Adam steps per round")
    add("--lr", type=float, default=0.05, help="Adam learning rate")
    add("--raw-samples", type=int, default=256, help="Sobol points per path")
    add("--num-restarts", type=int, default=4, help="refined starts per path")
    add("--ts-steps", type=int, default=30, help="Adam steps per path")
    add("--exact-max-n", type=int, default=2000, help="largest n for the exact GP")
    add("--shard", default="0/1", help="i/k: run every k-th job from the i-th")
    add("--report-only", action="store_true", help="build the report from the store")
    where = "results/ for the published setting, else <tempdir>/prefbo-quick/"
    add("--store", type=Path, help=f"JSONL store (inducing_bo.jsonl in {where})")
    add("--output", type=Path, help=f"report (inducing_bo.md in {where})")
    add("--plot", type=Path, help=f"PNG plot (inducing_bo.png in {where})")
    args = parser.parse_args(argv)
    defaults = parser.parse_args([])
    args.published = not args.quick and all(
        getattr(args, k) == getattr(defaults, k) for k in PUBLISHED
    )
    base = RESULTS if args.published else reports.scratch_dir()
    for name, suffix in (("store", "jsonl"), ("output", "md"), ("plot", "png")):
        if getattr(args, name) is None:
            setattr(args, name, base / f"inducing_bo.{suffix}")
    if args.quick:
        args.seeds, args.rounds, args.num_init, args.batch_size = "0-1", 2, 60, 20
        args.inducing, args.adam_steps, args.problems = "20", 20, "hartmann6"
        args.raw_samples, args.ts_steps = 64, 10
    a, _, b = args.seeds.partition("-")
    args.seeds = (
        list(range(int(a), int(b) + 1)) if b else [int(s) for s in a.split(",")]
    )
    args.inducing = [int(s) for s in args.inducing.split(",")]
    args.problems = args.problems.split(",")
    args.methods = args.methods.split(",")
    return args


def main(argv: list[str] | None = None) -> str:
    r"""Run the pending jobs of the study, then write and return the report."""
    args = parse(argv)
    tag = config_tag(args)
    if not args.published:
        print(
            f"not the published setting: store {args.store}, report "
            f"{args.output}, plot {args.plot}",
            file=sys.stderr,
            flush=True,
        )
    if not args.report_only:
        done = {
            (r["problem"], r["m"], r["seed"], r["method"])
            for r in stores.read(args.store)
            if r["kind"] == "run" and r["config"] == tag
        }
        i, k = (int(v) for v in args.shard.split("/"))
        pending = [j for j in jobs(args)[i::k] if j not in done]
        tests = {p: test_set(p) for p in args.problems}
        args.store.parent.mkdir(parents=True, exist_ok=True)
        for n, (p, m, s, meth) in enumerate(pending):
            t0 = time.perf_counter()
            records = run_one(p, meth, m, s, args, tests[p])
            records[0]["seconds"] = time.perf_counter() - t0
            records[0]["machine"] = {
                "cpus": os.cpu_count(),
                "load": environment.load_average(),
                "omp": os.environ.get("OMP_NUM_THREADS", "unset"),
                "processor": environment.machine(),
            }
            records[0]["versions"] = environment.versions()
            threads = environment.threads()
            stores.append(args.store, *({**rec, "threads": threads} for rec in records))
            print(
                f"[{n + 1}/{len(pending)}] {p} M={m} seed={s} {meth}: "
                f"{records[0]['seconds']:.1f}s, regret "
                f"{records[0]['rounds'][-1]['regret']:.3g}",
                file=sys.stderr,
                flush=True,
            )
    records = [r for r in stores.read(args.store) if r["config"] == tag]
    text = report.build(records, args, argv, METHODS)
    reports.write(args.output, text)
    print(text)
    return text
