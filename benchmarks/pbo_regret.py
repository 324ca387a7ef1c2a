r"""Preferential BO regret: prefbo's loop default against BoTorch's plain loop.

The setting (fixed before any run):

- Problems: BoTorch's Branin, Hartmann-3, Hartmann-6, Ackley-5, Levy-4 and
  Rosenbrock-4 on their customary boxes, negated (a utility to maximise) and
  standardised over the box: ``u(x) = (-f(x) - m) / s`` with ``m``, ``s`` the
  mean and standard deviation of ``-f`` at 20,000 uniform points (generator
  seed 0). Regret is ``u* - u(recommendation)`` in those units.
- The simulated person answers ``P(x ≻ x') = Φ((u(x) - u(x')) / (√2 σ))``
  (:class:`~prefbo.test_functions.SimulatedPerson`, seeded by the run's seed),
  ``σ ∈ {0.01, 0.1, 0.3}``.
- Every configuration first gets the same 4 uniformly random pairs (drawn from
  the run's seed) and their answers, then asks its own questions up to 60
  answers; the regrets after 30 and after 60 answers are the two budgets.
- ``botorch`` (the reference): ``PairwiseGP`` on the designs mapped to the unit
  cube (as BoTorch's tutorials do), refitted with
  ``PairwiseLaplaceMarginalLogLikelihood`` at every answer, questions from
  ``AnalyticExpectedUtilityOfBestOption`` maximised by ``optimize_acqf(q=2,
  num_restarts=4, raw_samples=64)``; the recommendation is the told design of
  highest posterior mean.
- ``default``: ``PreferentialOptimizer(box, seed=seed)`` with every setting at
  its default, told the 4 random pairs; the recommendation is its ``best()``.
  Other configurations (``--configs``) change one setting of the loop.

Three seed sets: ``tuning`` (0-19), which development may look at;
``untuned`` (1000-1019), run once for the published figures of the virtual
comparisons at the faces; ``fresh`` (2000-2019), fixed before any run, for
the figures of the next change of the default (the untuned seeds have been
seen since).

Runs are appended to a JSON-lines store (one record per problem, σ, seed and
configuration, with the regret and the cumulative wall time after every
answer, and the versions of Python, torch, numpy, scipy, BoTorch, GPyTorch and
linear_operator it ran with: a loop's path depends on the last bits of its
objectives, so the same seeds can end elsewhere under other releases; and
its thread settings, ``prefbo.utils.threads.describe()``); a rerun skips
what the store holds, so a long run can be split (``--shard i/k`` in
parallel processes) and resumed. ``--report`` writes the
markdown tables and the regret-vs-answers figures from the store.

Per cell (problem, σ, budget), over the seeds: mean ± s.e. of the final
regret, the worst seed, the *stuck rate* (share of seeds whose regret exceeds
3× BoTorch's median in that cell; of 20 seeds, the mean of the 10th and
11th), the paired difference to BoTorch with one-sided sign-flip p-values,
and the time per answer over BoTorch's (answers 1-30 for the 30 budget,
31-60 for the 60 budget). Per configuration, over all cells: the stuck runs
against BoTorch's, with the exact McNemar p-value of the pairs (same cell
and seed) where only one of the two is stuck.

Run single-threaded, e.g.::

    OMP_NUM_THREADS=1 python benchmarks/pbo_regret.py --seed-set untuned --shard 0/2 &
    OMP_NUM_THREADS=1 python benchmarks/pbo_regret.py --seed-set untuned --shard 1/2
    python benchmarks/pbo_regret.py --seed-set untuned --report

Without ``OMP_NUM_THREADS``, each of ``k`` shards runs on its share of the
cores (``_shard_threads.py``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _shard_threads import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

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
from botorch.test_functions import synthetic
from linear_operator.utils.warnings import NumericalWarning as LONumericalWarning
from torch import Tensor

from prefbo.loop.optimizer import PreferentialOptimizer, expected_fit_warnings
from prefbo.test_functions import SimulatedPerson
from prefbo.utils.threads import describe

RESULTS = Path(__file__).parent / "results"
PROBLEMS: dict[str, Callable[[], synthetic.SyntheticTestFunction]] = {
    "Branin": lambda: synthetic.Branin(),
    "Hartmann3": lambda: synthetic.Hartmann(dim=3),
    "Hartmann6": lambda: synthetic.Hartmann(dim=6),
    "Ackley5": lambda: synthetic.Ackley(dim=5),
    "Levy4": lambda: synthetic.Levy(dim=4),
    "Rosenbrock4": lambda: synthetic.Rosenbrock(dim=4),
}
SIGMAS = (0.01, 0.1, 0.3)
SEED_SETS = {
    "tuning": range(0, 20),
    "untuned": range(1000, 1020),
    "fresh": range(2000, 2020),
}
BUDGETS = (30, 60)
INITIAL_PAIRS = 4
REFERENCE = "botorch"
# name -> PreferentialOptimizer keyword arguments beside (bounds, seed)
CONFIGS: dict[str, dict[str, Any]] = {
    REFERENCE: {},
    "default": {},
    "laplace": {"model": "laplace"},
    "random": {"strategy": "random"},
}


class Utility:
    r"""A BoTorch test function negated and standardised over its box."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.f = PROBLEMS[name]()
        self.bounds = self.f.bounds.to(torch.float64)  # 2 x d
        self.dim = self.bounds.shape[-1]
        gen = torch.Generator().manual_seed(0)
        U = torch.rand(20_000, self.dim, generator=gen, dtype=torch.float64)
        raw = -self.f.evaluate_true(self.from_unit(U))
        self.mean, self.std = raw.mean().item(), raw.std().item()
        self.optimal_value = (-self.f.optimal_value - self.mean) / self.std

    def from_unit(self, U: Tensor) -> Tensor:
        r"""Designs of the box from points of the unit cube."""
        return self.bounds[0] + (self.bounds[1] - self.bounds[0]) * U

    def to_unit(self, X: Tensor) -> Tensor:
        r"""Points of the unit cube from designs of the box."""
        return (X - self.bounds[0]) / (self.bounds[1] - self.bounds[0])

    def __call__(self, X: Tensor) -> Tensor:
        r"""The standardised utility at ``... x d`` designs of the box."""
        return (-self.f.evaluate_true(X) - self.mean) / self.std

    def regret(self, x: Tensor) -> float:
        r"""``u* - u(x)`` at one design of the box (clamped at 0)."""
        return max(self.optimal_value - self(x.unsqueeze(0)).item(), 0.0)


