r"""Preferential BO regret: prefbo's loop default against BoTorch's plain loop.

The setting (fixed before any run) is :mod:`benchmarks.harness.configs`'s:
the six standardised BoTorch problems of
:class:`~benchmarks.harness.problems.Utility`, a probit person of noise
``σ ∈ {0.01, 0.1, 0.3}``, the same 4 random pairs first, then each
configuration's own questions up to 60 answers; the regrets after 30 and
after 60 answers are the two budgets. ``botorch`` (the reference) is
BoTorch's ``PairwiseGP`` + analytic EUBO loop, ``default`` prefbo's
``PreferentialOptimizer`` at its defaults; other configurations
(``--configs``) change one setting of the loop. Seed sets: ``tuning``
(0-19), ``untuned`` (1000-1019, the published figures), ``fresh``
(2000-2019, for the next change of the default).

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

    OMP_NUM_THREADS=1 python -m benchmarks pbo_regret --seed-set untuned --shard 0/2 &
    OMP_NUM_THREADS=1 python -m benchmarks pbo_regret --seed-set untuned --shard 1/2
    python -m benchmarks pbo_regret --seed-set untuned --report

Without ``OMP_NUM_THREADS``, each of ``k`` shards runs on its share of the
cores (:mod:`benchmarks.harness.shards`).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.shards import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

import torch
from torch import Tensor

from benchmarks.harness import environment, reports, stores
from benchmarks.harness.configs import (
    BUDGETS,
    CONFIGS,
    REFERENCE,
    SEED_SETS,
    SIGMAS,
    initial_pairs,
    make_loop,
    quiet,
)
from benchmarks.harness.problems import PROBLEMS, Utility
from prefbo.test_functions import SimulatedPerson

RESULTS = Path(__file__).parent / "results"


def run_one(
    problem: str,
    sigma: float,
    seed: int,
    config: str,
    answers: int = BUDGETS[-1],
    trace: Callable[[int, Any, Tensor, int], None] | None = None,
    make: Callable[[Utility, int], Any] | None = None,
) -> dict[str, Any]:
    r"""One run; the record stored (regret and cumulative seconds per answer).

    ``trace(k, loop, pair, winner)`` is called after the ``k``-th answer (for
    diagnostics; not timed). ``make(u, seed)``, if given, builds the loop
    instead of ``config``'s (which then only names the record): how a screen
    of a change to the loop runs its variant; the loop has ``tell(pair,
    winner)``, ``ask()`` and ``best()``.
    """
    u = Utility(problem)
    person = SimulatedPerson(u, noise_std=sigma, seed=seed)
    loop: Any
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        loop = make(u, seed) if make is not None else make_loop(config, u, seed)
        regret, seconds, elapsed = [], [], 0.0
        first = initial_pairs(u, seed)
        with quiet():
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
        "versions": environment.versions(),
        "threads": environment.threads(),
        "machine": environment.machine(),
    }


# ---------------------------------------------------------------- store


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
    done = {key(r) for store in args.store for r in stores.read(store)}
    mine = pending(args, args.seed_set, args.configs, done)
    i, k = args.shard
    print(
        f"{len(mine)} runs to do in shard {i}/{k} ({environment.threads()})",
        flush=True,
    )
    for p, s, seed, c in mine:
        t0 = time.perf_counter()
        rec = run_one(p, s, seed, c, answers=args.answers)
        stores.append(args.store[0], rec)
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
    r"""Per configuration, how many runs ran on which machine, with which
    library versions and thread settings (``not recorded`` for runs made
    before their records held them)."""
    counts: dict[tuple[str, str, str, str], int] = {}
    for r in records:
        v = r.get("versions")
        text = ", ".join(f"{k} {v[k]}" for k in sorted(v)) if v else "not recorded"
        row = (
            r["config"],
            r.get("machine", "not recorded"),
            text,
            r.get("threads", "not recorded"),
        )
        counts[row] = counts.get(row, 0) + 1
    return [
        "| configuration | runs | machine | versions | threads |",
        "|---|---|---|---|---|",
        *(
            f"| {c} | {n} | {m} | {t} | {th} |"
            for (c, m, t, th), n in sorted(counts.items())
        ),
    ]


def timing_table(
    records: list[dict[str, Any]], seed_set: str, budgets: Sequence[int] = BUDGETS
) -> list[str]:
    r"""Seconds per answer of every run of BoTorch's loop and of one other
    configuration, per problem and seed, over answers ``(0, b_1]``, ``(b_1,
    b_2]``, ...: the table of a timing run (the configurations interleaved on
    an idle core); the last row the means over the runs and their ratio."""
    seeds = set(SEED_SETS[seed_set])
    by = {
        (r["problem"], r["seed"], r["config"]): r for r in records if r["seed"] in seeds
    }
    others = sorted({c for _, _, c in by if c != REFERENCE})
    if len(others) != 1:
        raise ValueError(
            f"a timing table compares BoTorch's loop with one configuration; "
            f"the store has {others or 'none'} beside it"
        )
    other = others[0]
    spans = list(zip([0, *budgets[:-1]], budgets, strict=True))
    head, rule = ["problem", "seed"], ["---", "---"]
    for lo, hi in spans:
        answers = "answers " if not lo else ""
        head += [f"BoTorch, {answers}{lo + 1}-{hi}", f"{other}, {lo + 1}-{hi}", "ratio"]
        rule += ["---"] * 3
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(rule) + "|"]
    columns: list[list[float]] = [[] for _ in range(2 * len(spans))]
    for problem, seed in sorted({(p, s) for p, s, _ in by}):
        ref, mine = by.get((problem, seed, REFERENCE)), by.get((problem, seed, other))
        if ref is None or mine is None:
            continue
        cells = [problem, str(seed)]
        for j, (lo, hi) in enumerate(spans):
            pair = []
            for k, rec in enumerate((ref, mine)):
                s = rec["seconds"]
                value = (s[hi - 1] - (s[lo - 1] if lo else 0.0)) / (hi - lo)
                columns[2 * j + k].append(value)
                pair.append(value)
            ratio = pair[1] / pair[0]
            cells += [f"{pair[0]:.3f} s", f"{pair[1]:.3f} s", f"{ratio:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    cells = []
    for j in range(len(spans)):
        b, m = (sum(c) / len(c) for c in columns[2 * j : 2 * j + 2])
        cells += [f"{b:.3f} s", f"{m:.3f} s", f"{m / b:.2f}"]
    lines.append("| all | | " + " | ".join(cells) + " |")
    return lines


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
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        help="write the page (NAME.md) and its figure (NAME.png) in --output "
        "from the stores alone",
    )
    p.add_argument(
        "--timing",
        action="store_true",
        help="with --report: a table of each store's seconds per answer, run by "
        "run (BoTorch's loop and one configuration), instead of the regret",
    )
    p.add_argument(
        "--name",
        default=None,
        help="the report's page and figure name (default pbo_regret_<seed set>)",
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
    if args.name is None:
        args.name = f"pbo_regret_{args.seed_set}"
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def main(argv: Sequence[str] | None = None) -> str | None:
    r"""Run (or, with ``--report``, report); the report's text.

    The report's page keeps the hand-written block (``<!-- hand -->`` ...
    ``<!-- /hand -->``) of the page it replaces.
    """
    args = parse_args(argv)
    if not args.report:
        run(args)
        return None
    if args.timing:
        return timing_page(args)
    # a later store's run replaces an earlier one's of the same key
    records = stores.latest(
        (r for store in args.store for r in stores.read(store)), key
    )
    budgets = sorted(args.budgets)
    text, verdict = report(records, args.seed_set, budgets)
    out = args.output / f"{args.name}.md"
    png = args.output / f"{args.name}.png"
    hand = reports.hand_written(out)
    args.output.mkdir(parents=True, exist_ok=True)
    plot(records, args.seed_set, png)
    reports.write(
        out,
        f"# Preferential BO regret, seed set `{args.seed_set}`\n\n"
        + (f"{hand}\n\n" if hand else "")
        + f"Page: `{reports.command('pbo_regret', args.argv)}` (from the "
        "stores alone; the runs: the same options without `--report`). "
        f"Stores: {', '.join(f'`{s.name}`' for s in args.store)}; figure: "
        f"`{png.name}`. Setting and columns: the docstring of "
        "`benchmarks/pbo_regret.py`. The time ratios divide seconds timed "
        "in the runs themselves: they compare only where the configurations "
        "ran interleaved in one session on idle cores (the untuned store's "
        "BoTorch runs were made in an earlier session than the default's; "
        "interleaved timings: `pbo_regret_timing*.md`). The machine, versions "
        "and threads of the runs: the last table.\n\n"
        f"{summary(verdict, budgets)}\n\n{text}\n",
    )
    print(out.read_text())
    return out.read_text()


def timing_page(args: argparse.Namespace) -> str:
    r"""``--report --timing``: the page of each store's time per answer
    (:func:`timing_table`, one section per store, in the order given)."""
    budgets = sorted(args.budgets)
    out = args.output / f"{args.name}.md"
    hand = reports.hand_written(out)
    lines = ["# Time per answer: the loop default against BoTorch's loop", ""]
    lines += [hand, ""] if hand else []
    lines += [
        f"Page: `{reports.command('pbo_regret', args.argv)}` (from the stores "
        "alone). Seconds per answer as `pbo_regret` times them (ask, then tell "
        "and the recommendation; the simulated person's answer not timed).",
        "",
    ]
    records = []
    for store in args.store:
        runs = stores.read(store)
        records += runs
        lines += [f"## `{store.name}`", ""]
        lines += [*timing_table(runs, args.seed_set, budgets), ""]
    lines += version_table(records)
    text = "\n".join(lines) + "\n"
    reports.write(out, text)
    print(text)
    return text
