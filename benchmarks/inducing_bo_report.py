r"""The report of ``inducing_bo.py``: paired statistics, tables and the plot.

Built from the JSONL store's records alone, so it can be rewritten at any time
(``python -m benchmarks inducing_bo --report-only``). The text between the
markers ``<!-- hand -->`` and ``<!-- /hand -->`` of an existing report (the
hand-written findings) is kept when the report is rewritten.

Every comparison is paired over the seeds that both methods completed: the
mean ± s.e. of the per-seed differences, wins / ties / losses, the two-sided
Wilcoxon signed-rank p-value (ties dropped) and the two-sided sign-test
p-value.
"""

from __future__ import annotations

import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

import torch
from scipy.stats import binomtest, wilcoxon

from benchmarks.harness import environment, reports

#: The thread setting the page's command line gives.
OMP = {"OMP_NUM_THREADS": "1"}
REFERENCES = {
    "elbo_learned": "SVGP, inducing points learned on the ELBO",
    "exact_gp": "exact GP (SingleTaskGP)",
}


def mean_se(values: list[float]) -> tuple[float, float]:
    r"""Mean and standard error (``nan`` for one value)."""
    t = torch.tensor(values, dtype=torch.float64)
    se = float(t.std() / math.sqrt(len(t))) if len(t) > 1 else math.nan
    return float(t.mean()), se


def fmt(mean: float, se: float, digits: int = 3) -> str:
    r"""``mean ± se`` to ``digits`` significant digits."""
    if not math.isfinite(se):
        return f"{mean:.{digits}g}"
    return f"{mean:.{digits}g} ± {se:.2g}"


def paired(a: list[float], b: list[float]) -> dict:
    r"""Paired statistics of ``a - b`` (lower is better for ``a`` on wins).

    Returns:
        ``{"mean", "se", "wins", "ties", "losses", "p_wilcoxon", "p_sign"}``;
        the p-values are 1 when all pairs tie.
    """
    d = [x - y for x, y in zip(a, b, strict=True)]
    wins = sum(v < 0 for v in d)
    losses = sum(v > 0 for v in d)
    nonzero = [v for v in d if v != 0]
    p_w = float(wilcoxon(nonzero).pvalue) if len(nonzero) > 0 else 1.0
    p_s = float(binomtest(wins, wins + losses).pvalue) if wins + losses else 1.0
    mean, se = mean_se(d)
    return {
        "mean": mean,
        "se": se,
        "wins": wins,
        "ties": len(d) - wins - losses,
        "losses": losses,
        "p_wilcoxon": p_w,
        "p_sign": p_s,
    }


def fmt_paired(s: dict) -> str:
    r"""``mean ± se | W/T/L | p_W | p_sign`` cells of a paired comparison."""
    return (
        f"{fmt(s['mean'], s['se'])} | {s['wins']}/{s['ties']}/{s['losses']} | "
        f"{s['p_wilcoxon']:.2g} | {s['p_sign']:.2g}"
    )


def organise(records: list[dict]) -> tuple[dict, dict]:
    r"""``runs[(problem, m)][method][seed]``, ``panels[(problem, m, round)][seed]``."""
    runs: dict = defaultdict(lambda: defaultdict(dict))
    panels: dict = defaultdict(dict)
    for r in records:
        if r["kind"] == "run":
            runs[(r["problem"], r["m"])][r["method"]][r["seed"]] = r
        elif r["kind"] == "panel":
            panels[(r["problem"], r["m"], r["round"])][r["seed"]] = r
    return runs, panels


def common_seeds(per_method: dict, methods: list[str]) -> list[int]:
    r"""Seeds that every one of ``methods`` completed, sorted."""
    sets = [set(per_method.get(m, {})) for m in methods]
    return sorted(set.intersection(*sets)) if sets else []


def final(per_method: dict, method: str, seeds: list[int]) -> list[float]:
    return [per_method[method][s]["rounds"][-1]["regret"] for s in seeds]


