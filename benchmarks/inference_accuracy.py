r"""Accuracy of prefbo's posterior approximations against exact answers.

(a) One design pair, one answer "1 beats 0", prior Var(Δ) = 1 (Δ = f1 - f0),
    answer noise σ ∈ {1, 0.3, 0.1, 0.03, 0.01} (s = √2σ). The exact posterior
    of Δ is a skew normal: mean √(2/π)/√(1 + s²), second moment 1, and
    P(Δ < 0 | answer) by quadrature. Each method's Gaussian gives mean, sd and
    Φ(-mean/sd).
(b) 2-D and 6-D problems with 10–60 answers at low (σ = 0.05) and human
    (σ = 0.5) noise: error of each method's predictive P(answer) on held-out
    pairs and of its posterior mean at the designs, against a long run of the
    exact sampler (SkewGP), when available.

Run: ``python -m benchmarks inference_accuracy`` (``--quick`` for a small run,
written to ``<tempdir>/prefbo-quick/`` unless given ``--output``);
the table is printed and written to ``benchmarks/results/inference_accuracy.md``.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from pathlib import Path

import torch
from scipy import integrate, special

from benchmarks.harness import environment, reports
from prefbo import PairwiseEPGP, PairwiseLaplaceGP, SkewGP
from prefbo.likelihoods import PairwiseProbitLikelihood

RESULTS = Path(__file__).parent / "results"

SIGMAS = (1.0, 0.3, 0.1, 0.03, 0.01)


def _kernel():
    from gpytorch.kernels import RBFKernel, ScaleKernel

    k = ScaleKernel(RBFKernel()).double()
    k.outputscale, k.base_kernel.lengthscale = 0.5, 1e-3  # independent, Var(Δ) = 1
    return k


def exact_one_answer(sigma: float) -> tuple[float, float, float]:
    r"""Exact mean, sd and P(Δ < 0) of Δ after one answer "Δ > 0"."""
    s2 = 2 * sigma**2
    mean = math.sqrt(2 / math.pi) / math.sqrt(1 + s2)
    sd = math.sqrt(1 - mean**2)
    s = math.sqrt(s2)

    def dens(d):
        return math.exp(-0.5 * d * d + special.log_ndtr(d / s)) / math.sqrt(2 * math.pi)

    p_neg = integrate.quad(dens, -40, 0)[0] / 0.5
    return mean, sd, p_neg


def method_one_answer(cls, sigma: float) -> tuple[float, float, float]:
    X = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    if cls is SkewGP:
        model = SkewGP(
            X,
            torch.tensor([[1, 0]]),
            covar_module=_kernel(),
            noise_std=sigma,
            num_samples=4096,
            seed=0,
        )
        post = model.posterior(X)
        d = post.locations[:, 1] - post.locations[:, 0]
        R = post.residual_covariance
        r = (R[0, 0] + R[1, 1] - 2 * R[0, 1]).item()
        p_neg = torch.special.ndtr(-d / math.sqrt(r)).mean().item()
        return d.mean().item(), math.sqrt(d.var().item() + r), p_neg
    model = cls(
        X,
        torch.tensor([[1, 0]]),
        likelihood=PairwiseProbitLikelihood(noise_std=sigma),
        covar_module=_kernel(),
    )
    post = model.posterior(X)
    mean = (post.mean[1] - post.mean[0]).item()
    cov = post.covariance_matrix
    sd = (cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]).clamp_min(0).sqrt().item()
    return mean, sd, float(special.ndtr(-mean / sd))


def part_a(methods: dict) -> list[str]:
    rows = [
        "| σ | method | mean | exact mean | sd | exact sd | P(Δ<0) | exact P(Δ<0) "
        "| max abs error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for sigma in SIGMAS:
        em, es, ep = exact_one_answer(sigma)
        for name, cls in methods.items():
            m, s, p = method_one_answer(cls, sigma)
            err = max(abs(m - em), abs(s - es), abs(p - ep))
            rows.append(
                f"| {sigma:g} | {name} | {m:.4f} | {em:.4f} | {s:.4f} | {es:.4f} | "
                f"{p:.2e} | {ep:.2e} | {err:.1e} |"
            )
    return rows


def _problem(d: int, n: int, m: int, sigma: float, seed: int):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64)
    u = torch.sin(3 * X).sum(-1) - 2 * (X - 0.5).pow(2).sum(-1)
    i = torch.randint(n, (m,), generator=g)
    j = (i + torch.randint(1, n, (m,), generator=g)) % n
    p = torch.special.ndtr((u[i] - u[j]) / (math.sqrt(2) * sigma))
    first = torch.rand(m, generator=g, dtype=torch.float64) < p
    comp = torch.stack([torch.where(first, i, j), torch.where(first, j, i)], -1)
    test = torch.rand(200, 2, d, generator=g, dtype=torch.float64)
    return X, comp, test


def _fixed_kernel(d: int, sigma: float):
    from gpytorch.kernels import RBFKernel, ScaleKernel

    k = ScaleKernel(RBFKernel(ard_num_dims=d)).double()
    # utility sd ~ 1 on the scale of the answer noise σ (likelihood σ = sigma)
    k.outputscale, k.base_kernel.lengthscale = 1.0, 0.4 * math.sqrt(d)
    return k


def part_b(quick: bool) -> list[str]:
    rows = [
        "| d | answers | σ | method | max abs err P(answer) | mean abs err P(answer) "
        "| RMSE posterior mean | time (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    answers = (10, 30) if quick else (10, 30, 60)
    ref_samples = 4000 if quick else 40000
    for d, n in ((2, 15), (6, 30)):
        for m in answers:
            for sigma in (0.05, 0.5):
                X, comp, test = _problem(d, n, m, sigma, seed=d * 100 + m)
                lik = PairwiseProbitLikelihood(noise_std=sigma)
                ref = SkewGP(
                    X,
                    comp,
                    covar_module=_fixed_kernel(d, sigma),
                    noise_std=sigma,
                    num_samples=ref_samples,
                    seed=1,
                    thinning=4,
                )
                p_ref = ref.predict_preference(test[:, :1], test[:, 1:]).squeeze(-1)
                mu_ref = ref.posterior(X).mean.reshape(-1)
                for name in ("Laplace", "EP", "SkewGP (2k draws)"):
                    t0 = time.perf_counter()
                    if name == "Laplace":
                        model = PairwiseLaplaceGP(
                            X,
                            comp,
                            likelihood=lik,
                            covar_module=_fixed_kernel(d, sigma),
                        )
                    elif name == "EP":
                        model = PairwiseEPGP(
                            X,
                            comp,
                            likelihood=lik,
                            covar_module=_fixed_kernel(d, sigma),
                        )
                    else:
                        model = SkewGP(
                            X,
                            comp,
                            covar_module=_fixed_kernel(d, sigma),
                            noise_std=sigma,
                            num_samples=2048,
                            seed=2,
                        )
                    with torch.no_grad():
                        p = model.predict_preference(test[:, :1], test[:, 1:])
                        mu = model.posterior(X).mean.reshape(-1)
                    dt = time.perf_counter() - t0
                    err = (p.squeeze(-1) - p_ref).abs()
                    rmse = (mu - mu_ref).pow(2).mean().sqrt().item()
                    rows.append(
                        f"| {d} | {m} | {sigma:g} | {name} | {err.max().item():.3f} | "
                        f"{err.mean().item():.4f} | {rmse:.3f} | {dt:.2f} |"
                    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run")
    parser.add_argument(
        "--sampler-throughput",
        action="store_true",
        help="also run part (c), the sampler_throughput benchmark (about 2 "
        "minutes; its full table goes to benchmarks/results/sampler_throughput.md)",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="the page (default inference_accuracy.md in benchmarks/results/, "
        "with --quick in <tempdir>/prefbo-quick/)",
    )
    args = parser.parse_args(argv)
    if args.output is None:
        base = reports.scratch_dir() if args.quick else RESULTS
        args.output = str(base / "inference_accuracy.md")
    t0 = time.perf_counter()
    methods = {"Laplace": PairwiseLaplaceGP, "EP": PairwiseEPGP, "SkewGP": SkewGP}
    lines = [
        "# Accuracy of the posterior approximations",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        *environment.lines(),
        f"- command: `{reports.command('inference_accuracy', argv or sys.argv[1:])}`",
        "",
        "## (a) One pair, one answer, prior Var(Δ) = 1",
        "",
        *part_a(methods),
        "",
        "## (b) Several answers: error against a long exact-sampler run",
        "",
        "Fixed kernel (outputscale 1, lengthscale 0.4·√d) shared by all methods; "
        "reference: SkewGP with "
        + ("4,000" if args.quick else "40,000")
        + " draws. P(answer): predictive probability of 200 held-out pairs.",
        "",
        *part_b(args.quick),
        "",
        "## (c) Sampler throughput",
        "",
    ]
    if args.sampler_throughput:
        from benchmarks import sampler_throughput

        # a quick run writes its table to <tempdir>/prefbo-quick/, never over
        # the published one
        text = sampler_throughput.main(["--quick"] if args.quick else [])
        lines += [ln for ln in text.splitlines() if ln.startswith("- m =")]
    else:
        lines.append(
            "Effective samples per second of prefbo's Gibbs and LinESS samplers vs "
            "BoTorch's LinearEllipticalSliceSampler: run with `--sampler-throughput` "
            "or `python -m benchmarks sampler_throughput` "
            "(`benchmarks/results/sampler_throughput.md`)."
        )
    lines += ["", f"total {time.perf_counter() - t0:.1f} s"]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0
