r"""Effective samples per second of truncated-Gaussian samplers (skew-GP target).

Compares, in the same run and on the same target, prefbo's
:class:`~prefbo.sampling.LinESS` and :class:`~prefbo.sampling.GibbsSampler`
with BoTorch's ``LinearEllipticalSliceSampler``, each with one chain and with
``--chains`` parallel chains.

Target (the exact probit posterior as a skew GP, Benavoli et al. 2021):
    ``r ~ N(0, Σ)`` restricted to ``r > 0`` (``A = -I``, ``b = 0``), with
    ``Σ = D K Dᵀ + s² I``. ``n = 50`` designs are uniform on ``[0, 1]²``;
    ``K`` is the RBF kernel ``exp(-‖x - x'‖² / (2 · 0.25²))`` (outputscale 1);
    a utility ``g ~ N(0, K)`` is drawn, and each of ``m`` random distinct pairs
    ``(i, j)`` is answered by the probit model with ``σ = 1``, i.e. ``s = √2``
    (``s² = 2``): row ``k`` of ``D`` is ``e_w - e_l`` for the winner ``w``.
    Sizes ``m = 200`` and ``m = 50``. float64 throughout.

Procedure, per sampler and chain count:
    1. construction (timed as "init"): prefbo factors ``Σ`` and finds the start
       by its LP; BoTorch gets the same start as ``interior_point``;
    2. burn-in for ``--burnin-s`` seconds (its draws also give a pilot
       autocorrelation time ``τ``);
    3. measurement: ``draw`` calls until ``--budget-s`` seconds have passed,
       thinned by ``max(1, τ_pilot / 4)`` (more if the kept draws would exceed
       2·10⁷ numbers; the thinning is in the table) with each library's own
       ``thinning``, and at least 32 kept draws per chain (so a slow sampler
       with a long ``τ`` may run past the budget). Only ``draw`` is timed.

ESS: per coordinate, the multi-chain estimator of Vehtari et al. (2021,
without rank normalisation): autocovariances by FFT per chain, combined with
the between-chain variance, summed in pairs up to the first negative pair
(Geyer's initial positive sequence) and made monotone; ``ESS = N C / τ``.
The table reports the minimum and the median over the ``m`` coordinates and
``n / τ`` (steps per chain over the autocorrelation time of the slowest
coordinate): below ~20 the ESS estimate itself is rough (marked ``(!)``).
A LinESS transition and a Gibbs sweep are one "step" each.

Usage::

    python -m benchmarks sampler_throughput           # full run (~5 minutes)
    python -m benchmarks sampler_throughput --quick   # ~30 seconds
    OMP_NUM_THREADS=1 python -m benchmarks sampler_throughput --append

The markdown report is printed and written to
``benchmarks/results/sampler_throughput.md`` (``--output``; ``--append`` adds
to it instead). Timings are wall-clock on whatever else the machine runs: the
load average is recorded; compare samplers within one run.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from botorch.utils.probability.lin_ess import LinearEllipticalSliceSampler

import prefbo
from benchmarks.harness import environment, reports
from prefbo.sampling import GibbsSampler, LinESS, find_interior_point

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "sampler_throughput.md"
MAX_KEPT_NUMBERS = 20_000_000


def skew_gp_target(m: int, n: int = 50, seed: int = 0) -> torch.Tensor:
    r"""``Σ = D K Dᵀ + 2 I`` (``m x m``) from ``m`` probit answers on ``n`` designs."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64)
    K = torch.exp(-(torch.cdist(X, X) ** 2) / (2 * 0.25**2))
    eye = torch.eye(n, dtype=torch.float64)
    utility = torch.linalg.cholesky(K + 1e-8 * eye) @ torch.randn(
        n, generator=g, dtype=torch.float64
    )
    i = torch.randint(n, (m,), generator=g)
    j = (i + torch.randint(1, n, (m,), generator=g)) % n
    noisy = (
        utility[i]
        - utility[j]
        + math.sqrt(2.0) * torch.randn(m, generator=g, dtype=torch.float64)
    )
    win, lose = torch.where(noisy > 0, i, j), torch.where(noisy > 0, j, i)
    D = torch.zeros(m, n, dtype=torch.float64)
    D[torch.arange(m), win] = 1.0
    D[torch.arange(m), lose] = -1.0
    return D @ K @ D.mT + 2.0 * torch.eye(m, dtype=torch.float64)


