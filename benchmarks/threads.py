r"""prefbo's speed as users run it: no thread variable, idle and under load.

Three thread settings, each in fresh interpreters so that the setting is in
the environment before torch is imported:

- ``as users run it``: no thread variable; prefbo's thread policy
  (:mod:`prefbo.utils.threads`) decides, BoTorch runs torch's default threads;
- ``torch default``: ``PREFBO_THREADS=off``, both libraries on torch's
  default threads (prefbo without its policy: the state before it);
- ``one thread``: ``OMP_NUM_THREADS=1 MKL_NUM_THREADS=1`` for both.

Each is measured on an idle machine and under load (``--load 2``: two other
CPU-bound processes for the duration, each bounded in time and stopped at
the end). Parts:

- ``fit``: construction plus ``fit_gpytorch_mll`` of prefbo's
  ``PairwiseLaplaceGP`` and BoTorch's ``PairwiseGP`` on the same ``n``
  designs (4-d) and ``5 n`` probit answers;
- ``cvr``: ``ConditionalVarianceReduction`` against BoTorch's
  ``GreedyVarianceReduction`` (the same greedy), ``N`` candidates, 100
  inducing points;
- ``loop``: ``pbo_regret`` (BoTorch's loop and the default,
  6 problems, σ = 0.1, 2 seeds of the tuning set, 60 answers), time per
  answer over answers 1-30 and 31-60.

The page records the machine, the library versions and each setting's
threads. Run: ``python -m benchmarks threads`` (about an hour on 2 cores;
``--quick`` for a few minutes), the page goes to
``benchmarks/results/threads.md``; with ``--store`` every measurement is
appended to a JSON-lines store, and ``--report`` writes the page from the
stores alone.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import environment, reports, stores
from benchmarks.harness.runner import REPO, child_command

RESULTS = Path(__file__).resolve().parent / "results"
THREAD_VARIABLES = environment.THREAD_VARIABLES
SETTINGS = {
    "users": {},
    "default": {"PREFBO_THREADS": "off"},
    "one": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
}
TITLES = {
    "users": "as users run it",
    "default": "torch default (no policy)",
    "one": "one thread",
}
FIT_SIZES = (100, 200, 400, 800, 1600)
CVR_SIZES = (1_000, 10_000, 100_000)
BOTORCH_FIT_MAX = 800  # BoTorch's fit at n = 1,600 takes minutes
LARGE = 800  # fits and CVR from this size on are timed once (minutes each)


# ------------------------------------------------------------- children
def _fit_problem(n: int, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 4, generator=g, dtype=torch.float64)
    centre = torch.tensor([0.3, 0.5, 0.6, 0.4], dtype=torch.float64)
    u = -(X - centre).square().sum(-1) * 4
    m = 5 * n
    first = torch.randint(n, (m,), generator=g)
    second = (first + 1 + torch.randint(n - 1, (m,), generator=g)) % n
    z = (u[first] - u[second]) / math.sqrt(2)
    wins = torch.rand(m, generator=g, dtype=torch.float64) < torch.special.ndtr(z)
    pairs = torch.stack([first, second], -1)
    return X, torch.where(wins.unsqueeze(-1), pairs, pairs.flip(-1))


def child_fit(library: str, n: int) -> float:
    r"""Seconds to build and fit one library's model on the ``n`` problem."""
    import warnings

    from botorch.fit import fit_gpytorch_mll

    X, comps = _fit_problem(n)
    if library == "prefbo":
        from prefbo.mlls import PairwiseLaplaceMLL
        from prefbo.models import PairwiseLaplaceGP as Model

        make_mll = PairwiseLaplaceMLL
    else:
        from botorch.models.pairwise_gp import PairwiseGP as Model
        from botorch.models.pairwise_gp import (
            PairwiseLaplaceMarginalLogLikelihood as make_mll,
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model = Model(X, comps)
        fit_gpytorch_mll(make_mll(model.likelihood, model))
        return time.perf_counter() - t0


def child_cvr(library: str, n: int, m: int = 100) -> float:
    r"""Seconds of one greedy variance reduction over ``n`` candidates."""
    import torch
    from gpytorch.kernels import RBFKernel, ScaleKernel

    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 4, generator=g, dtype=torch.float64)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=4)).to(torch.float64)
    with torch.no_grad():
        kernel.base_kernel.lengthscale = torch.full((1, 4), 0.3, dtype=torch.float64)
    if library == "prefbo":
        from prefbo.inducing import ConditionalVarianceReduction as Allocator
    else:
        from botorch.models.utils.inducing_point_allocators import (
            GreedyVarianceReduction as Allocator,
        )
    allocator = Allocator()
    allocator.allocate_inducing_points(X[:300], kernel, 20, torch.Size())  # warm
    t0 = time.perf_counter()
    allocator.allocate_inducing_points(X, kernel, m, torch.Size())
    return time.perf_counter() - t0