def regret_table(runs: dict, labels: dict) -> list[str]:
    rows = [
        "| problem | M | method | seeds | initial design | final regret "
        "(mean ± s.e.) | median | allocator s / round |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (problem, m), per_method in runs.items():
        for method, by_seed in per_method.items():
            seeds = sorted(by_seed)
            fin = final(per_method, method, seeds)
            r0 = [by_seed[s]["regret0"] for s in seeds]
            secs = [x["alloc_s"] for s in seeds for x in by_seed[s]["rounds"]]
            rows.append(
                f"| {problem} | {m} | {labels.get(method, method)} | {len(seeds)} | "
                f"{fmt(*mean_se(r0))} | {fmt(*mean_se(fin))} | "
                f"{reports.median(fin):.3g} | {sum(secs) / len(secs):.3f} |"
            )
    return rows


def comparison_table(
    runs: dict, labels: dict, pairs: list[tuple[str, str]]
) -> list[str]:
    rows = [
        "| problem | M | comparison (A − B) | seeds | mean ± s.e. | A lower / tie / "
        "higher | p Wilcoxon | p sign |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (problem, m), per_method in runs.items():
        for a, b in pairs:
            seeds = common_seeds(per_method, [a, b])
            if len(seeds) < 2:
                continue
            s = paired(final(per_method, a, seeds), final(per_method, b, seeds))
            rows.append(
                f"| {problem} | {m} | {labels.get(a, a)} − {labels.get(b, b)} | "
                f"{len(seeds)} | {fmt_paired(s)} |"
            )
    return rows


def alpha_table(runs: dict, labels: dict) -> list[str]:
    r"""Per ENT-DPP α (and the controls): the quality's spread, the picks that
    differ from CVR and anchored CVR, and the paired final regret."""
    rows = [
        "| problem | M | method | min q (median; smallest) | IG spread (median) "
        "| picks ≠ CVR / round | picks ≠ anchored / round | regret − CVR | "
        "W/T/L | p | regret − anchored | W/T/L | p |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (problem, m), per_method in runs.items():
        for method, by_seed in per_method.items():
            if method == "cvr":
                continue
            recs = [x for s in sorted(by_seed) for x in by_seed[s]["rounds"]]
            qs = [x["q_min"] for x in recs if "q_min" in x]
            igs = [x["ig_range"] for x in recs if x.get("ig_range") is not None]
            q_cell = (
                f"{reports.median(qs):.4g}; {min(qs):.3g}" if qs else "1 (no quality)"
            )
            ig_cell = f"{reports.median(igs):.3g}" if igs else "–"
            cells = [
                f"{sum(x['diff_cvr'] for x in recs) / len(recs):.1f}",
                f"{sum(x['diff_anchored'] for x in recs) / len(recs):.1f}",
            ]
            for ref in ("cvr", "cvr_anchored"):
                seeds = common_seeds(per_method, [method, ref])
                if method == ref or len(seeds) < 2:
                    cells.append("– | – | –")
                    continue
                s = paired(
                    final(per_method, method, seeds), final(per_method, ref, seeds)
                )
                cells.append(
                    f"{fmt(s['mean'], s['se'])} | {s['wins']}/{s['ties']}/{s['losses']}"
                    f" | {s['p_wilcoxon']:.2g}"
                )
            rows.append(
                f"| {problem} | {m} | {labels.get(method, method)} | {q_cell} | "
                f"{ig_cell} | {' | '.join(cells)} |"
            )
    return rows


def panel_table(panels: dict, labels: dict) -> list[str]:
    r"""Accuracy near the optimum of every model fitted to the same data."""
    rows = [
        "| problem | M | round (n) | model | seeds | RMSE top 5 % | − CVR (W/T/L, "
        "p) | max-value z | mean abs z | 90 % coverage | μ(x*) − f* |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (problem, m, r), by_seed in sorted(panels.items()):
        seeds = sorted(by_seed)
        n = by_seed[seeds[0]]["n"]
        names = list(by_seed[seeds[0]]["scores"])
        for name in names:
            ok = [s for s in seeds if name in by_seed[s]["scores"]]
            sc = [by_seed[s]["scores"][name] for s in ok]
            rmse = [x["rmse_top"] for x in sc]
            cvr = [by_seed[s]["scores"]["cvr"]["rmse_top"] for s in ok]
            if name == "cvr" or len(ok) < 2:
                vs = "–"
            else:
                st = paired(rmse, cvr)
                vs = (
                    f"{fmt(st['mean'], st['se'], 2)} ({st['wins']}/{st['ties']}/"
                    f"{st['losses']}, {st['p_wilcoxon']:.2g})"
                )
            z = [x["max_z"] for x in sc]
            rows.append(
                f"| {problem} | {m} | {r} ({n}) | "
                f"{labels.get(name, REFERENCES.get(name, name))} | {len(ok)} | "
                f"{fmt(*mean_se(rmse))} | {vs} | {fmt(*mean_se(z), 2)} | "
                f"{sum(abs(v) for v in z) / len(z):.2g} | "
                f"{sum(x['max_cover'] for x in sc)}/{len(sc)} | "
                f"{fmt(*mean_se([x['mean_at_star'] for x in sc]), 2)} |"
            )
    return rows


def own_accuracy_table(runs: dict, labels: dict) -> list[str]:
    rows = [
        "| problem | M | method | RMSE top 5 %, first round | last round | "
        "max-value z, last round | 90 % coverage, last round |",
        "|---|---|---|---|---|---|---|",
    ]
    for (problem, m), per_method in runs.items():
        for method, by_seed in per_method.items():
            seeds = sorted(by_seed)
            first = [by_seed[s]["rounds"][0]["rmse_top"] for s in seeds]
            last = [by_seed[s]["rounds"][-1] for s in seeds]
            rows.append(
                f"| {problem} | {m} | {labels.get(method, method)} | "
                f"{fmt(*mean_se(first))} | "
                f"{fmt(*mean_se([x['rmse_top'] for x in last]))} | "
                f"{fmt(*mean_se([x['max_z'] for x in last]), 2)} | "
                f"{sum(x['max_cover'] for x in last)}/{len(last)} |"
            )
    return rows


def plot(runs: dict, labels: dict, args, path: Path) -> None:
    r"""Per cell: regret curves (median, IQR), the α sweep's paired difference
    to CVR and to anchored CVR, and ENT-DPP's picks differing from anchored
    CVR's and CVR's per round."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(runs.items())
    fig, axes = plt.subplots(
        len(cells), 3, figsize=(14, 3.8 * len(cells)), squeeze=False
    )
    shown = ["cvr", "cvr_anchored", "ent_0.5", "ent_0.002", "gir"]
    for row, ((problem, m), per_method) in zip(axes, cells, strict=True):
        ax = row[0]
        for method in [k for k in shown if k in per_method]:
            seeds = sorted(per_method[method])
            curves = torch.tensor(
                [
                    [per_method[method][s]["regret0"]]
                    + [x["regret"] for x in per_method[method][s]["rounds"]]
                    for s in seeds
                ],
                dtype=torch.float64,
            ).clamp_min(1e-6)
            q = torch.quantile(
                curves, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64), 0
            )
            x = [args.num_init + i * args.batch_size for i in range(curves.shape[1])]
            (line,) = ax.plot(x, q[1], label=labels.get(method, method))
            ax.fill_between(x, q[0], q[2], color=line.get_color(), alpha=0.12)
        ax.set_yscale("log")
        ax.set(title=f"{problem}, M = {m}: regret (median, IQR)", xlabel="evaluations")
        ax.legend(fontsize=7)
        ents = sorted((float(k[4:]), k) for k in per_method if k.startswith("ent_"))
        for ref, colour, shift in (
            ("cvr", "C0", 0.93),
            ("cvr_anchored", "C1", 1.07),
        ):
            xs, ys, es = [], [], []
            for alpha, key in ents:
                seeds = common_seeds(per_method, [key, ref])
                if len(seeds) < 2:
                    continue
                s = paired(final(per_method, key, seeds), final(per_method, ref, seeds))
                xs.append(alpha * shift)
                ys.append(s["mean"])
                es.append(s["se"])
            if not xs:
                continue
            row[1].errorbar(
                xs,
                ys,
                es,
                fmt="o-",
                color=colour,
                capsize=3,
                label=f"ENT-DPP − {labels.get(ref, ref)}",
            )
        drawn = bool(row[1].lines)
        row[1].axhline(0, color="k", lw=0.8)
        row[1].set(
            title="ENT-DPP final regret − reference, paired",
            xlabel="α",
            xscale="log" if drawn else "linear",
        )
        if drawn:
            row[1].legend(fontsize=7)
        for i, (alpha, key) in enumerate(ents):
            seeds = sorted(per_method[key])
            rounds = len(per_method[key][seeds[0]]["rounds"])
            for field, style in (("diff_anchored", "o-"), ("diff_cvr", ":")):
                mean_diff = [
                    sum(per_method[key][s]["rounds"][r][field] for s in seeds)
                    / len(seeds)
                    for r in range(rounds)
                ]
                label = f"α = {alpha:g}" if field == "diff_anchored" else None
                row[2].plot(range(rounds), mean_diff, style, color=f"C{i}", label=label)
        row[2].set(
            title=f"picks of {m} ≠ anchored CVR (—), ≠ CVR (···)",
            xlabel="round",
        )
        row[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def machine_note(records: list[dict]) -> str:
    r"""What is known of the machines: the runs' (recorded with each run since
    these fields exist: the machine, then the thread settings, then the
    processor and the library versions) and the one building this page, as
    measured."""
    runs = [r for r in records if r["kind"] == "run"]
    seen = [r["machine"] for r in runs if "machine" in r]
    load = environment.load_average()
    here = (
        f"this page was built on {environment.machine()}, load average "
        f"{'n/a' if load is None else f'{load:.2f}'}, torch {torch.__version__}."
    )
    versions = Counter(
        ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        for r in runs
        if "versions" in r
    )
    unversioned = len(runs) - versions.total()
    parts = [f"{v} ({n} runs)" for v, n in sorted(versions.items())]
    if unversioned:
        parts.append(f"not recorded ({unversioned} runs)")
    versions_note = f"the runs' versions: {', '.join(parts) or 'no runs'}"
    threads = Counter(r["threads"] for r in runs if "threads" in r)
    unrecorded = len(runs) - threads.total()
    parts = [f"`{t}` ({n} runs)" for t, n in sorted(threads.items())]
    if unrecorded:
        parts.append(f"not recorded ({unrecorded} runs)")
    threads_note = f"the runs' threads: {', '.join(parts) or 'no runs'}"
    if not seen:
        return (
            "the store does not record the runs' machine (cores, load, "
            f"OMP_NUM_THREADS); {threads_note}; {versions_note}; {here}"
        )
    cpus = sorted({m["cpus"] for m in seen})
    omp = sorted({str(m["omp"]) for m in seen})
    loads = [m["load"] for m in seen]
    return (
        f"{len(seen)} of the runs recorded their machine: "
        f"{'/'.join(map(str, cpus))} cores, OMP_NUM_THREADS={'/'.join(omp)}, load "
        f"average {min(loads):.2f}–{max(loads):.2f} at their end; {threads_note}; "
        f"{versions_note}; {here}"
    )


def build(records: list[dict], args, argv: list[str] | None, labels: dict) -> str:
    r"""The markdown report of ``records``; writes the plot to ``args.plot``.

    Args:
        records: The store's records of one configuration.
        args: ``inducing_bo.py``'s parsed options.
        argv: The command line (``None``: ``sys.argv``).
        labels: Display names of the methods.
    """
    runs, panels = organise(records)
    if not runs:
        return (
            "# High-throughput BO: inducing-point allocators\n\nNo runs stored yet.\n"
        )
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    plot(runs, labels, args, args.plot)
    seconds = sum(r.get("seconds", 0.0) for r in records if r["kind"] == "run")
    n_runs = sum(len(s) for c in runs.values() for s in c.values())
    hand = reports.hand_written(args.output)
    cmd = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--report-only"]
    pairs = [
        ("ent_0.5", "cvr"),
        ("ent_0.5", "cvr_anchored"),
        ("cvr_anchored", "cvr"),
        ("gir", "cvr"),
        ("gir", "ent_0.5"),
        ("ent_0.05", "cvr_anchored"),
    ]
    return "\n".join(
        [
            "# High-throughput BO: does ENT-DPP's quality term help? (SVGP + Thompson)",
            "",
            f"Command: `{reports.command('inducing_bo', cmd, OMP)}` (runs go to "
            f"`{args.store.name}`; `--report-only` rebuilds this page from it).",
            "",
            f"Set-up: seeds {args.seeds[0]} … {args.seeds[-1]} (fixed before the "
            f"run, the same for every method), {args.num_init} uniform initial "
            f"points, {args.rounds} rounds of B = {args.batch_size} Thompson "
            f"samples, {args.adam_steps} Adam steps (lr {args.lr}) per round; "
            f"Thompson: {args.raw_samples} Sobol points, {args.num_restarts} "
            f"restarts, {args.ts_steps} steps per path. Accuracy on 8192 Sobol "
            "test points (top 5 %: 409 points). Final regret = f* − best "
            "evaluated value after the last round.",
            "",
            hand,
            "",
            "## Final regret",
            "",
            *regret_table(runs, labels),
            "",
            "## Paired comparisons of the final regret",
            "",
            *comparison_table(runs, labels, pairs),
            "",
            f"![regret curves, α sweep and differing picks]({args.plot.name})",
            "",
            "## The α sweep: what the quality term does",
            "",
            "min q: the smallest normalised quality over the inputs, per round "
            "(the largest is 1); IG spread: max − min of the information gain. "
            "Picks ≠: how many of the M points differ from CVR's / anchored CVR's "
            "chosen on the same state (same kernel and previous model). α = 1 is "
            "CVR exactly (q ≡ 1) and is not run.",
            "",
            *alpha_table(runs, labels),
            "",
            "## Accuracy near the optimum, every model on the same data",
            "",
            "In the CVR runs, at the first and last round, each method's points "
            "(chosen with the same kernel and previous model), inducing points "
            "learned on the ELBO (started at CVR's) and an exact GP are fitted to "
            "the same data. RMSE of the posterior mean on the test points of top 5 "
            "% true value; max-value z: (f* − E[max]) / sd[max] under 128 joint "
            "posterior samples of the maximum over those points, the model's own "
            "top 5 % and x* (0 and coverage 90 % if calibrated; > 0: the model "
            "underestimates the maximum); μ(x*) − f*: posterior mean error at the "
            "maximiser.",
            "",
            *panel_table(panels, labels),
            "",
            "## Accuracy near the optimum of each method's own model",
            "",
            "Each run's SVGP on its own data (the data differ between methods).",
            "",
            *own_accuracy_table(runs, labels),
            "",
            f"{n_runs} runs, {seconds / 60:.0f} min of compute in all (sum over "
            f"runs); {machine_note(records)} Seconds are indicative.",
            "",
        ]
    )
