r"""The loop on a mixed space and on an item pool: EUBO against random pairs.

Two simulated studies (utilities below, fixed; seeds 0..N-1 fixed before the
run):

- ``mixed``: a font (categorical: serif, sans, mono, slab), a size (integer
  8..24), a contrast (continuous 0.5..2, log scale) and a weight (ordinal:
  light, regular, bold); the utility adds a font effect, a bump in size at
  14, a bump in log-contrast at log 1.2 and a weight effect that depends on
  the font. 2,880 size x font x weight combinations times a continuum: the
  strategy's optimiser on the relaxation, snapped.
- ``pool``: 400 dishes with 4 features in [0, 1]; the utility is a smooth
  function of the features. Exact EUBO over all 79,800 pairs.

The simulated person answers with probit noise (sd ``--sigma`` on each
utility, in units of the utility's sd over the space). Seeds 100-109 are
the published ones (fixed before any run); 0-9 were used while choosing how
mixed spaces are searched (``prefbo.loop.spaces``). Regret after each
answer: the best utility in the space minus the utility of the loop's
recommendation (``best()``), in the same units. Printed: mean regret ± s.e.
per strategy after 10 / 20 / 30 answers, and the paired ratio EUBO / random.

Run: ``OMP_NUM_THREADS=1 python -m benchmarks space_regret`` (``--seeds``,
``--answers``); it prints the machine, threads and versions first.
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from benchmarks.harness import environment
from prefbo.loop import PreferentialOptimizer
from prefbo.space import Categorical, Continuous, Integer, ItemPool, Ordinal, Space

FONTS = ["serif", "sans", "mono", "slab"]
WEIGHTS = ["light", "regular", "bold"]


def mixed_space() -> Space:  # noqa: D103
    return Space(
        [
            Categorical("font", FONTS),
            Integer("size", 8, 24),
            Continuous("contrast", 0.5, 2.0, log=True),
            Ordinal("weight", WEIGHTS),
        ]
    )


def mixed_utility(d: dict) -> float:  # noqa: D103
    font = {"serif": 0.2, "sans": 0.6, "mono": -0.4, "slab": 0.0}[d["font"]]
    w = WEIGHTS.index(d["weight"])
    weight = (0.3 if d["font"] in ("sans", "slab") else -0.3) * (w - 1)
    size = -(((d["size"] - 14) / 5) ** 2)
    contrast = -(((math.log(d["contrast"]) - math.log(1.2)) / 0.4) ** 2)
    return font + weight + size + contrast


def mixed_best() -> float:  # noqa: D103
    return max(
        mixed_utility({"font": f, "size": 14, "contrast": 1.2, "weight": w})
        for f in FONTS
        for w in WEIGHTS
    )


def pool_study(seed: int = 7) -> tuple[Space, torch.Tensor]:  # noqa: D103
    g = torch.Generator().manual_seed(seed)
    F = torch.rand(400, 4, dtype=torch.float64, generator=g)
    u = torch.sin(3 * F[:, 0]) + F[:, 1] * F[:, 2] - (F[:, 3] - 0.4) ** 2 * 2
    return Space([ItemPool("dish", [f"d{i}" for i in range(400)], F.tolist())]), u


def run_one(study: str, strategy: str, seed: int, answers: int, sigma: float) -> list:
    r"""Regret after each answer of one loop."""
    if study == "mixed":
        space = mixed_space()
        sample = space.decode(space.sample(4000, seed=123))
        sd = torch.tensor([mixed_utility(d) for d in sample]).std().item()
        best = mixed_best()

        def utility(X):
            return torch.tensor([mixed_utility(d) for d in space.decode(X)]) / sd

        top = best / sd
    else:
        space, u = pool_study()
        pool = space.variables[0]
        sd = u.std().item()

        def utility(X):
            return u[[pool.index(d["dish"]) for d in space.decode(X)]] / sd

        top = u.max().item() / sd
    opt = PreferentialOptimizer(space, strategy=strategy, seed=seed)
    g = torch.Generator().manual_seed(10_000 + seed)
    regret = []
    for _ in range(answers):
        X = opt.ask()
        noisy = utility(X) + sigma * torch.randn(2, generator=g, dtype=torch.float64)
        opt.tell(int(noisy.argmax()))
        regret.append(top - float(utility(opt.best()[0].unsqueeze(0))[0]))
    return regret


def main(argv: list[str] | None = None) -> None:  # noqa: D103
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--studies", nargs="+", default=["mixed", "pool"])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument(
        "--first-seed",
        type=int,
        default=100,
        help="seeds first..first+N-1; 100.. are the published (untuned) ones, "
        "0..9 the tuning seeds",
    )
    p.add_argument("--answers", type=int, default=30)
    p.add_argument("--sigma", type=float, default=0.1)
    args = p.parse_args(argv)
    checkpoints = [c for c in (10, 20, 30) if c <= args.answers] or [args.answers]
    print("\n".join(environment.lines()))
    for study in args.studies:
        runs: dict[str, list] = {"eubo": [], "random": []}
        start = time.perf_counter()
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for strategy in runs:  # interleaved
                runs[strategy].append(
                    run_one(study, strategy, seed, args.answers, args.sigma)
                )
        took = time.perf_counter() - start
        print(
            f"{study} (seeds {args.first_seed}..{args.first_seed + args.seeds - 1}, "
            f"sigma={args.sigma}, {took:.0f} s)"
        )
        for c in checkpoints:
            cells = []
            for strategy, rs in runs.items():
                r = torch.tensor([run[c - 1] for run in rs])
                se = r.std().item() / math.sqrt(len(r)) if len(r) > 1 else 0.0
                cells.append(f"{strategy} {r.mean():.3f} ± {se:.3f}")
            e = torch.tensor([run[c - 1] for run in runs["eubo"]])
            q = torch.tensor([run[c - 1] for run in runs["random"]])
            wins = int((e < q).sum())
            ratio = e.mean() / q.mean().clamp_min(1e-12)
            print(
                f"  after {c:2d}: {' | '.join(cells)} | eubo/random {ratio:.2f}, "
                f"eubo lower on {wins}/{len(e)} seeds",
                flush=True,
            )