@contextmanager
def _quiet() -> Iterator[None]:
    r"""The warnings both loops trigger by design (jitter on near-singular
    kernel matrices, L-BFGS-B stopping on its limits), and only those."""
    with warnings.catch_warnings(), expected_fit_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*not p\.d\., added jitter", category=LONumericalWarning
        )
        warnings.filterwarnings("ignore", category=OptimizationWarning)
        yield


def initial_pairs(u: Utility, seed: int) -> list[Tensor]:
    r"""The run's ``INITIAL_PAIRS`` random ``2 x d`` pairs of the box."""
    gen = torch.Generator().manual_seed(seed)
    U = torch.rand(INITIAL_PAIRS, 2, u.dim, generator=gen, dtype=torch.float64)
    return list(u.from_unit(U))


class BoTorchLoop:
    r"""The reference: BoTorch's ``PairwiseGP`` + analytic EUBO, unit cube."""

    def __init__(self, u: Utility, seed: int) -> None:
        self.u, self.seed = u, seed
        self.Z = torch.empty(0, u.dim, dtype=torch.float64)  # n x d, unit cube
        self.comps = torch.empty(0, 2, dtype=torch.long)
        self.model: PairwiseGP | None = None

    def tell(self, pair: Tensor, winner: int) -> None:
        n = self.Z.shape[0]
        self.Z = torch.cat([self.Z, self.u.to_unit(pair)])
        self.comps = torch.cat(
            [self.comps, torch.tensor([[n + winner, n + 1 - winner]])]
        )
        self.model = PairwiseGP(self.Z, self.comps)
        mll = PairwiseLaplaceMarginalLogLikelihood(self.model.likelihood, self.model)
        try:
            fit_gpytorch_mll(mll)
        except ModelFittingError:  # keep the default hyperparameters
            pass
        self.model.eval()

    def ask(self) -> Tensor:
        acqf = AnalyticExpectedUtilityOfBestOption(pref_model=self.model)
        cube = torch.zeros(2, self.u.dim, dtype=torch.float64)
        cube[1] = 1
        pair, _ = optimize_acqf(
            acqf,
            bounds=cube,
            q=2,
            num_restarts=4,
            raw_samples=64,
            options={"seed": self.seed * 1000 + self.comps.shape[0]},
        )
        return self.u.from_unit(pair.detach())

    def best(self) -> Tensor:
        with torch.no_grad():
            mean = self.model.posterior(self.Z).mean.reshape(-1)
        return self.u.from_unit(self.Z[mean.argmax()])


