"""``benchmarks/inducing_bo_report.py``: paired statistics and the kept
hand-written section."""

from __future__ import annotations

import argparse
import math

import pytest
from scipy.stats import binomtest, wilcoxon


def test_paired_statistics_by_hand(load_benchmark):
    rep = load_benchmark("inducing_bo_report")
    a = [1.0, 2.0, 3.0, 0.5, 4.0]
    b = [2.0, 2.0, 5.0, 1.0, 3.0]
    s = rep.paired(a, b)
    d = [-1.0, 0.0, -2.0, -0.5, 1.0]
    mean = sum(d) / 5
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 4)
    assert s["mean"] == pytest.approx(mean)
    assert s["se"] == pytest.approx(sd / math.sqrt(5))
    assert (s["wins"], s["ties"], s["losses"]) == (3, 1, 1)
    assert s["p_sign"] == pytest.approx(binomtest(3, 4).pvalue)
    assert s["p_wilcoxon"] == pytest.approx(wilcoxon([-1.0, -2.0, -0.5, 1.0]).pvalue)
    tie = rep.paired([1.0, 2.0], [1.0, 2.0])
    assert tie["p_wilcoxon"] == tie["p_sign"] == 1.0 and tie["ties"] == 2
    assert rep.fmt(1.23456, 0.01) == "1.23 ± 0.01"
    assert rep.fmt(1.0, math.nan) == "1"


def _run(method: str, seed: int, regret: float) -> dict:
    rounds = [
        {"regret": regret, "alloc_s": 0.1, "diff_cvr": 0, "diff_anchored": 1,
         "rmse_top": 1.0, "max_z": 2.0, "max_cover": False, "mean_at_star": -1.0}
    ]  # fmt: skip
    if method.startswith("ent_"):
        rounds[0].update(q_min=0.5, ig_range=0.3)
    return {"kind": "run", "problem": "p", "m": 4, "seed": seed, "method": method,
            "config": "c", "regret0": 3.0, "rounds": rounds}  # fmt: skip


def test_report_keeps_the_hand_written_section(load_benchmark, tmp_path):
    rep = load_benchmark("inducing_bo_report")
    out = tmp_path / "r.md"
    out.write_text("old\n<!-- hand -->\nfindings\n<!-- /hand -->\nold tables\n")
    args = argparse.Namespace(
        seeds=[0, 1, 2], num_init=10, rounds=1, batch_size=5, adam_steps=1, lr=0.1,
        raw_samples=8, num_restarts=1, ts_steps=1, store=tmp_path / "s.jsonl",
        output=out, plot=tmp_path / "p.png",
    )  # fmt: skip
    records = [
        _run(m, s, r)
        for s in range(3)
        for m, r in (("cvr", 1.0 + s), ("cvr_anchored", 0.5 + s), ("ent_0.5", 0.5 + s))
    ]
    text = rep.build(records, args, [], {"cvr": "CVR"})
    assert (
        "<!-- hand -->\nfindings\n<!-- /hand -->" in text and "old tables" not in text
    )
    assert "| p | 4 | ent_0.5 − CVR | 3 | -0.5 ± 0 | 3/0/0 |" in text
    assert "| p | 4 | ent_0.5 | 0.5; 0.5 | 0.3 |" in text
