r"""Recommendation rules on the same runs: is the final answer's drift a rule's fault?

On the untuned seeds many runs the regret benchmark counts as stuck had
told a design of low regret after answer 20 and recommend a worse one at
the end (``results/pbo_regret_diagnosis.md``, section 12). The loop's
questions do not depend on its recommendation (EUBO does not use it), so
rules can be compared on *identical* runs, free of the chaos that separates
runs asking different questions: each run of the loop's default
(``benchmarks/pbo_regret.py``'s setting, tuning seeds only) is made once,
and after 30 and 60 answers every rule below recommends a design from the
same optimiser state:

- ``mean``: the loop's ``best()``, the told design of highest posterior mean;
- ``mean-minus-sd``: the told design of highest mean minus one posterior sd;
- ``real-answers``: highest mean under the posterior of the person's answers
  alone (the virtual comparisons at the faces left out; same hyperparameters);
- ``cold-fit-real``: hyperparameters refitted from the defaults on the
  person's answers alone, highest mean under that model;
- ``cold-fit-all``: refitted from the defaults on every comparison;
- ``mean-last-5-fits``: highest posterior mean averaged over the models with
  the hyperparameters of the last five fits (every comparison);
- ``told-twice``: highest mean among designs asked at least twice;
- ``wins-minus-losses``: the told design with the most wins less losses
  (ties by the mean);
- ``box-mean``: the posterior mean's maximiser over the box (L-BFGS-B from
  the four told designs of highest mean and the best four of 1,024 uniform
  points).

Runs append to ``results/pbo_recommendation_rules.jsonl`` (a rerun skips
what it holds); ``--report`` prints, per budget and rule, the geometric
mean over runs of ``(r + 0.001) / (r_mean + 0.001)``, the mean regret and
the count of runs above 3x BoTorch's median of their cell (tuning store).

Run single-threaded, e.g.::

    OMP_NUM_THREADS=1 python benchmarks/pbo_recommendation_rules.py --shard 0/2 &
    OMP_NUM_THREADS=1 python benchmarks/pbo_recommendation_rules.py --shard 1/2
    python benchmarks/pbo_recommendation_rules.py --report

Without ``OMP_NUM_THREADS``, each of ``k`` shards runs on its share of the
cores (``_shard_threads.py``). A record carries the thread settings of its
run (``prefbo.utils.threads.describe()``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _shard_threads import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

import torch
from botorch.acquisition import PosteriorMean
from botorch.exceptions.errors import ModelFittingError
from botorch.optim import optimize_acqf
from torch import Tensor

from prefbo.loop.answers import Answer, pairs_from
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.fitted import seeded
from prefbo.loop.repeats import REPEAT_TOL

sys.path.insert(0, str(Path(__file__).parent))
import pbo_regret  # noqa: E402

STORE = pbo_regret.RESULTS / "pbo_recommendation_rules.jsonl"
BUDGETS = (30, 60)
BASE = "mean"


def _told(opt: Any) -> Tensor:
    return opt.data()[0]


def _mean(opt: Any, model: Any, X: Tensor) -> Tensor:
    with torch.no_grad(), expected_fit_warnings():
        post = model.posterior(opt._to_model(X).unsqueeze(-2))
    return post.mean.reshape(-1)


def _conditioned(opt: Any, data: tuple[Tensor, Tensor], kernel: Any) -> Any:
    r"""The loop's kind of model of ``data`` (model inputs, comparisons)."""
    with expected_fit_warnings():
        model = opt._kind.build(*data, kernel)
    return model.eval()


def _cold_fit(opt: Any, data: tuple[Tensor, Tensor]) -> Any:
    with seeded(opt.seed * 7919 + len(opt._tells)), expected_fit_warnings():
        fitted = opt._kind.build_for_fit(*data, None)
        with torch.enable_grad():
            try:
                opt._kind.fit(fitted, opt.fit_options)
            except ModelFittingError:  # the defaults, as the loop keeps them
                pass
    return _conditioned(opt, data, fitted.eval().covar_module)


def _last_fit(opt: Any) -> int:
    r"""The answer count of the fit the loop's model uses."""
    k = len(opt._tells)
    return k - k % opt.refit_every


def _every(opt: Any) -> tuple[Tensor, Tensor]:
    r"""Every comparison the loop's model holds, as the loop orders them."""
    return opt._model_data(opt._tells)