class PrefboLoop:
    r"""prefbo's ``PreferentialOptimizer`` with one configuration's settings."""

    def __init__(self, u: Utility, seed: int, **kwargs: Any) -> None:
        self.opt = PreferentialOptimizer(u.bounds, seed=seed, **kwargs)

    def tell(self, pair: Tensor, winner: int) -> None:
        self.opt.tell(winner, options=pair)

    def ask(self) -> Tensor:
        return self.opt.ask()

    def best(self) -> Tensor:
        return self.opt.best()[0]


#: The distributions whose versions a run records (:func:`versions`).
VERSIONED = ("torch", "numpy", "scipy", "botorch", "gpytorch", "linear_operator")


def versions() -> dict[str, str]:
    r"""Python's and :data:`VERSIONED`'s versions in this process."""
    out = {"python": platform.python_version()}
    for name in VERSIONED:
        out[name] = importlib.metadata.version(name)
    return out


def run_one(
    problem: str,
    sigma: float,
    seed: int,
    config: str,
    answers: int = BUDGETS[-1],
    trace: Callable[[int, Any, Tensor, int], None] | None = None,
    make_loop: Callable[[Utility, int], Any] | None = None,
) -> dict[str, Any]:
    r"""One run; the record stored (regret and cumulative seconds per answer).

    ``trace(k, loop, pair, winner)`` is called after the ``k``-th answer (for
    diagnostics; not timed). ``make_loop(u, seed)``, if given, builds the
    loop instead of ``config``'s (which then only names the record); the
    loop has ``tell(pair, winner)``, ``ask()`` and ``best()``.
    """
    u = Utility(problem)
    person = SimulatedPerson(u, noise_std=sigma, seed=seed)
    loop: Any
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if make_loop is not None:
            loop = make_loop(u, seed)
        elif config == REFERENCE:
            loop = BoTorchLoop(u, seed)
        else:
            loop = PrefboLoop(u, seed, **CONFIGS[config])
        regret, seconds, elapsed = [], [], 0.0
        first = initial_pairs(u, seed)
        with _quiet():
            for k in range(answers):
                t0 = time.perf_counter()
                pair = first[k] if k < len(first) else loop.ask()
                t1 = time.perf_counter()
                winner = person.compare(pair[0], pair[1])
                t2 = time.perf_counter()
                loop.tell(pair, winner)
                x = loop.best()
                elapsed += (t1 - t0) + (time.perf_counter() - t2)
                regret.append(u.regret(x))
                seconds.append(elapsed)
                if trace is not None:
                    trace(k + 1, loop, pair, winner)
    return {
        "problem": problem,
        "sigma": sigma,
        "seed": seed,
        "config": config,
        "regret": regret,
        "seconds": seconds,
        "versions": versions(),
        "threads": describe(),
    }


# ---------------------------------------------------------------- store


def load(store: Path) -> list[dict[str, Any]]:
    r"""The records of a store (a torn last line is skipped)."""
    if not store.exists():
        return []
    out = []
    for line in store.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def key(rec: dict[str, Any]) -> tuple:
    return rec["problem"], rec["sigma"], rec["seed"], rec["config"]


def pending(
    args: argparse.Namespace, seed_set: str, configs: Sequence[str], done: set
) -> list[tuple[str, float, int, str]]:
    r"""This shard's runs (``args.problems`` x ``args.sigmas`` x the first
    ``args.seeds`` of ``seed_set`` x ``configs``) whose key is not in
    ``done``: seeds outermost, configurations interleaved (a slow spell of
    the machine lands on all of them)."""
    jobs = [
        (p, s, seed, c)
        for seed in list(SEED_SETS[seed_set])[: args.seeds]
        for p in args.problems
        for s in args.sigmas
        for c in configs
    ]
    i, k = args.shard
    return [j for n, j in enumerate(jobs) if n % k == i and j not in done]