def effective_sample_size(draws: np.ndarray) -> np.ndarray:
    r"""Multi-chain ESS per coordinate of ``n x C x d`` draws (``d`` values)."""
    n, C, d = draws.shape
    out = np.empty(d)
    for lo in range(0, d, 16):  # blocks of coordinates bound the FFT memory
        x = draws[..., lo : lo + 16].astype(np.float64)
        xc = x - x.mean(0)
        f = np.fft.rfft(xc, n=2 * n, axis=0)
        acov = np.fft.irfft(f * np.conj(f), axis=0)[:n] / n  # n x C x block
        within = (acov[0] * n / (n - 1)).mean(0)
        between = x.mean(0).var(0, ddof=1) if C > 1 else 0.0
        var_plus = within * (n - 1) / n + between
        rho = 1.0 - (within - acov.mean(1)) / var_plus  # n x block
        rho[0] = 1.0
        pairs = rho[: 2 * (n // 2) : 2] + rho[1 : 2 * (n // 2) : 2]
        positive = np.cumprod(pairs > 0, axis=0).astype(bool)
        pairs = np.minimum.accumulate(np.where(positive, pairs, 0.0), axis=0)
        tau = np.maximum(-1.0 + 2.0 * pairs.sum(0), 1.0 / math.log10(n * C))
        out[lo : lo + 16] = n * C / tau
    return out


class Result(NamedTuple):
    m: int
    label: str
    chains: int
    init_s: float
    steps: int
    thin: int
    seconds: float
    ess_min: float
    ess_median: float

    @property
    def rate_min(self) -> float:
        return self.ess_min / self.seconds

    @property
    def rate_median(self) -> float:
        return self.ess_median / self.seconds

    @property
    def n_over_tau(self) -> float:
        return self.steps / (self.steps * self.chains / self.ess_min)


def _run(
    m: int,
    label: str,
    chains: int,
    make: Callable[[], object],
    draw: Callable[[object, int], torch.Tensor],
    set_thin: Callable[[object, int], None],
    budget_s: float,
    burnin_s: float,
) -> Result:
    t0 = time.perf_counter()
    sampler = make()
    init_s = time.perf_counter() - t0
    # burn-in in chunks, keeping 10 coordinates for a pilot autocorrelation time
    coords = torch.linspace(0, m - 1, min(m, 10)).long()
    pilot, steps, elapsed, chunk = [], 0, 0.0, 1
    while elapsed < burnin_s:
        t0 = time.perf_counter()
        x = draw(sampler, chunk)
        elapsed += time.perf_counter() - t0
        pilot.append(x[..., coords])
        steps += chunk
        chunk = min(2 * chunk, 4096)
    rate = steps / elapsed
    pilot_draws = torch.cat(pilot)[steps // 2 :].numpy()  # second half: burnt in
    tau = pilot_draws.shape[0] * chains / effective_sample_size(pilot_draws).min()
    total = max(64, int(rate * budget_s))
    thin = max(1, int(tau / 4), math.ceil(total * chains * m / MAX_KEPT_NUMBERS))
    set_thin(sampler, thin)
    planned = max(32, total // thin)  # kept draws per chain at the burn-in rate
    chunk = max(1, min(planned // 8, 2**16 // chains))
    kept, count, seconds = [], 0, 0.0
    while count < 32 or (seconds < budget_s and count < 2 * planned):
        t0 = time.perf_counter()
        x = draw(sampler, chunk)
        seconds += time.perf_counter() - t0
        kept.append(x.float())
        count += chunk
    draws = torch.cat(kept).numpy()
    ess = effective_sample_size(draws)
    return Result(
        m,
        label,
        chains,
        init_s,
        draws.shape[0] * thin,
        thin,
        seconds,
        float(ess.min()),
        float(np.median(ess)),
    )


def run_size(m: int, chain_counts: list[int], budget_s: float, burnin_s: float):
    cov = skew_gp_target(m)
    A, b = -torch.eye(m, dtype=torch.float64), torch.zeros(m, dtype=torch.float64)
    start = find_interior_point(
        A, b, torch.zeros(m, dtype=torch.float64), torch.linalg.cholesky(cov)
    )

    def prefbo_draw(s, n):
        return s.draw(n)

    def prefbo_thin(s, thin):
        s.thinning = thin - 1

    def botorch_draw(s, n):
        return s.draw(n).reshape(n, -1, m)

    results = []
    for chains in chain_counts:
        specs = [
            (
                "prefbo LinESS",
                lambda c=chains: LinESS(
                    A, b, covariance_matrix=cov, num_chains=c, seed=0
                ),
                prefbo_draw,
                prefbo_thin,
            ),
            (
                "BoTorch LinESS",
                lambda c=chains: LinearEllipticalSliceSampler(
                    inequality_constraints=(A, b[:, None]),
                    interior_point=start[:, None],
                    covariance_matrix=cov,
                    num_chains=c,
                ),
                botorch_draw,
                prefbo_thin,  # BoTorch's `thinning` has the same meaning
            ),
            (
                "prefbo Gibbs",
                lambda c=chains: GibbsSampler(
                    A, b, covariance_matrix=cov, num_chains=c, seed=0
                ),
                prefbo_draw,
                prefbo_thin,
            ),
        ]
        for label, make, draw, thin in specs:
            print(f"m={m} {label} chains={chains} ...", file=sys.stderr, flush=True)
            torch.manual_seed(0)
            results.append(_run(m, label, chains, make, draw, thin, budget_s, burnin_s))
            r = results[-1]
            print(
                f"  {r.steps} steps in {r.seconds:.2f}s, ESS min {r.ess_min:.0f} "
                f"median {r.ess_median:.0f}, ESS/s min {r.rate_min:.1f}",
                file=sys.stderr,
                flush=True,
            )
    return results


def _fmt(x: float) -> str:
    if x == 0 or not math.isfinite(x):
        return str(x)
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{min(digits, 4)}f}"


def report(
    results: list[Result], args: argparse.Namespace, load: tuple, argv: list[str]
) -> str:
    lines = [
        "# Truncated-Gaussian samplers: effective samples per second",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- versions: {environment.versions_text()}, prefbo {prefbo.__version__}",
        f"- machine: {environment.machine()}; threads: {environment.threads()}; "
        f"load average {load[0]:.2f} at the start, {load[1]:.2f} at the end "
        "(other processes share the machine)",
        f"- command: `{reports.command('sampler_throughput', argv)}`",
        f"- settings: burn-in {args.burnin_s} s, measurement {args.budget_s} s "
        "per sampler; target r ~ N(0, D K D^T + 2 I) restricted to r > 0, n = 50 "
        "designs, RBF lengthscale 0.25 on [0, 1]^2 (see the script's docstring)",
        "",
        "ESS/s = ESS over the timed `draw` calls (burn-in excluded); min and median "
        "over the m coordinates. × BoTorch: ESS/s (min over coordinates) and "
        "steps/s over BoTorch LinESS's with the same number of chains. n/τ: steps "
        "per chain over the slowest coordinate's autocorrelation time ((!) below "
        "20: that ESS estimate is rough). Both LinESS implementations run the same "
        "Markov kernel (a uniform angle on the union of feasible arcs), so their "
        "ESS per step agree in expectation and their ESS/s ratio tends to the "
        "steps/s ratio as runs grow; the ESS ratio of short runs is noisy.",
        "",
        "| m | sampler | chains | init (s) | steps/chain | thin | time (s) | steps/s "
        "| ESS min | ESS median | ESS/s min | ESS/s median | ESS/s × BoTorch "
        "| steps/s × BoTorch | n/τ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        base = next(
            q
            for q in results
            if q.m == r.m and q.chains == r.chains and q.label == "BoTorch LinESS"
        )
        flag = " (!)" if r.n_over_tau < 20 else ""
        speed = (r.steps / r.seconds) / (base.steps / base.seconds)
        lines.append(
            f"| {r.m} | {r.label} | {r.chains} | {_fmt(r.init_s)} | {r.steps} | "
            f"{r.thin} | {_fmt(r.seconds)} | {_fmt(r.steps / r.seconds)} | "
            f"{_fmt(r.ess_min)} | {_fmt(r.ess_median)} | {_fmt(r.rate_min)} | "
            f"{_fmt(r.rate_median)} | {_fmt(r.rate_min / base.rate_min)} | "
            f"{_fmt(speed)} | {_fmt(r.n_over_tau)}{flag} |"
        )
    lines.append("")
    for m in sorted({r.m for r in results}, reverse=True):
        rows = [r for r in results if r.m == m]
        best = {
            label: max(r.rate_min for r in rows if r.label == label)
            for label in ("prefbo LinESS", "BoTorch LinESS", "prefbo Gibbs")
        }
        bt = best["BoTorch LinESS"]
        lines.append(
            f"- m = {m}, best ESS/s (min over coordinates) over the chain counts: "
            f"prefbo Gibbs {_fmt(best['prefbo Gibbs'])} "
            f"({_fmt(best['prefbo Gibbs'] / bt)}× BoTorch's best), "
            f"prefbo LinESS {_fmt(best['prefbo LinESS'])} "
            f"({_fmt(best['prefbo LinESS'] / bt)}×), BoTorch LinESS {_fmt(bt)}."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short budgets")
    parser.add_argument("--sizes", default="200,50", help="values of m")
    parser.add_argument("--chains", default="1,32", help="chain counts")
    parser.add_argument("--budget-s", type=float, default=None)
    parser.add_argument("--burnin-s", type=float, default=None)
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"the report (default {DEFAULT_OUTPUT.name} in benchmarks/results/, "
        "with --quick in <tempdir>/prefbo-quick/)",
    )
    parser.add_argument("--append", action="store_true")
    args = parser.parse_args(argv)
    if args.output is None:
        base = reports.scratch_dir() if args.quick else DEFAULT_OUTPUT.parent
        args.output = base / DEFAULT_OUTPUT.name
    if args.budget_s is None:
        args.budget_s = 1.0 if args.quick else 10.0
    if args.burnin_s is None:
        args.burnin_s = 0.3 if args.quick else 2.0
    load_start = environment.load_average()
    results = []
    for m in (int(s) for s in args.sizes.split(",")):
        chains = [int(c) for c in args.chains.split(",")]
        results.extend(run_size(m, chains, args.budget_s, args.burnin_s))
    load = (load_start, environment.load_average())
    text = report(results, args, load, sys.argv[1:] if argv is None else argv)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if args.append and args.output.exists():
        text = args.output.read_text() + "\n" + text
    args.output.write_text(text)
    return text