def _real(opt: Any) -> tuple[Tensor, Tensor]:
    r"""The person's answers alone (no virtual comparisons)."""
    designs, comps = pairs_from(
        [Answer(t.seq, t.options, t.answer) for t in opt._tells]
    )
    return opt._to_model(designs), comps


def _counts(opt: Any, told: Tensor) -> tuple[Tensor, Tensor]:
    r"""Per told design: how often it (or a design within ``REPEAT_TOL`` of
    it in the unit cube, the loop's own test of a repeat) was asked, and
    its wins less losses there."""
    asked = torch.zeros(len(told), dtype=torch.float64)
    score = torch.zeros(len(told), dtype=torch.float64)
    Z = opt.to_unit(told)
    for t in opt._tells:
        for i, x in enumerate(opt.to_unit(t.options)):
            hit = ((Z - x).abs().amax(-1) <= REPEAT_TOL).double()
            asked += hit
            score += hit if i == t.answer else -hit
    return asked, score


def rule_mean_minus_sd(opt: Any) -> Tensor:  # noqa: D103
    told = _told(opt)
    mean, sd = opt._mean_sd(opt._to_model(told))
    return told[int((mean - sd).argmax())]


def rule_real_answers(opt: Any) -> Tensor:  # noqa: D103
    told = _told(opt)
    model = _conditioned(opt, _real(opt), opt._fitted(_last_fit(opt)).covar_module)
    return told[int(_mean(opt, model, told).argmax())]


def rule_cold_fit_real(opt: Any) -> Tensor:  # noqa: D103
    told = _told(opt)
    return told[int(_mean(opt, _cold_fit(opt, _real(opt)), told).argmax())]


def rule_cold_fit_all(opt: Any) -> Tensor:  # noqa: D103
    told = _told(opt)
    return told[int(_mean(opt, _cold_fit(opt, _every(opt)), told).argmax())]


def rule_mean_last_5_fits(opt: Any) -> Tensor:  # noqa: D103
    told, last, data = _told(opt), _last_fit(opt), _every(opt)
    step = opt.refit_every
    fits = [c for c in range(last - 4 * step, last + 1, step) if c > 0]
    total = sum(
        _mean(opt, _conditioned(opt, data, opt._fitted(c).covar_module), told)
        for c in fits
    )
    return told[int(total.argmax())]


def rule_told_twice(opt: Any) -> Tensor:  # noqa: D103
    told = _told(opt)
    mean, _ = opt._mean_sd(opt._to_model(told))
    asked, _ = _counts(opt, told)
    mean = torch.where(asked >= 2, mean, torch.full_like(mean, -math.inf))
    return told[int(mean.argmax())] if bool(asked.max() >= 2) else opt.best()[0]


def rule_wins_minus_losses(opt: Any) -> Tensor:  # noqa: D103
    told = _told(opt)
    mean, _ = opt._mean_sd(opt._to_model(told))
    _, score = _counts(opt, told)
    best = score == score.max()
    return told[int(torch.where(best, mean, -math.inf).argmax())]


def rule_box_mean(opt: Any) -> Tensor:  # noqa: D103
    told, d = _told(opt), opt.dim
    mean, _ = opt._mean_sd(opt._to_model(told))
    acqf = PosteriorMean(opt.model)
    gen = torch.Generator().manual_seed(0)
    box = opt._model_box()
    raw = torch.rand(1024, d, generator=gen, dtype=torch.float64)
    raw = box[0] + (box[1] - box[0]) * raw  # the model's inputs
    with torch.no_grad(), expected_fit_warnings():
        values = acqf(raw.unsqueeze(-2))
    starts = torch.cat(
        [
            opt._to_model(told[mean.argsort(descending=True)[:4]]),
            raw[values.argsort(descending=True)[:4]],
        ]
    ).unsqueeze(-2)
    with expected_fit_warnings():
        x, _ = optimize_acqf(
            acqf, bounds=box, q=1, num_restarts=8, batch_initial_conditions=starts
        )
    return opt._from_model(x.detach().reshape(-1))


