r"""How the population models scale with participants and answers.

A simulated population on the unit square: everyone's utility is a shared
bump at (0.7, 0.3) plus a person's linear tilt (slopes N(0, 0.5²)); each
participant has ``n`` designs and answers ``m`` random pairs of them with
probit noise (sd 0.1 on each utility). For each number of participants the
script fits

- ``VariationalPopulationGP`` (default settings, Adam on minibatches of
  4,096 answers, at least ``--steps`` steps: whole epochs), and
- the exact EP population model (``population_model(..., model="ep")``,
  ``fit_gpytorch_mll``) while the designs number at most ``--exact-max``,

and prints the fit time, the time per epoch, the distance of the
population's favourite (posterior-mean maximiser on a 41 x 41 grid) from the
true one, the fitted disagreement, and the exact model's time over the
variational one's where both ran.

Run: ``OMP_NUM_THREADS=1 python -m benchmarks population_scale`` (seeds fixed
below; ``--quick`` for a small run).
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from botorch.fit import fit_gpytorch_mll

from benchmarks.harness import environment
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.mlls import PairwiseEPMLL
from prefbo.models.population import favourite, population_model
from prefbo.models.population_variational import VariationalPopulationGP

PEAK = torch.tensor([0.7, 0.3], dtype=torch.float64)
GRID = torch.stack(
    torch.meshgrid(*[torch.linspace(0, 1, 41, dtype=torch.float64)] * 2, indexing="ij"),
    -1,
).reshape(-1, 2)


def simulate(P: int, n: int, m: int, seed: int = 0):
    r"""Designs, participant ids and comparisons of ``P`` simulated people."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(P * n, 2, dtype=torch.float64, generator=g)
    who = torch.arange(P).repeat_interleave(n)
    tilt = 0.5 * torch.randn(P, 2, dtype=torch.float64, generator=g)
    u = -4 * ((X - PEAK) ** 2).sum(-1) + (X * tilt[who]).sum(-1)
    a = torch.randint(0, n, (P, m), generator=g)
    b = torch.randint(0, n, (P, m), generator=g)
    base = (torch.arange(P) * n).unsqueeze(-1)
    pairs = torch.stack([a + base, b + base], -1).reshape(-1, 2)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    noise = 0.1 * torch.randn(len(pairs), 2, dtype=torch.float64, generator=g)
    du = u[pairs[:, 0]] + noise[:, 0] - u[pairs[:, 1]] - noise[:, 1]
    comps = torch.where((du > 0).unsqueeze(-1), pairs, pairs.flip(-1))
    return X, who, comps


def run(P: int, n: int, m: int, steps: int, exact_max: int) -> dict:
    X, who, comps = simulate(P, n, m)
    out = {"participants": P, "answers": len(comps), "designs": len(X)}
    epochs = math.ceil(steps / math.ceil(len(comps) / 4096))
    t = time.perf_counter()
    model = VariationalPopulationGP(X, who, comps)
    model.fit(epochs=epochs, batch_size=4096)
    out["variational_s"] = time.perf_counter() - t
    out["s_per_epoch"] = out["variational_s"] / epochs
    with torch.no_grad():
        mean = model.posterior(GRID).mean.reshape(-1)
    out["variational_error"] = float((GRID[mean.argmax()] - PEAK).norm())
    out["variational_disagreement"] = model.disagreement()
    if len(X) <= exact_max:
        data = {
            p: (X[who == p], comps[who[comps[:, 0]] == p] - p * n) for p in range(P)
        }
        t = time.perf_counter()
        exact = population_model(data, model="ep")
        with expected_fit_warnings():
            fit_gpytorch_mll(PairwiseEPMLL(exact.likelihood, exact))
        exact.eval()
        x, _, _ = favourite(exact, GRID)
        out["exact_s"] = time.perf_counter() - t
        out["exact_error"] = float((x - PEAK).norm())
    return out


def main(argv: list[str] | None = None) -> None:  # noqa: D103
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--participants", type=int, nargs="+", default=[10, 100, 1000, 10000]
    )
    p.add_argument("--designs", type=int, default=10, help="per participant")
    p.add_argument("--answers", type=int, default=20, help="per participant")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--exact-max", type=int, default=1000, help="designs")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.participants, args.steps = [5, 20], 2
    print("\n".join(environment.lines()))
    print(
        "participants  answers  variational s (s/epoch)  favourite error  "
        "disagreement  exact EP s  exact error  exact/variational"
    )
    for P in args.participants:
        r = run(P, args.designs, args.answers, args.steps, args.exact_max)
        exact = (
            f"{r['exact_s']:10.1f}  {r['exact_error']:11.3f}  "
            f"{r['exact_s'] / r['variational_s']:17.2f}"
            if "exact_s" in r
            else f"{'-':>10}  {'-':>11}  {'-':>17}"
        )
        print(
            f"{P:12d}  {r['answers']:7d}  {r['variational_s']:13.1f} "
            f"({r['s_per_epoch']:6.2f})  {r['variational_error']:15.3f}  "
            f"{r['variational_disagreement']:12.3f}  {exact}",
            flush=True,
        )