def run(args: argparse.Namespace) -> None:
    r"""Every missing run of this shard (:func:`pending`)."""
    done = {key(r) for store in args.store for r in load(store)}
    mine = pending(args, args.seed_set, args.configs, done)
    i, k = args.shard
    print(f"{len(mine)} runs to do in shard {i}/{k} ({describe()})", flush=True)
    for p, s, seed, c in mine:
        t0 = time.perf_counter()
        rec = run_one(p, s, seed, c, answers=args.answers)
        with args.store[0].open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(
            f"{p:>11s} σ={s:<5} seed {seed:>4d} {c:>10s}: regret@30 "
            f"{rec['regret'][min(29, len(rec['regret']) - 1)]:.4f} @end "
            f"{rec['regret'][-1]:.4f} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )


# ---------------------------------------------------------------- report


def paired_test(diff: Tensor, draws: int = 2**16) -> tuple[float, float]:
    r"""One-sided sign-flip permutation p-values ``(p_worse, p_better)`` of a
    paired mean difference (exact for at most 16 pairs, else ``draws`` seeded
    random sign patterns)."""
    d = diff.to(torch.float64).flatten()
    S = d.numel()
    if S > 16:
        gen = torch.Generator().manual_seed(0)
        signs = torch.randint(0, 2, (draws, S), generator=gen).to(d) * 2 - 1
    else:
        bits = (torch.arange(2**S).unsqueeze(-1) >> torch.arange(S)) & 1
        signs = bits.to(d) * 2 - 1
    means = (signs * d.abs()).mean(-1)
    obs, tol = d.mean(), 1e-12 * (1.0 + d.abs().max())
    return (
        (means >= obs - tol).double().mean().item(),
        (means <= obs + tol).double().mean().item(),
    )


def mcnemar(only_mine: int, only_ref: int) -> float:
    r"""Exact two-sided McNemar p-value of paired yes/no outcomes: under the
    null each of the ``only_mine + only_ref`` discordant pairs falls either
    way with probability 1/2 (1 without discordant pairs)."""
    n, k = only_mine + only_ref, min(only_mine, only_ref)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def _se(x: Tensor) -> float:
    return x.std().item() / math.sqrt(x.numel()) if x.numel() > 1 else 0.0


def cells(
    records: list[dict[str, Any]],
    seeds: Sequence[int],
    budgets: Sequence[int] = BUDGETS,
) -> dict:
    r"""``{(problem, sigma, budget): {config: (regret S, s/answer S)}}`` over the
    seeds every configuration of the cell has."""
    by: dict[tuple, dict[str, dict[int, dict]]] = {}
    for r in records:
        if r["seed"] in seeds:
            by.setdefault((r["problem"], r["sigma"]), {}).setdefault(r["config"], {})[
                r["seed"]
            ] = r
    out: dict = {}
    for (p, s), confs in by.items():
        common = sorted(set.intersection(*(set(v) for v in confs.values())))
        for n, b in enumerate(budgets):
            lo = budgets[n - 1] if n else 0  # time per answer over (lo, b]
            row = {}
            for c, runs in confs.items():
                rs = [runs[seed] for seed in common if len(runs[seed]["regret"]) >= b]
                if len(rs) != len(common) or not rs:
                    continue
                R = torch.tensor([r["regret"][b - 1] for r in rs], dtype=torch.float64)
                T = torch.tensor(
                    [
                        (r["seconds"][b - 1] - (r["seconds"][lo - 1] if lo else 0))
                        / (b - lo)
                        for r in rs
                    ],
                    dtype=torch.float64,
                )
                row[c] = (R, T)
            if REFERENCE in row:
                out[p, s, b] = row
    return out


def report(
    records: list[dict[str, Any]],
    seed_set: str,
    budgets: Sequence[int] = BUDGETS,
) -> tuple[str, dict]:
    r"""The markdown tables and the per-configuration verdicts."""
    table = cells(records, SEED_SETS[seed_set], budgets)
    lines = [
        f"## Seed set `{seed_set}` (seeds {SEED_SETS[seed_set].start}-"
        f"{SEED_SETS[seed_set].stop - 1})",
        "",
        "| problem | σ | answers | configuration | seeds | regret mean ± s.e. | "
        "worst | stuck | Δ vs BoTorch (paired) | p worse | p better | time ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdict: dict[str, dict[str, Any]] = {}
    for (p, s, b), row in sorted(table.items()):
        Rref, Tref = row[REFERENCE]
        # the median of an even count is the mean of the middle two
        # (torch's median() would return the lower one)
        threshold = 3 * Rref.quantile(0.5).item()
        ref_above = Rref > threshold  # runs paired by seed across configurations
        for c, (R, T) in row.items():
            above = R > threshold
            stuck = above.double().mean().item()
            cells_c = verdict.setdefault(
                c,
                {
                    "cells": 0,
                    "lower": 0,
                    "worse": [],
                    "stuck_max": 0.0,
                    "stuck": [],
                    "ratio": [],
                    "pooled": {},
                },
            )
            if c == REFERENCE:
                delta = pw = pb = ratio = "—"
            else:
                d = R - Rref
                p_w, p_b = paired_test(d)
                delta = f"{d.mean():+.4f} ± {_se(d):.4f}"
                pw, pb = f"{p_w:.3f}", f"{p_b:.3f}"
                r = T.mean().item() / Tref.mean().item()
                ratio = f"{r:.2f}"
                cells_c["cells"] += 1
                cells_c["lower"] += int(R.mean() < Rref.mean())
                if p_w < 0.05:
                    cells_c["worse"].append(f"{p} σ={s} @{b}")
                cells_c["ratio"].append((b, r))
                # the stuck runs, BoTorch's, and the discordant pairs of each
                pooled = cells_c["pooled"].setdefault(b, [0, 0, 0, 0])
                pairs = (above, ref_above, above & ~ref_above, ref_above & ~above)
                for j, n in enumerate(pairs):
                    pooled[j] += int(n.sum())
            cells_c["stuck_max"] = max(cells_c["stuck_max"], stuck)
            cells_c["stuck"].append(((p, s, b), stuck))
            lines.append(
                f"| {p} | {s} | {b} | {c} | {R.numel()} | {R.mean():.4f} ± "
                f"{_se(R):.4f} | {R.max():.4f} | {stuck:.2f} | {delta} | {pw} | "
                f"{pb} | {ratio} |"
            )
    lines += ["", *version_table(records)]
    return "\n".join(lines), verdict


def version_table(records: list[dict[str, Any]]) -> list[str]:
    r"""Per configuration, how many runs ran with which library versions and
    thread settings."""
    counts: dict[tuple[str, str, str], int] = {}
    for r in records:
        v = r.get("versions")
        text = ", ".join(f"{k} {v[k]}" for k in sorted(v)) if v else "not recorded"
        row = r["config"], text, r.get("threads", "not recorded")
        counts[row] = counts.get(row, 0) + 1
    return [
        "| configuration | runs | versions | threads |",
        "|---|---|---|---|",
        *(f"| {c} | {n} | {t} | {th} |" for (c, t, th), n in sorted(counts.items())),
    ]


def summary(
    verdict: dict[str, dict[str, Any]], budgets: Sequence[int] = BUDGETS
) -> str:
    r"""One line per configuration: the acceptance figures (stuck rates,
    paired verdicts, time ratios at the first and last budget)."""
    ref = dict(verdict.get(REFERENCE, {}).get("stuck", []))
    lines = [
        "| configuration | cells | lower mean than BoTorch | worse (p<0.05) on | "
        "max stuck rate | stuck > half BoTorch's where BoTorch's > 10 % | "
        f"time ratio @{budgets[0]} (max) | time ratio @{budgets[-1]} (max) | "
        f"stuck runs, all cells, @{' / @'.join(map(str, budgets))} "
        "(BoTorch's; McNemar p) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c, v in verdict.items():
        if c == REFERENCE:
            continue
        bad = [
            f"{p} σ={s} @{b}"
            for (p, s, b), st in v["stuck"]
            if ref.get((p, s, b), 0) > 0.10 and st > ref[p, s, b] / 2
        ]
        r30 = [r for b, r in v["ratio"] if b == budgets[0]]
        r60 = [r for b, r in v["ratio"] if b == budgets[-1]]
        pooled = " / ".join(
            f"{n} ({n_ref}; p {mcnemar(only, only_ref):.3f})"
            for n, n_ref, only, only_ref in (
                v["pooled"][budget] for budget in budgets if budget in v["pooled"]
            )
        )
        lines.append(
            f"| {c} | {v['cells']} | {v['lower']} | {', '.join(v['worse']) or 'none'} "
            f"| {v['stuck_max']:.2f} | {', '.join(bad) or 'none'} | "
            f"{max(r30, default=math.nan):.2f} | {max(r60, default=math.nan):.2f} | "
            f"{pooled or '—'} |"
        )
    return "\n".join(lines)


def plot(records: list[dict[str, Any]], seed_set: str, path: Path) -> None:
    r"""Median regret (and inter-quartile band) against answers, one panel per
    problem and σ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = set(SEED_SETS[seed_set])
    probs = [p for p in PROBLEMS if any(r["problem"] == p for r in records)]
    sigmas = sorted({r["sigma"] for r in records})
    fig, axes = plt.subplots(
        len(probs),
        len(sigmas),
        figsize=(4.2 * len(sigmas), 3.0 * len(probs)),
        squeeze=False,
    )
    for i, p in enumerate(probs):
        for j, s in enumerate(sigmas):
            ax = axes[i][j]
            for c in CONFIGS:
                rs = [
                    r["regret"]
                    for r in records
                    if r["problem"] == p
                    and r["sigma"] == s
                    and r["config"] == c
                    and r["seed"] in seeds
                ]
                if not rs:
                    continue
                n = min(len(x) for x in rs)
                R = torch.tensor([x[:n] for x in rs], dtype=torch.float64)
                q = torch.quantile(R, torch.tensor([0.25, 0.5, 0.75]).double(), dim=0)
                x = range(1, n + 1)
                ax.plot(
                    x, q[1].numpy(), "k-" if c == REFERENCE else "-", lw=1.4, label=c
                )
                ax.fill_between(x, q[0].numpy(), q[2].numpy(), alpha=0.12)
            ax.set(
                title=f"{p}, σ = {s}", xlabel="answers", ylabel="regret", yscale="log"
            )
            ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    r"""Parse the command line."""
    p = argparse.ArgumentParser(
        prog="python benchmarks/pbo_regret.py", description=__doc__.splitlines()[0]
    )
    p.add_argument("--seed-set", choices=list(SEED_SETS), default="untuned")
    p.add_argument(
        "--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS)
    )
    p.add_argument("--sigmas", nargs="+", type=float, default=list(SIGMAS))
    p.add_argument(
        "--configs", nargs="+", default=[REFERENCE, "default"], choices=list(CONFIGS)
    )
    p.add_argument("--answers", type=int, default=BUDGETS[-1])
    p.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        default=list(BUDGETS),
        help="answer counts reported (each at most --answers)",
    )
    p.add_argument(
        "--seeds", type=int, default=None, help="only the first N of the seed set"
    )
    p.add_argument(
        "--output", type=Path, default=RESULTS, help="folder of the report's files"
    )
    p.add_argument("--shard", default="0/1", help="i/k: every k-th run from the i-th")
    p.add_argument(
        "--store",
        type=Path,
        nargs="+",
        default=None,
        help="JSON-lines stores: runs append to the first, the report "
        "reads all, a later store's run replacing an earlier one's of the same "
        "problem, σ, seed and configuration (default "
        "results/pbo_regret_<seed set>.jsonl)",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="write results/pbo_regret.md and the figure from the store",
    )
    args = p.parse_args(argv)
    i, k = (int(v) for v in args.shard.split("/"))
    if not 0 <= i < k:
        p.error("--shard must be i/k with 0 <= i < k")
    if max(args.budgets) > args.answers or min(args.budgets) < 1:
        p.error("--budgets must lie in [1, --answers]")
    args.shard = (i, k)
    if args.store is None:
        args.store = [RESULTS / f"pbo_regret_{args.seed_set}.jsonl"]
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def main(argv: Sequence[str] | None = None) -> str | None:
    r"""Run (or, with ``--report``, report); the report's text."""
    args = parse_args(argv)
    if not args.report:
        run(args)
        return None
    # a later store's run replaces an earlier one's of the same key
    records = list({key(r): r for store in args.store for r in load(store)}.values())
    budgets = sorted(args.budgets)
    text, verdict = report(records, args.seed_set, budgets)
    args.output.mkdir(parents=True, exist_ok=True)
    out = args.output / f"pbo_regret_{args.seed_set}.md"
    png = args.output / f"pbo_regret_{args.seed_set}.png"
    plot(records, args.seed_set, png)
    out.write_text(
        f"# Preferential BO regret, seed set `{args.seed_set}`\n\n"
        f"Stores: {', '.join(f'`{s.name}`' for s in args.store)}; figure: "
        f"`{png.name}`. Setting and columns: the docstring of "
        "`benchmarks/pbo_regret.py`. The time ratios divide seconds timed "
        "in the runs themselves: they compare only where the configurations "
        "ran interleaved in one session on idle cores (the untuned store's "
        "BoTorch runs were made in an earlier session than the default's; "
        "interleaved timings: `pbo_regret_timing*.md`).\n\n"
        f"{summary(verdict, budgets)}\n\n{text}\n"
    )
    print(out.read_text())
    return out.read_text()


if __name__ == "__main__":
    main()