RULES: dict[str, Callable[[Any], Tensor]] = {
    BASE: lambda opt: opt.best()[0],
    "mean-minus-sd": rule_mean_minus_sd,
    "real-answers": rule_real_answers,
    "cold-fit-real": rule_cold_fit_real,
    "cold-fit-all": rule_cold_fit_all,
    "mean-last-5-fits": rule_mean_last_5_fits,
    "told-twice": rule_told_twice,
    "wins-minus-losses": rule_wins_minus_losses,
    "box-mean": rule_box_mean,
}


def run_rules(problem: str, sigma: float, seed: int, answers: int, budgets) -> dict:
    r"""One run of the loop's default; every rule's regret at ``budgets``."""
    u = pbo_regret.Utility(problem)
    found: dict[str, dict[str, float]] = {}

    def trace(k: int, loop: Any, pair: Tensor, winner: int) -> None:
        if k in budgets:
            found[str(k)] = {n: u.regret(rule(loop.opt)) for n, rule in RULES.items()}

    rec = pbo_regret.run_one(problem, sigma, seed, "default", answers, trace=trace)
    return {
        "problem": problem,
        "sigma": sigma,
        "seed": seed,
        "regret": [round(x, 5) for x in rec["regret"]],
        "rules": found,
        "threads": rec["threads"],
    }


def run(args: argparse.Namespace) -> None:
    r"""Every missing run of this shard on the tuning seeds."""
    done = {(r["problem"], r["sigma"], r["seed"]) for r in pbo_regret.load(args.store)}
    jobs = pbo_regret.pending(args, "tuning", ["default"], set())
    for p, s, seed, _ in jobs:
        if (p, s, seed) in done:
            continue
        rec = run_rules(p, s, seed, args.answers, args.budgets)
        with args.store.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(f"{p:>11s} σ={s:<5} seed {seed:>3d}: {rec['rules']}", flush=True)


def report(records: list[dict], reference: list[dict]) -> str:
    r"""The per-budget table of the rules against ``mean``."""
    cells: dict[tuple, list[list[float]]] = {}
    for r in reference:
        if r["config"] == pbo_regret.REFERENCE:
            cells.setdefault((r["problem"], r["sigma"]), []).append(r["regret"])
    lines = []
    budgets = sorted({b for r in records for b in r["rules"]}, key=int)
    for b in budgets:
        lines += [
            f"After {b} answers ({len(records)} runs):",
            "",
            "| rule | regret / mean's (geometric) | mean regret "
            "| runs above 3x BoTorch's median | runs where it differs from mean's |",
            "|---|---|---|---|---|",
        ]
        for name in RULES:
            ratios, total, above, differs = [], 0.0, 0, 0
            for r in records:
                g, g0 = r["rules"][b][name], r["rules"][b][BASE]
                differs += abs(g - g0) > 1e-9
                ratios.append(math.log((g + 1e-3) / (g0 + 1e-3)))
                total += g
                ref = cells[(r["problem"], r["sigma"])]
                above += g > 3 * statistics.median(x[int(b) - 1] for x in ref)
            geo = math.exp(sum(ratios) / len(ratios))
            lines.append(
                f"| `{name}` | {geo:.3f} | {total / len(records):.4f} | {above} "
                f"| {differs} |"
            )
        lines.append("")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:  # noqa: D103
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--problems", nargs="+", default=list(pbo_regret.PROBLEMS))
    p.add_argument("--sigmas", nargs="+", type=float, default=list(pbo_regret.SIGMAS))
    p.add_argument("--seeds", type=int, default=6, help="the first N tuning seeds")
    p.add_argument("--answers", type=int, default=BUDGETS[-1])
    p.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    p.add_argument("--shard", default="0/1", help="i/k: every k-th run from the i-th")
    p.add_argument("--store", type=Path, default=STORE)
    p.add_argument(
        "--reference",
        type=Path,
        default=pbo_regret.RESULTS / "pbo_regret_tuning.jsonl",
        help="store of BoTorch's runs on the tuning seeds (the stuck threshold)",
    )
    p.add_argument("--report", action="store_true")
    args = p.parse_args(argv)
    args.shard = tuple(int(v) for v in args.shard.split("/"))
    return args


def main(argv: Sequence[str] | None = None) -> str | None:  # noqa: D103
    args = parse_args(argv)
    if args.report:
        text = report(pbo_regret.load(args.store), pbo_regret.load(args.reference))
        print(text)
        return text
    run(args)
    return None


if __name__ == "__main__":
    main()
