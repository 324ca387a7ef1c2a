r"""Benchmark prefbo's inducing-point allocators against BoTorch's.

Compares, in the same run and on the same inputs and kernel:

- prefbo ``ConditionalVarianceReduction`` (CVR) vs BoTorch
  ``GreedyVarianceReduction`` (the same greedy; the selections are checked to
  be identical);
- prefbo ``EntropyDPP`` (``α = 0.5``, Thompson samples of the maximum on 1024
  candidates, 128 samples) vs BoTorch ``GreedyImprovementReduction``
  (``maximize=True``); both use the same previous-step model.

Set-up: ``N`` inputs uniform on ``[0, 1]^6`` (seeded), ``M = 100`` inducing
points, float64, kernel ``ScaleKernel(MaternKernel(ν = 5/2, ARD))`` with
lengthscales ``0.4 … 0.9``. The previous-step model is a ``SingleTaskGP`` on
200 noisy evaluations of a 6-d Hartmann-like sum of bumps, with fixed
hyperparameters (no fitting: only allocation is timed). A regression model is
used because BoTorch's ``GreedyImprovementReduction`` calls
``model.posterior`` on all ``N`` inputs at once, which for a preference model
(dense joint covariance) would measure that model, not the allocator.

Method. Every (method, N) cell runs in two fresh Python subprocesses with
``OMP_NUM_THREADS=1`` (single-threaded torch; the development machine has two
shared cores). Each builds the data, kernel and model and runs the method once
on a small problem (warm-up), then measures:

- **time** (default ``malloc`` settings): wall-clock of
  ``allocate_inducing_points``, median of ``--repeats`` calls;
- **peak extra memory** (``MALLOC_MMAP_THRESHOLD_=131072``, so buffers above
  128 KiB are ``mmap``-ed and returned to the OS when freed and resident
  memory tracks live allocations): one call's peak resident set size minus
  the resident size just before it. The peak counter (``VmHWM``) is reset by
  writing ``5`` to ``/proc/self/clear_refs`` (Linux), then read from
  ``/proc/self/status``. torch's CPU allocations bypass Python's allocator,
  so ``tracemalloc`` would not see them; RSS does. It counts every page the
  call touches (kernel matrices, temporaries, outputs) at 4 KiB granularity;
  buffers under 128 KiB may reuse freed heap and go uncounted, so values
  under ~1 MiB are noise. The fixed threshold slows allocation-heavy code,
  which is why time is measured in a separate process.

Ratios compare prefbo with BoTorch from the same run: speed-up =
BoTorch time / prefbo time, memory fraction = prefbo memory / BoTorch memory.
BoTorch forms the ``N x N`` kernel matrix (80 GB at ``N = 1e5``), so its cells
above ``--skip-botorch-above`` are reported as "skipped".

Usage::

    python -m benchmarks inducing_allocators            # N = 1e3, 1e4, 1e5
    python -m benchmarks inducing_allocators --quick    # a few seconds
    python -m benchmarks inducing_allocators --sizes 1000,10000 --repeats 5

The markdown report is printed and written to
``benchmarks/results/inducing_allocators.md`` (or ``--output``; ``--quick``
writes to ``<tempdir>/prefbo-quick/``); progress goes
to stderr. Timings on a shared machine can be inflated by other processes
(the report records the load average before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import environment, reports
from benchmarks.harness.runner import REPO, child_command

METHODS = {
    "cvr": ("prefbo CVR", "botorch_gvr"),
    "botorch_gvr": ("BoTorch GreedyVarianceReduction", None),
    "ent": ("prefbo EntropyDPP (α=0.5)", "botorch_gir"),
    "botorch_gir": ("BoTorch GreedyImprovementReduction", None),
}
D = 6
N_TRAIN = 200
RESULTS = Path(__file__).resolve().parent / "results" / "inducing_allocators.md"


def _status_kib(key: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"{key}:\s+(\d+) kB", text).group(1))


def _setup(n: int, seed: int):
    r"""Inputs, kernel and previous-step model (same for every method)."""
    import torch
    from botorch.models import SingleTaskGP
    from gpytorch.kernels import MaternKernel, ScaleKernel

    tkw = {"dtype": torch.float64}
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, D, generator=g, **tkw)
    kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=D)).to(**tkw)
    with torch.no_grad():
        kernel.base_kernel.lengthscale = torch.linspace(0.4, 0.9, D, **tkw)
        kernel.outputscale = torch.tensor(1.0, **tkw)
    g = torch.Generator().manual_seed(seed + 1)
    Xt = torch.rand(N_TRAIN, D, generator=g, **tkw)
    centres = torch.rand(4, D, generator=g, **tkw)
    f = torch.exp(-8 * (Xt[:, None] - centres).square().sum(-1)).sum(-1)
    Y = (f + 0.05 * torch.randn(N_TRAIN, generator=g, **tkw)).unsqueeze(-1)
    model = SingleTaskGP(Xt, Y)
    with torch.no_grad():
        model.covar_module.lengthscale = torch.full((1, D), 0.3, **tkw)
        model.likelihood.noise = torch.tensor([1e-3], **tkw)
    model.eval()
    return X, kernel, model


def _allocator(method: str, model):
    from botorch.models.utils.inducing_point_allocators import (
        GreedyImprovementReduction,
        GreedyVarianceReduction,
    )

    from prefbo.inducing import ConditionalVarianceReduction, EntropyDPP

    return {
        "cvr": lambda: ConditionalVarianceReduction(),
        "botorch_gvr": lambda: GreedyVarianceReduction(),
        "ent": lambda: EntropyDPP(model, alpha=0.5),
        "botorch_gir": lambda: GreedyImprovementReduction(model, maximize=True),
    }[method]()


def child(mode: str, method: str, n: int, m: int, repeats: int, seed: int, out: str):
    r"""Measure one cell (``mode`` "time" or "memory"); write JSON (and points)."""
    import warnings

    import torch

    warnings.simplefilter("ignore")  # e.g. BoTorch's input-scaling warnings
    X, kernel, model = _setup(n, seed)
    torch.manual_seed(seed)
    warm = _allocator(method, model)
    warm.allocate_inducing_points(X[: min(n, 300)], kernel, min(m, 20), torch.Size())
    if mode == "memory":
        allocator = _allocator(method, model)
        torch.manual_seed(seed)
        before = _status_kib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM)
        Z = allocator.allocate_inducing_points(X, kernel, m, torch.Size())
        result = {"extra_mib": (_status_kib("VmHWM") - before) / 1024}
        torch.save(Z, out + ".pt")
    else:
        times = []
        for _ in range(repeats):
            allocator = _allocator(method, model)
            torch.manual_seed(seed)
            t0 = time.perf_counter()
            allocator.allocate_inducing_points(X, kernel, m, torch.Size())
            times.append(time.perf_counter() - t0)
        result = {"time_s": statistics.median(times)}
    result["threads"] = environment.threads()
    Path(out).write_text(json.dumps(result))


def run_cell(method: str, n: int, m: int, repeats: int, seed: int) -> dict:
    r"""Run :func:`child` in fresh interpreters: one timing, one memory run."""
    import torch

    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("time", "memory"):
            out = os.path.join(tmp, f"{mode}.json")
            env = dict(os.environ, OMP_NUM_THREADS="1")
            if mode == "memory":
                env["MALLOC_MMAP_THRESHOLD_"] = "131072"
            args = child_command("inducing_allocators", "--child", mode, method)
            args += [str(n), str(m), str(repeats), str(seed), out]
            proc = subprocess.run(
                args, env=env, capture_output=True, text=True, cwd=REPO
            )
            if proc.returncode != 0:
                tail = proc.stderr.strip().splitlines()[-1:] or ["?"]
                return {"error": tail[0][:120]}
            result.update(json.loads(Path(out).read_text()))
        result["points"] = torch.load(os.path.join(tmp, "memory.json.pt"))
    return result


def _loads(loads: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.2f}" for x in loads)


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "skipped"
    return f"{x:.{digits}g}" if x < 1000 else f"{x:.0f}"


def main(argv: list[str] | None = None) -> str:
    r"""Measure and write the page (or, as ``--child``, measure one cell)."""
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, mode, method, n, m, repeats, seed, out = sys.argv
        child(mode, method, int(n), int(m), int(repeats), int(seed), out)
        return ""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--num-inducing", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-botorch-above", type=int, default=30000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="N = 500, 2000; M = 20")
    parser.add_argument(
        "--output",
        default=None,
        help=f"the page (default {RESULTS.name} in benchmarks/results/, with "
        "--quick in <tempdir>/prefbo-quick/)",
    )
    args = parser.parse_args(argv)
    cli = sys.argv[1:] if argv is None else argv
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    m, repeats = args.num_inducing, args.repeats
    if args.quick:
        sizes, m, repeats = [500, 2000], 20, 1
    if args.output is None:
        base = reports.scratch_dir() if args.quick else RESULTS.parent
        args.output = str(base / RESULTS.name)
    load_before = os.getloadavg()
    rows = []
    threads: set[str] = set()  # the measuring processes' settings
    for n in sizes:
        cells = {}
        for method, (label, _) in METHODS.items():
            if method.startswith("botorch") and n > args.skip_botorch_above:
                cells[method] = None
                continue
            print(f"N={n} {label} ...", file=sys.stderr, flush=True)
            cells[method] = run_cell(method, n, m, repeats, args.seed)
            threads.add(cells[method].get("threads", "not recorded (error)"))
        for method, (label, ref) in METHODS.items():
            cell, base = cells[method], cells.get(ref) if ref else None
            ok = cell is not None and "error" not in cell
            base_ok = base is not None and "error" not in base
            speedup = base["time_s"] / cell["time_s"] if ok and base_ok else None
            memfrac = (
                cell["extra_mib"] / base["extra_mib"]
                if ok and base_ok and base["extra_mib"] > 0
                else None
            )
            same = ""
            if method == "cvr" and ok and base_ok:
                same = "yes" if cell["points"].equal(base["points"]) else "NO"
            if cell is None:
                rows.append([f"{n:,}", label, "skipped", "skipped", "", "", ""])
            elif "error" in cell:
                rows.append([f"{n:,}", label, f"error: {cell['error']}", "", "", ""])
                rows[-1].append("")
            else:
                rows.append(
                    [
                        f"{n:,}",
                        label,
                        _fmt(cell["time_s"]),
                        _fmt(cell["extra_mib"]),
                        (_fmt(speedup) + "x" if speedup else "skipped") if ref else "",
                        _fmt(memfrac, 2) if ref else "",
                        same,
                    ]
                )
    load_after = os.getloadavg()
    header = [
        "N",
        "method",
        "time (s)",
        "peak extra memory (MiB)",
        "speed-up vs BoTorch",
        "memory fraction vs BoTorch",
        "same points as BoTorch",
    ]
    lines = [
        "# Inducing-point allocators: prefbo vs BoTorch",
        "",
        f"`{reports.command('inducing_allocators', cli)}` — "
        f"{time.strftime('%Y-%m-%d %H:%M')}, {environment.machine()}; "
        f"{environment.versions_text()}.",
        "",
        f"M = {m} inducing points, d = {D}, float64, Matern-5/2 ARD kernel; "
        f"time = median of {repeats} call(s); memory = peak RSS increase of the "
        "first call (fresh subprocess per cell; see the script's docstring). "
        "Ratios: speed-up = BoTorch time / prefbo time; memory fraction = prefbo "
        "/ BoTorch. EntropyDPP is compared with GreedyImprovementReduction (the "
        "BoTorch allocator that also uses the previous model).",
        "",
        f"Load average (1/5/15 min) before: {_loads(load_before)}; after: "
        f"{_loads(load_after)}"
        " (2 cores shared with other developers; a load above ~1 means other "
        "work ran alongside).",
        "",
        "Threads of the measuring processes: "
        f"{' / '.join(sorted(threads)) or 'none ran'}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    report = "\n".join(lines) + "\n"
    print(report)
    reports.write(Path(args.output), report)
    return report
