r"""Traces of single preferential-BO runs: what the loop asked, why it stuck.

Runs :func:`pbo_regret.run_one` (same problems, person and first pairs as
``benchmarks/pbo_regret.py``) for a few seeds and configurations and records,
after every answer, the question (in the unit cube), the answer, the
recommendation, its regret and the fitted outputscale and lengthscales. It
writes ``<output>/pbo_traces_<problem>.json`` and a figure
``<output>/pbo_traces_<problem>.png``: per run, the regret and the outputscale
against the answers, and (2-D problems) every option asked, coloured by when.

Example (the runs discussed in ``results/pbo_regret_diagnosis.md``)::

    OMP_NUM_THREADS=1 python benchmarks/pbo_traces.py --problem Branin \
        --sigma 0.1 --seeds 9 15 --configs default flat-prior
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
import pbo_regret  # noqa: E402


def _hyper(model: Any) -> tuple[float, list[float]]:
    cm = model.covar_module
    ls = cm.base_kernel.lengthscale.detach().reshape(-1).tolist()
    return float(cm.outputscale.detach()), ls


def trace_run(problem: str, sigma: float, seed: int, config: str, answers: int):
    r"""One run's record with its per-answer trace."""
    u = pbo_regret.Utility(problem)
    steps: list[dict[str, Any]] = []

    def trace(k: int, loop: Any, pair: torch.Tensor, winner: int) -> None:
        model = loop.opt.model if hasattr(loop, "opt") else loop.model
        os_, ls = _hyper(model)
        steps.append(
            {
                "answers": k,
                "question": u.to_unit(pair).tolist(),
                "winner": winner,
                "recommendation": u.to_unit(loop.best()).tolist(),
                "outputscale": os_,
                "lengthscales": ls,
            }
        )

    rec = pbo_regret.run_one(problem, sigma, seed, config, answers, trace=trace)
    for s, r in zip(steps, rec["regret"]):
        s["regret"] = r
    return {**rec, "trace": steps}


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    r"""Regret, outputscale and (2-D) the options asked, one row per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    two_d = len(runs[0]["trace"][0]["question"][0]) == 2
    cols = 3 if two_d else 2
    fig, axes = plt.subplots(
        len(runs), cols, figsize=(4.0 * cols, 2.8 * len(runs)), squeeze=False
    )
    for row, run in zip(axes, runs):
        T = run["trace"]
        k = [t["answers"] for t in T]
        name = f"{run['config']}, seed {run['seed']}"
        row[0].plot(k, [t["regret"] for t in T], "o-", ms=3)
        row[0].set(title=f"{name}: regret", yscale="log", xlabel="answers")
        row[1].plot(k, [t["outputscale"] for t in T], "o-", ms=3)
        row[1].set(title="fitted outputscale", yscale="log", xlabel="answers")
        if two_d:
            Q = torch.tensor([t["question"] for t in T])  # k x 2 x 2
            c = torch.arange(len(T)).repeat_interleave(2).numpy()
            row[2].scatter(*Q.reshape(-1, 2).T.numpy(), c=c, cmap="viridis", s=14)
            best = torch.tensor(T[-1]["recommendation"])
            row[2].plot(*best.numpy(), "r*", ms=14)
            row[2].set(
                title="options asked (dark: early)",
                xlim=(-0.03, 1.03),
                ylim=(-0.03, 1.03),
            )
        for ax in row:
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python benchmarks/pbo_traces.py", description=__doc__.splitlines()[0]
    )
    p.add_argument("--problem", choices=list(pbo_regret.PROBLEMS), default="Branin")
    p.add_argument("--sigma", type=float, default=0.1)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument(
        "--configs", nargs="+", default=["default"], choices=list(pbo_regret.CONFIGS)
    )
    p.add_argument("--answers", type=int, default=30)
    p.add_argument("--output", type=Path, default=pbo_regret.RESULTS)
    args = p.parse_args(argv)
    runs = []
    for seed in args.seeds:
        for config in args.configs:
            run = trace_run(args.problem, args.sigma, seed, config, args.answers)
            print(f"{config:>12s} seed {seed}: final regret {run['regret'][-1]:.4f}")
            runs.append(run)
    stem = args.output / f"pbo_traces_{args.problem}"
    stem.with_suffix(".json").write_text(json.dumps(runs))
    plot(runs, stem.with_suffix(".png"))


if __name__ == "__main__":
    main()