def child(part: str, library: str, size: int, repeats: int) -> None:
    r"""Print the median seconds of ``repeats`` runs and the threads seen."""
    import torch

    run = {"fit": child_fit, "cvr": child_cvr}[part]
    run(library, min(size, 100))  # warm-up: imports, first calls
    times = [run(library, size) for _ in range(repeats)]
    print(
        json.dumps(
            {
                "seconds": statistics.median(times),
                "torch_threads": torch.get_num_threads(),
            }
        )
    )


# ------------------------------------------------------------- the parent
class Load:
    r"""``count`` busy processes, each ending by itself after ``limit`` s
    (and stopped when the block ends)."""

    def __init__(self, count: int, limit: float) -> None:
        self.count, self.limit = count, limit
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Load:
        spin = (
            f"import time\nend = time.time() + {self.limit}\n"
            "while time.time() < end: pass"
        )
        self.procs = [
            subprocess.Popen([sys.executable, "-c", spin]) for _ in range(self.count)
        ]
        time.sleep(1.0)  # scheduled before the measurement starts
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def thread_environment(setting: str) -> dict[str, str]:
    r"""This process's environment with only ``setting``'s thread variables."""
    return {**environment.without_thread_variables(), **SETTINGS[setting]}


def measure(part: str, library: str, size: int, setting: str, repeats: int) -> dict:
    cmd = child_command("threads", "--child", part, library, str(size), str(repeats))
    proc = subprocess.run(
        cmd,
        env=thread_environment(setting),
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=REPO,
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def loop_times(setting: str, seeds: int, answers: int, store: Path) -> dict:
    r"""Run ``pbo_regret`` (BoTorch's loop and the default) under
    ``setting``; mean seconds per answer over answers 1-30 and 31-60."""
    cmd = child_command("pbo_regret", "--seed-set", "tuning")
    cmd += ["--configs", "botorch", "default", "--seeds", str(seeds)]
    cmd += ["--sigmas", "0.1", "--answers", str(answers), "--budgets", str(answers)]
    cmd += ["--store", str(store)]
    subprocess.run(
        cmd,
        env=thread_environment(setting),
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    out: dict[str, dict[str, list[float]]] = {}
    half = answers // 2
    for line in store.read_text().splitlines():
        rec = json.loads(line)
        s = rec["seconds"]
        cell = out.setdefault(rec["config"], {"first": [], "second": []})
        cell["first"].append(s[half - 1] / half)
        cell["second"].append((s[-1] - s[half - 1]) / (answers - half))
    return {
        config: {k: statistics.mean(v) for k, v in cell.items()}
        for config, cell in out.items()
    }


#: The versions the page records (threadpoolctl: prefbo's thread policy).
VERSIONED = ("torch", "botorch", "gpytorch", "numpy", "scipy", "threadpoolctl")


def machine() -> str:
    r"""The machine, torch's default threads on it and the versions."""
    import torch

    return (
        f"{environment.machine()} (torch's default threads here: "
        f"{torch.get_num_threads()}); {environment.versions_text(VERSIONED)}"
    )


def _s(x: Any) -> str:
    if not isinstance(x, float):
        return str(x)
    return f"{x:.3g} s" if x < 100 else f"{x:.0f} s"


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}" if isinstance(a, float) and isinstance(b, float) else "-"


def run(args: argparse.Namespace) -> str:
    r"""Measure (appending each result to ``--store`` where given) and
    return the page; with ``--report``, the page of the stores alone."""
    if args.report:
        results = load_results(args.store)
    else:
        results = measure_all(args)
    return page(results, args, reports.hand_written(args.output))


def _record(store: Path | None, key: tuple, value: Any) -> None:
    if store is not None:
        stores.append(store, {"key": list(key), "value": value})


def load_results(paths: list[Path]) -> dict[tuple, Any]:
    r"""The results in JSON-lines ``stores`` (a later line replaces an
    earlier one of the same key)."""
    out: dict[tuple, Any] = {}
    for path in paths:
        for rec in stores.read(path):
            out[tuple(rec["key"])] = rec["value"]
    return out


def measure_all(args: argparse.Namespace) -> dict[tuple, Any]:
    r"""Every measurement of ``args``' conditions, settings and parts."""
    store = args.store[0] if args.store else None
    results: dict[tuple, Any] = {}

    def keep(key: tuple, value: Any) -> None:
        results[key] = value
        _record(store, key, value)
        print(key, value, flush=True)

    keep(("machine",), machine())
    settings = {"idle": args.settings, "load": args.load_settings}
    loop_settings = {"idle": args.loop_settings, "load": ["users"]}
    for condition in args.conditions:
        busy = args.load if condition == "load" else 0
        keep((condition, "load average"), environment.load_average())
        keep((condition, "busy processes"), busy)
        with Load(busy, limit=args.limit) if busy else _nothing():
            for part, sizes in (("fit", args.fit_sizes), ("cvr", args.cvr_sizes)):
                for size in sizes:
                    for setting in settings[condition]:
                        for library in ("prefbo", "botorch"):
                            if (
                                part == "fit"
                                and library == "botorch"
                                and size > args.botorch_fit_max
                            ):
                                continue
                            repeats = (
                                args.repeats if size < LARGE else args.large_repeats
                            )
                            value = measure(part, library, size, setting, repeats)
                            value["runs"] = repeats
                            keep((condition, part, size, setting, library), value)
            if args.loop:
                seeds = args.seeds if condition == "idle" else args.load_seeds
                for setting in loop_settings[condition]:
                    with tempfile.TemporaryDirectory() as tmp:
                        loop_store = Path(tmp) / "loop.jsonl"
                        value = loop_times(setting, seeds, args.answers, loop_store)
                    keep((condition, "loop", setting), value)
    return results


def page(results: dict[tuple, Any], args: argparse.Namespace, hand: str = "") -> str:
    r"""The results page; ``hand``, the hand-written block of the page it
    replaces (:func:`benchmarks.harness.reports.hand_written`), follows the
    title."""
    conditions = [
        (c, results.get((c, "busy processes"), 0))
        for c in ("idle", "load")
        if (c, "load average") in results
    ]
    settings = {"idle": args.settings, "load": args.load_settings}
    lines = [
        "# prefbo's speed as users run it: threads, idle and under load",
        "",
        *([hand, ""] if hand else []),
        f"Machine: {results.get(('machine',), machine())}. Command: "
        f"`{reports.command('threads', args.argv)}`. Settings (each in fresh "
        "interpreters): "
        + "; ".join(
            f"**{TITLES[s]}**: `{SETTINGS[s] or 'no variable'}`" for s in SETTINGS
        )
        + f". Load: {args.load} other busy processes. Medians of the runs "
        f"in each row's last column (by default {args.repeats}, and one from "
        f"n, N = {LARGE} on).",
        "",
    ]
    lines += [
        "One-minute load average when each condition began (before its own "
        "load): "
        + ", ".join(f"{c} {results[(c, 'load average')]:.2f}" for c, _ in conditions)
        + ".",
        "",
    ]
    for part, sizes, unit in (
        ("fit", args.fit_sizes, "n"),
        ("cvr", args.cvr_sizes, "N"),
    ):
        for condition, _ in conditions:
            lines += [
                f"## {part}, {condition}",
                "",
                f"| {unit} | setting | prefbo | BoTorch | BoTorch / prefbo | runs |",
                "|---|---|---|---|---|---|",
            ]
            for size in sizes:
                for setting in settings[condition]:
                    p = results.get((condition, part, size, setting, "prefbo"), {})
                    b = results.get((condition, part, size, setting, "botorch"), {})
                    ps, bs = (
                        p.get("seconds", p.get("error", "-")),
                        b.get("seconds", b.get("error", "skipped")),
                    )
                    runs = p.get("runs", args.repeats if size < LARGE else 1)
                    cells = [str(size), TITLES[setting], _s(ps), _s(bs), _ratio(bs, ps)]
                    cells.append(str(runs))
                    lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    if args.loop:
        lines += [
            "## The loop: seconds per answer",
            "",
            "| condition | setting | BoTorch 1-30 | default 1-30 | ratio "
            "| BoTorch 31-60 | default 31-60 | ratio |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for condition, _ in conditions:
            for setting in args.loop_settings:
                r = results.get((condition, "loop", setting))
                if not r:
                    continue
                b, d = r["botorch"], r["default"]
                cells = [condition, TITLES[setting]]
                for half in ("first", "second"):
                    cells += [_s(b[half]), _s(d[half]), _ratio(d[half], b[half])]
                lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += slowdowns(results, args, conditions)
    return "\n".join(lines) + "\n"


def slowdowns(results: dict, args: argparse.Namespace, conditions: list) -> list[str]:
    r"""Load over idle time per library, as users run it."""
    if len(conditions) < 2 or "users" not in args.settings:
        return []
    out = [
        "## Slowdown under load, as users run it (load time / idle time)",
        "",
        "| work | prefbo | BoTorch |",
        "|---|---|---|",
    ]
    for part, sizes in (("fit", args.fit_sizes), ("cvr", args.cvr_sizes)):
        for size in sizes:
            cells = []
            for library in ("prefbo", "botorch"):
                idle = results.get(("idle", part, size, "users", library), {}).get(
                    "seconds"
                )
                load = results.get(("load", part, size, "users", library), {}).get(
                    "seconds"
                )
                cells.append(f"{load / idle:.1f}x" if idle and load else "-")
            out.append(f"| {part} {size} | {cells[0]} | {cells[1]} |")
    if args.loop and "users" in args.loop_settings:
        idle, load = (
            results.get(("idle", "loop", "users")),
            results.get(("load", "loop", "users")),
        )
        if idle and load:
            for half in ("first", "second"):
                out.append(
                    f"| loop, answers {'1-30' if half == 'first' else '31-60'} | "
                    f"{load['default'][half] / idle['default'][half]:.1f}x | "
                    f"{load['botorch'][half] / idle['botorch'][half]:.1f}x |"
                )
    return out + [""]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="n = 200, 800; N = 10,000; no loop; 1 repeat",
    )
    p.add_argument("--fit-sizes", type=int, nargs="*", default=list(FIT_SIZES))
    p.add_argument("--cvr-sizes", type=int, nargs="*", default=list(CVR_SIZES))
    p.add_argument(
        "--botorch-fit-max",
        type=int,
        default=BOTORCH_FIT_MAX,
        help="BoTorch's fit only up to this n",
    )
    p.add_argument(
        "--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS)
    )
    p.add_argument(
        "--loop-settings", nargs="+", default=["users", "one"], choices=list(SETTINGS)
    )
    p.add_argument(
        "--no-loop", dest="loop", action="store_false", help="skip the loop part"
    )
    p.add_argument("--seeds", type=int, default=2, help="loop: seeds per problem")
    p.add_argument(
        "--load-settings",
        nargs="+",
        default=["users", "default"],
        choices=list(SETTINGS),
        help="fit and cvr settings under load (the loop: as users run it)",
    )
    p.add_argument(
        "--load-seeds", type=int, default=1, help="loop under load: seeds per problem"
    )
    p.add_argument("--answers", type=int, default=60, help="loop: answers per run")
    p.add_argument(
        "--load",
        type=int,
        default=2,
        help="busy processes for the load runs (0: idle only)",
    )
    p.add_argument(
        "--limit",
        type=float,
        default=3600.0,
        help="seconds a busy process lives at most",
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--large-repeats",
        type=int,
        default=1,
        help=f"runs per measurement from n, N = {LARGE} on",
    )
    p.add_argument("--output", type=Path, default=RESULTS / "threads.md")
    p.add_argument(
        "--conditions",
        nargs="+",
        default=["idle", "load"],
        choices=["idle", "load"],
        help="measure on an idle machine, under load, or both",
    )
    p.add_argument(
        "--store",
        type=Path,
        nargs="+",
        default=None,
        help="JSON-lines stores: measurements append to the first; --report reads all",
    )
    p.add_argument(
        "--report", action="store_true", help="write the page from --store alone"
    )
    args = p.parse_args(argv)
    if args.report and not args.store:
        p.error("--report needs --store")
    if args.quick:
        args.fit_sizes, args.cvr_sizes, args.loop, args.repeats = (
            [200, 800],
            [10_000],
            False,
            1,
        )
    if args.load == 0 and "load" in args.conditions:
        args.conditions = [c for c in args.conditions if c != "load"]
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def main(argv: list[str] | None = None) -> str:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, part, library, size, repeats = sys.argv
        child(part, library, int(size), int(repeats))
        return ""
    args = parse_args(argv)
    text = run(args)
    reports.write(args.output, text)
    print(text)
    return text
