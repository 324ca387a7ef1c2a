r"""GPU benchmark: batched Laplace fits, many users, allocators (and the CUDA tests).

Run on a machine with a GPU (``python -m benchmarks gpu``); every figure is also
measured on the CPU in the same run for the ratio. Without CUDA it runs on the
CPU only (``--quick`` for a short smoke run). Parts:

1. Batched Laplace mode finding on ``B`` problems of ``n`` designs
   (``m = 5n`` answers), ``B ∈ {1, 64, 1024}``, ``n ∈ {50, 200, 800}`` (capped by
   memory): seconds per batched solve, problems per second, and the same
   shapes' batched ``torch.linalg.cholesky`` alone — the ceiling. "Efficiency"
   is the Cholesky-only time of as many factorisations as the solve took
   Newton iterations, over the solve's time (1.0 = as fast as its Choleskys).
2. Users fitted per second: ``B`` users' hyperparameters fitted in one
   batched ``fit_gpytorch_mll`` call.
3. Inducing-point allocation (CVR) at ``N = 10⁶``, ``M = 100``.
4. SVGP epoch time at ``10⁶`` and ``10⁷`` answers (from timed minibatch
   steps; a real epoch too where it takes under a minute).
5. Thompson sampling: :func:`~prefbo.acquisition.thompson_batch` with
   ``10³`` and ``10⁴`` (GPU) or ``10³`` (CPU) sample paths in 2-D and 6-D:
   maximisers (one design per path) per second.
6. EUBO maximisation at ``n = 1,600`` designs: ``optimize_acqf(q=2,
   num_restarts=4, raw_samples=128)`` on prefbo's ``PairwiseLaplaceGP``
   (:class:`~prefbo.acquisition.FastAnalyticEUBO` with
   :func:`~prefbo.acquisition.gen_candidates_eubo`, the loop's default) and on
   BoTorch's ``PairwiseGP`` (``AnalyticExpectedUtilityOfBestOption``), both on
   the same device, the same data and the same kernel hyperparameters
   (BoTorch's defaults, not fitted); the ratio is BoTorch's time over prefbo's.
7. The collaborative model
   (:class:`~prefbo.models.collaborative.CollaborativePreferenceGP`) on a
   planted pool (:data:`COLLABORATIVE_PEOPLE` people with 10 answers
   each over 100 items with effects of their own, the model's default item
   effects on): seconds of ``fit(steps=...)``, then one batched question step
   (:func:`~prefbo.models.collaborative.questions.next_questions`, EUBO over
   the pool) for 100 waiting participants: participants' questions per
   second.
8. ``--tests``: the test suite, whose fixtures run every test body on CUDA too.

Results are printed and written to ``gpu_out/gpu.md`` (``--output``);
``python -m benchmarks gpu_device`` (``benchmarks/gpu_device.sh``) runs it
with the CUDA tests on a GPU machine, and ``benchmarks/results/gpu.md``
holds the published run.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch
from botorch.fit import fit_gpytorch_mll

from benchmarks.harness import environment, reports
from benchmarks.harness.problems import smooth_pairwise_data
from benchmarks.harness.runner import REPO
from prefbo.inference import find_mode
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.mlls import PairwiseLaplaceMLL
from prefbo.models import PairwiseLaplaceGP
from prefbo.utils.testing import make_pairwise_data


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device, repeats: int = 3) -> float:
    fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def _problem(B: int, n: int, device: torch.device):
    X, comp, _ = make_pairwise_data(
        n, 5 * n, d=4, batch_shape=torch.Size([B]), seed=B + n
    )
    X, comp = X.to(device), comp.to(device)
    K = 4.0 * torch.exp(-torch.cdist(X, X).pow(2) / (2 * 0.6**2))
    K = K + 1e-6 * 4.0 * torch.eye(n, dtype=K.dtype, device=device)
    return torch.linalg.cholesky(K), comp, K


def part_laplace(device: torch.device, sizes, batches) -> list[str]:
    rows = [
        "| device | form | B | n | solve (s) | problems/s | Newton iterations "
        "| Cholesky-only (s) | efficiency |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lik = PairwiseProbitLikelihood()
    for n in sizes:
        for B in batches:
            bytes_needed = B * n * n * 8 * 12
            limit = (
                torch.cuda.get_device_properties(device).total_memory * 0.5
                if device.type == "cuda"
                else 8e9
            )
            if bytes_needed > limit:
                rows.append(f"| {device.type} | | {B} | {n} | skipped (memory) |||||")
                continue
            L, comp, K = _problem(B, n, device)
            A = K + torch.eye(n, dtype=K.dtype, device=device)
            t_chol = _timed(lambda A=A: torch.linalg.cholesky(A), device)
            for form in ("precision", "whitened"):
                state = find_mode(L, comp, lik, form=form)

                def solve(L=L, comp=comp, form=form):
                    return find_mode(L, comp, lik, form=form)

                t_solve = _timed(solve, device)
                # the precision form also inverts K and Σ once: 2 more factorisations
                ceiling = t_chol * (
                    state.iterations + (2 if form == "precision" else 0)
                )
                rows.append(
                    f"| {device.type} | {form} | {B} | {n} | {t_solve:.4f} | "
                    f"{B / t_solve:.1f} | {state.iterations} | {ceiling:.4f} | "
                    f"{ceiling / t_solve:.2f} |"
                )
    return rows


def profile_laplace(device: torch.device, B: int = 1024, n: int = 200) -> str:
    r"""The CUDA kernels of one batched solve per form, by total device time."""
    from torch.profiler import ProfilerActivity, profile

    L, comp, _ = _problem(B, n, device)
    lik = PairwiseProbitLikelihood()
    text = []
    for form in ("precision", "whitened"):
        find_mode(L, comp, lik, form=form)
        _sync(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            find_mode(L, comp, lik, form=form)
            _sync(device)
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=18)
        text += [f"### {form}, B = {B}, n = {n}", "", "```", table, "```", ""]
    return "\n".join(text)


def part_users(device: torch.device, B: int, n: int) -> list[str]:
    X, comp, _ = make_pairwise_data(n, 5 * n, d=4, batch_shape=torch.Size([B]), seed=7)
    model = PairwiseLaplaceGP(X.to(device), comp.to(device))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    _sync(device)
    dt = time.perf_counter() - t0
    return [f"| {device.type} | {B} | {n} | {dt:.2f} | {B / dt:.1f} |"]


def part_allocator(device: torch.device, N: int, M: int) -> list[str]:
    from gpytorch.kernels import MaternKernel, ScaleKernel

    from prefbo.inducing import ConditionalVarianceReduction

    X = torch.rand(N, 6, dtype=torch.float64, device=device)
    kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=6)).to(X)
    alloc = ConditionalVarianceReduction()
    dt = _timed(
        lambda: alloc.allocate_inducing_points(X, kernel, M, torch.Size()),
        device,
        repeats=1,
    )
    return [f"| {device.type} | {N:,} | {M} | {dt:.3f} |"]


def part_svgp(
    device: torch.device, sizes, steps: int = 20, full_epoch_below_s: float = 60.0
) -> list[str]:
    r"""SVGP training speed at ``m`` answers (``variational_scale``'s data,
    :func:`~benchmarks.harness.problems.smooth_pairwise_data`: ``n = min(m/10,
    20,000)`` designs in 4-D, M = 200 CVR inducing points, batches of 5,000
    answers, float64).

    The epoch time is the median of ``steps`` timed minibatch steps (ELBO,
    backward, Adam; the first is a warm-up) times the steps per epoch; when
    that estimate is below ``full_epoch_below_s`` a real epoch of
    :func:`~prefbo.fit.fit_variational` is timed as well.
    """
    from prefbo.data import AnswerLoader
    from prefbo.fit import fit_variational
    from prefbo.models import VariationalPreferenceGP

    rows = []
    batch_size = 5000
    for m in sizes:
        data, _ = smooth_pairwise_data(m, min(m // 10, 20_000), seed=0)
        data = type(data)(data.datapoints.to(device), data.comparisons.to(device))
        model = VariationalPreferenceGP(data, inducing_points=200)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        loader = AnswerLoader(
            data, batch_size, generator=torch.Generator().manual_seed(0)
        )
        model.train()
        times = []
        for i, batch in enumerate(loader):
            if i > steps:
                break
            _sync(device)
            t0 = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            ell = model.expected_log_likelihood(batch.data).sum()
            loss = -(batch.scale * ell - model.kl_divergence()) / m
            loss.backward()
            optimizer.step()
            _sync(device)
            times.append(time.perf_counter() - t0)
        model.eval()
        step = sorted(times[1:])[len(times[1:]) // 2]
        estimate = step * len(loader)
        full = "–"
        if estimate < full_epoch_below_s:
            _sync(device)
            t0 = time.perf_counter()
            fit_variational(model, batch_size=batch_size, epochs=1, seed=0)
            _sync(device)
            full = f"{time.perf_counter() - t0:.2f}"
        rows.append(
            f"| {device.type} | {m:,} | {len(loader)} | {step * 1e3:.1f} | "
            f"{estimate:.2f} | {full} |"
        )
    return rows


def part_thompson(device: torch.device, dims=(2, 6), paths=(10_000,)) -> list[str]:
    from prefbo.acquisition import thompson_batch

    rows = []
    for d in dims:
        X, comp, _ = make_pairwise_data(50, 100, d=d, seed=d, dtype=torch.float64)
        model = PairwiseLaplaceGP(X.to(device), comp.to(device)).eval()
        bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(X).to(device)
        for B in paths:
            dt = _timed(
                lambda B=B, m=model, b=bounds: thompson_batch(m, b, B, seed=0),
                device,
                repeats=1,
            )
            rows.append(f"| {device.type} | {d} | {B:,} | {dt:.2f} | {B / dt:,.0f} |")
    return rows


def part_eubo(device: torch.device, n: int = 1600, repeats: int = 3) -> list[str]:
    import copy

    from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
    from botorch.models import PairwiseGP
    from botorch.optim import optimize_acqf

    from prefbo.acquisition import FastAnalyticEUBO, gen_candidates_eubo

    d = 4
    X, comp, _ = make_pairwise_data(n, 2 * n, d=d, seed=11, dtype=torch.float64)
    X, comp = X.to(device), comp.to(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = PairwiseGP(X, comp).eval()
        ours = PairwiseLaplaceGP(
            X, comp, covar_module=copy.deepcopy(theirs.covar_module)
        ).eval()
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(X)
    arms = {
        "BoTorch": (AnalyticExpectedUtilityOfBestOption(pref_model=theirs), {}),
        "prefbo": (
            FastAnalyticEUBO(ours),
            {"gen_candidates": gen_candidates_eubo},
        ),
    }
    best = dict.fromkeys(arms, float("inf"))
    found = {}
    for _ in range(repeats):  # interleaved
        for name, (acqf, kwargs) in arms.items():
            torch.manual_seed(0)
            _sync(device)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found[name], _ = optimize_acqf(
                    acqf,
                    bounds=bounds,
                    q=2,
                    num_restarts=4,
                    raw_samples=128,
                    options={"seed": 0, "maxiter": 100},
                    **kwargs,
                )
            _sync(device)
            best[name] = min(best[name], time.perf_counter() - t0)
    judge = arms["BoTorch"][0]
    with torch.no_grad():
        values = {k: float(judge(v.unsqueeze(0))) for k, v in found.items()}
    return [
        f"| {device.type} | {n:,} | {best['BoTorch']:.3f} | {best['prefbo']:.3f} | "
        f"{best['BoTorch'] / best['prefbo']:.1f} | {values['BoTorch']:.4f} | "
        f"{values['prefbo']:.4f} |"
    ]


#: Part 7's population (``--quick``: 200) and the fit's steps (``--quick``: 5).
COLLABORATIVE_PEOPLE, COLLABORATIVE_STEPS = 10_000, 100
#: Part 7's world, model and fit seed.
COLLABORATIVE_SEED = 0


def part_collaborative(
    device: torch.device, people: int, steps: int, waiting: int = 100
) -> list[str]:
    r"""Part 7's row on ``device``: the fit's seconds and the batched
    question step's participants per second."""
    from prefbo.datasets import planted_population
    from prefbo.models.collaborative import CollaborativePreferenceGP
    from prefbo.models.collaborative.questions import next_questions

    world = planted_population(
        num_people=people,
        num_items=100,
        answers_per_person=10,
        item_effect_scale=1.0,
        seed=COLLABORATIVE_SEED,
    )
    designs = world.designs.to(device)
    torch.manual_seed(COLLABORATIVE_SEED)
    model = CollaborativePreferenceGP(
        designs,
        world.answers.to(device),
        num_people=people,
        person_features=world.person_features.to(device),
        seed=COLLABORATIVE_SEED,
    )
    _sync(device)
    t0 = time.perf_counter()
    model.fit(steps=steps, seed=COLLABORATIVE_SEED)
    _sync(device)
    fit = time.perf_counter() - t0
    who = torch.arange(waiting, device=device)
    step = _timed(lambda: next_questions(model, who, designs), device, repeats=5)
    return [
        f"| {device.type} | {people:,} | {model.num_items} | {steps} | {fit:.2f} "
        f"| {waiting} | {1e3 * step:.1f} | {waiting / step:,.0f} |"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small CPU smoke run")
    parser.add_argument("--tests", action="store_true", help="also run the test suite")
    parser.add_argument(
        "--gpu-only",
        action="store_true",
        help="measure on CUDA alone (no CPU rows)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="only profile one batched Laplace solve per form (B = 1024, n = 200)",
    )
    parser.add_argument("--output", default=str(REPO / "gpu_out" / "gpu.md"))
    args = parser.parse_args(argv)
    if args.profile:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        print(profile_laplace(device, *((16, 50) if args.quick else (1024, 200))))
        return 0
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        # after every part, so that a run cut off keeps what it measured
        out.write_text("\n".join(lines) + "\n")

    if args.gpu_only and not torch.cuda.is_available():
        parser.error("--gpu-only needs CUDA; torch sees no GPU here")
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices = devices[args.gpu_only :] + [torch.device("cuda")]
    sizes = (50, 200) if args.quick else (50, 200, 800)
    batches = (1, 16) if args.quick else (1, 64, 1024)
    lines = [
        "# prefbo on GPU",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- machine: {environment.machine()}, "
        + (
            f"GPU {torch.cuda.get_device_name(0)}"
            if torch.cuda.is_available()
            else "no GPU (CPU only)"
        ),
        f"- versions: {environment.versions_text()}",
        f"- CPU threads: {environment.threads()}",
        f"- command: `{reports.command('gpu', argv or sys.argv[1:])}`",
        "",
        "## 1. Batched Laplace mode finding vs batched Cholesky",
        "",
    ]
    for device in devices:
        cpu_sizes = sizes if device.type == "cuda" else sizes[:2]
        cpu_batches = batches if device.type == "cuda" else batches[:2]
        lines += part_laplace(device, cpu_sizes, cpu_batches)[
            0 if device is devices[0] else 2 :
        ]
    save()
    lines += [
        "",
        "## 2. Users fitted per second (one batched fit)",
        "",
        "| device | B | n | seconds | users/s |",
        "|---|---|---|---|---|",
    ]
    for device in devices:
        lines += part_users(device, 8 if args.quick else 64, 30)
    save()
    lines += [
        "",
        "## 3. CVR allocation",
        "",
        "| device | N | M | seconds |",
        "|---|---|---|---|",
    ]
    for device in devices:
        lines += part_allocator(device, 10_000 if args.quick else 1_000_000, 100)
    save()
    lines += [
        "",
        "## 4. SVGP training (M = 200, batches of 5,000 answers)",
        "",
        "| device | answers | steps/epoch | s/step (ms, median) "
        "| epoch, from steps (s) | epoch, measured (s) |",
        "|---|---|---|---|---|---|",
    ]
    for device in devices:
        svgp_sizes = (10**5,) if args.quick else (10**6, 10**7)
        lines += part_svgp(device, svgp_sizes, steps=5 if args.quick else 20)
    save()
    lines += [
        "",
        "## 5. Thompson sampling (`thompson_batch`, 50 designs, 100 answers)",
        "",
        "| device | d | paths | seconds | designs/s |",
        "|---|---|---|---|---|",
    ]
    for device in devices:
        paths = (1000, 10_000) if device.type == "cuda" else (1000,)
        lines += part_thompson(device, paths=(100,) if args.quick else paths)
    save()
    lines += [
        "",
        "## 6. EUBO maximisation, prefbo against BoTorch's PairwiseGP",
        "",
        "| device | n | BoTorch (s) | prefbo (s) | BoTorch / prefbo "
        "| EUBO at BoTorch's | EUBO at prefbo's |",
        "|---|---|---|---|---|---|---|",
    ]
    for device in devices:
        lines += part_eubo(device, n=100 if args.quick else 1600)
    save()
    lines += [
        "",
        "## 7. Collaborative model: fit and participants' questions per second",
        "",
        "| device | people | items with effects | fit steps | fit (s) | waiting "
        "| question step (ms) | questions/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for device in devices:
        lines += part_collaborative(
            device,
            200 if args.quick else COLLABORATIVE_PEOPLE,
            5 if args.quick else COLLABORATIVE_STEPS,
        )
    save()
    if args.tests:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-m", "not slow"],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        lines += [
            "",
            "## 8. Test suite",
            "",
            "```",
            *proc.stdout.splitlines()[-3:],
            "```",
        ]
    save()
    print(out.read_text())
    return 0
