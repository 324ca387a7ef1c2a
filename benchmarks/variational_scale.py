r"""Scaling of the variational preference GP with the number of answers.

Data (:func:`~benchmarks.harness.problems.smooth_pairwise_data`): ``n``
designs uniform on ``[0, 1]⁴``, the known utility
``u(x) = Σ_i sin(3 x_i) − 3 Σ_i (x_i − 0.5)²`` (the test suite's, in
``d = 4``), and ``m`` answers about random pairs of distinct designs drawn
from the probit model with ``σ = 1`` (``p(w ≻ l) = Φ((u_w − u_l)/√2)``).
``n = min(m / 10, --max-designs)`` (default cap 20,000). float64 throughout.

Model: :class:`~prefbo.models.variational.VariationalPreferenceGP` with the
default kernel (BoTorch ``PairwiseGP``'s ARD RBF and priors), ``M`` inducing
points chosen among the designs by
:class:`~prefbo.inducing.ConditionalVarianceReduction` (timed as "setup"),
learned jointly with ``q(u)`` and the kernel by
:func:`~prefbo.fit.fit_variational` (Adam, ``lr`` 0.02 decaying geometrically
to 0.002 over the run, minibatches of ``--batch-size`` answers, no early
stopping) for the smallest number of epochs that makes at least ``--steps``
Adam steps. With a constant ``lr`` the final iterate keeps Adam's minibatch
noise, which costs accuracy once the posterior is sharp (m ≥ 1e5).

Memory: every size runs in a fresh subprocess. After the data and the model
(with its inducing points) are built, the peak-RSS counter is reset
(``/proc/self/clear_refs``, value 5; where that is unavailable the columns
read "n/a"), so "peak RSS in fit" is the peak during training alone, and
"fit − before" is what training adds to a process that already holds the data
and the model (Laplace: the counter is reset before its fit). The claim
tested: the latter does not grow with ``m``; m = 2e5 and 1e6 share n = 20,000
designs, so they differ in ``m`` alone. A step's working set is
``O(M·u + b·p²)`` for the ``u`` designs a minibatch of ``b`` answers touches
(``u ≤ min(n, 2b)``, column "u"), so it grows with ``n`` until ``n`` passes
``2b`` and then stays put.

Accuracy: 20,000 held-out pairs of 4,000 fresh designs; the fraction whose
posterior-mean order agrees with the true utility's (noise-free truth; 0.5 is
chance; standard error ≈ 0.001 at 0.98). At the smallest size the same metric for
:class:`~prefbo.models.PairwiseLaplaceGP` (hyperparameters by its Laplace
evidence, ``fit_gpytorch_mll``), which factorises ``n x n`` matrices and so
only fits up to ~2,000 designs.

Usage::

    OMP_NUM_THREADS=1 python -m benchmarks variational_scale --quick  # ~2 min
    OMP_NUM_THREADS=1 python -m benchmarks variational_scale          # ~12 min

The markdown report is printed and written to
``benchmarks/results/variational_scale.md`` (``--output``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import torch

import prefbo
from benchmarks.harness import environment, reports
from benchmarks.harness.problems import SMOOTH_DIM as DIM
from benchmarks.harness.problems import random_pairs, smooth_pairwise_data
from benchmarks.harness.problems import smooth_utility as utility
from benchmarks.harness.runner import REPO, child_command

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "variational_scale.md"
NUM_TEST_DESIGNS, NUM_TEST_PAIRS = 4000, 20_000


def test_set(seed: int = 12345) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(NUM_TEST_DESIGNS, DIM, generator=g, dtype=torch.float64)
    return X, utility(X), random_pairs(NUM_TEST_DESIGNS, NUM_TEST_PAIRS, g)


def posterior_mean(model, X: torch.Tensor, chunk: int = 500) -> torch.Tensor:
    r"""Posterior mean utility at ``n x d`` designs, ``q = chunk`` at a time."""
    with torch.no_grad():
        parts = [model.posterior(x).mean[..., 0] for x in X.split(chunk)]
    return torch.cat(parts)


def accuracy(mean: torch.Tensor, u: torch.Tensor, pairs: torch.Tensor) -> float:
    i, j = pairs[:, 0], pairs[:, 1]
    return float(((mean[i] - mean[j]) * (u[i] - u[j]) > 0).double().mean())


def _rss_reset() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def run_one(method: str, m: int, args: argparse.Namespace) -> dict:
    r"""One size, one method, in this process: a dict of measurements."""
    from prefbo.data import AnswerLoader
    from prefbo.fit import fit_variational
    from prefbo.inducing import ConditionalVarianceReduction
    from prefbo.models.variational import VariationalPreferenceGP

    n = min(m // 10, args.max_designs)
    data, _ = smooth_pairwise_data(m, n, seed=args.seed)
    X_test, u_test, test_pairs = test_set()
    data_mb = (data.datapoints.nbytes + data.comparisons.nbytes) / 2**20
    row = {"method": method, "m": m, "n": n, "data_mb": data_mb}
    start = time.perf_counter()
    if method == "laplace":
        reset, before = _rss_reset(), _rss_mb("VmRSS")
        from botorch.fit import fit_gpytorch_mll

        from prefbo import PairwiseLaplaceGP, PairwiseLaplaceMLL

        model = PairwiseLaplaceGP(data.datapoints, data.comparisons)
        fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
        model.eval()
        row.update(setup_s=0.0, epochs=None, steps=None, s_per_epoch=None)
        row.update(s_per_step=None, M=None, batch=None, elbo=None, u=None)
    else:
        num_inducing = min(args.num_inducing, n)
        model = VariationalPreferenceGP(
            data,
            inducing_points=num_inducing,
            inducing_point_allocator=ConditionalVarianceReduction(),
        )
        setup = time.perf_counter() - start
        touched = [
            b.design_index.numel()
            for b, _ in zip(AnswerLoader(data, args.batch_size), range(20))
        ]
        row["u"] = sum(touched) / len(touched)  # designs a minibatch touches
        reset, before = _rss_reset(), _rss_mb("VmRSS")  # data and model built
        steps_per_epoch = math.ceil(m / args.batch_size)
        epochs = max(1, math.ceil(args.steps / steps_per_epoch))
        result = fit_variational(
            model,
            batch_size=args.batch_size,
            epochs=epochs,
            lr=args.lr,
            final_lr=args.final_lr,
            early_stopping_patience=None,
            seed=args.seed,
            progress=_progress if args.verbose else False,
        )
        seconds = sum(result.seconds)
        row.update(setup_s=setup, epochs=epochs, steps=epochs * steps_per_epoch)
        row.update(s_per_epoch=seconds / epochs, M=num_inducing, batch=args.batch_size)
        row.update(s_per_step=seconds / (epochs * steps_per_epoch))
        row.update(elbo=result.elbo[-1] / m)
    row["fit_s"] = time.perf_counter() - start
    peak = _rss_mb("VmHWM") if reset else float("nan")
    row.update(rss_before_mb=before, peak_rss_mb=peak, accuracy=None)
    row["accuracy"] = accuracy(posterior_mean(model, X_test), u_test, test_pairs)
    return row


def _progress(epoch: int, info: dict) -> None:
    print(
        f"    epoch {epoch + 1}: ELBO/answer {info['elbo_per_answer']:.4f}, "
        f"{info['seconds']:.1f} s",
        file=sys.stderr,
        flush=True,
    )


def run_in_subprocess(method: str, m: int, args: argparse.Namespace) -> dict:
    cmd = child_command("variational_scale", "--child", method, str(m))
    cmd += ["--steps", str(args.steps), "--batch-size", str(args.batch_size)]
    cmd += ["--num-inducing", str(args.num_inducing), "--lr", str(args.lr)]
    cmd += ["--final-lr", str(args.final_lr)]
    cmd += ["--max-designs", str(args.max_designs), "--seed", str(args.seed)]
    if args.verbose:
        cmd.append("--verbose")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
    if args.verbose:
        sys.stderr.write(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fmt(x: object) -> str:
    if x is None:
        return "–"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "n/a"
        digits = max(0, 2 - int(math.floor(math.log10(abs(x))))) if x else 0
        return f"{x:,.{min(digits, 4)}f}"
    return str(x)


def report(
    rows: list[dict], args: argparse.Namespace, load: tuple, argv: list[str]
) -> str:
    lines = [
        "# Variational preference GP: time, memory and accuracy vs answers",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- versions: {environment.versions_text()}, prefbo {prefbo.__version__}",
        f"- machine: {environment.machine()}; threads: {environment.threads()}; "
        f"load average {load[0]:.2f} at the start, {load[1]:.2f} at the end "
        "(shared machine)",
        f"- command: `{reports.command('variational_scale', argv)}`",
        f"- settings: d = {DIM}, n = min(m/10, {args.max_designs:,}), probit "
        f"answers σ = 1; M = {args.num_inducing} CVR inducing points, batch "
        f"{args.batch_size:,} answers, Adam lr {args.lr} decaying geometrically to "
        f"{args.final_lr}, ≥ {args.steps} steps; "
        f"accuracy on {NUM_TEST_PAIRS:,} held-out pairs of fresh designs vs the "
        "noise-free utility (see the script's docstring)",
        "",
        "| method | m | n | M | u | setup (s) | epochs | steps | s/epoch | s/step | "
        "ELBO/answer | data (MB) | RSS before fit (MB) | peak RSS in fit (MB) | "
        "fit − before (MB) | held-out accuracy |",
        "|" + "---|" * 16,
    ]
    for r in rows:
        label = (
            "VariationalPreferenceGP" if r["method"] == "vi" else "PairwiseLaplaceGP"
        )
        extra = r["peak_rss_mb"] - r["rss_before_mb"]
        cells = [
            label,
            r["m"],
            r["n"],
            r["M"],
            r["u"],
            r["setup_s"],
            r["epochs"],
            r["steps"],
            r["s_per_epoch"],
            r["s_per_step"],
            r["elbo"],
            r["data_mb"],
            r["rss_before_mb"],
            r["peak_rss_mb"],
            extra,
            r["accuracy"],
        ]
        lines.append("| " + " | ".join(_fmt(c) for c in cells) + " |")
    lines += [
        "",
        "u: mean number of designs a minibatch touches; a training step works on "
        "O(M·u) numbers (u ≤ min(n, 2·batch)), whatever m. data: designs + "
        "comparisons. fit − before: what training adds to a process that holds "
        "the data and the model (peak RSS during fit minus RSS before it).",
    ]
    if any(r["method"] == "laplace" for r in rows):
        lines += [
            "",
            "PairwiseLaplaceGP: total fit time (hyperparameters by the Laplace "
            "evidence) "
            + ", ".join(
                f"{r['fit_s']:.1f} s at m = {r['m']:,}"
                for r in rows
                if r["method"] == "laplace"
            )
            + ".",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="m = 1e4, 1e5; fewer steps"
    )
    parser.add_argument("--sizes", default=None, help="comma-separated values of m")
    parser.add_argument("--steps", type=int, default=None, help="minimum Adam steps")
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--num-inducing", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--final-lr", type=float, default=0.002)
    parser.add_argument("--max-designs", type=int, default=20_000)
    parser.add_argument("--laplace-size", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--in-process", action="store_true", help="no subprocesses")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument(
        "--child", nargs=2, metavar=("METHOD", "M"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 200 if args.quick else 1000
    if args.child is not None:
        row = run_one(args.child[0], int(args.child[1]), args)
        print(json.dumps(row))
        return ""
    default_sizes = "10000,100000" if args.quick else "10000,100000,200000,1000000"
    sizes = [int(float(s)) for s in (args.sizes or default_sizes).split(",")]
    laplace_m = args.laplace_size if args.laplace_size is not None else min(sizes)
    load = [environment.load_average()]
    runner = run_one if args.in_process else run_in_subprocess
    jobs = [("laplace", laplace_m)] if laplace_m > 0 else []
    jobs += [("vi", m) for m in sizes]
    rows = []
    for method, m in jobs:
        print(f"running {method} at m = {m:,} ...", file=sys.stderr, flush=True)
        rows.append(runner(method, m, args))
        print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    load.append(environment.load_average())
    text = report(rows, args, tuple(load), sys.argv[1:] if argv is None else argv)
    print(text)
    if args.output is not None:
        reports.write(args.output, text)
    return text
