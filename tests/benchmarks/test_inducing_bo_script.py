"""``benchmarks/inducing_bo.py``: a tiny end-to-end run writes its report."""

from __future__ import annotations

import math
import re

import pytest


def test_problems_are_negated_and_their_optima_attained(load_benchmark):
    bench = load_benchmark("inducing_bo")
    import torch

    f, optimum = bench.make_problem("ackley5")
    assert optimum == 0.0
    assert float(f(torch.full((1, 5), 0.5, dtype=torch.float64))) == pytest.approx(
        0.0, abs=1e-12
    )
    f, optimum = bench.make_problem("hartmann6")
    x_star = torch.tensor(
        [[0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573]],
        dtype=torch.float64,
    )
    assert optimum == pytest.approx(3.32237, abs=1e-4)
    assert float(f(x_star)) == pytest.approx(optimum, abs=1e-4)
    assert (f(torch.rand(100, 6, dtype=torch.float64)) <= optimum).all()


def test_tiny_run_writes_table_and_plot(load_benchmark, tmp_path):
    bench = load_benchmark("inducing_bo")
    out, png = tmp_path / "report.md", tmp_path / "regret.png"
    argv = (
        "--seeds 1 --rounds 1 --batch-size 8 --num-init 48 --inducing 10 "
        "--adam-steps 5 --raw-samples 32 --num-restarts 2 --ts-steps 5 "
        "--pref-init 10"
    ).split()
    text = bench.main(argv + ["--output", str(out), "--plot", str(png)])
    assert out.read_text() == text
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 2 * len(bench.ALLOCATORS) + len(bench.PREFERENCE_METHODS)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        regret = float(cells[3].split("±")[0])
        assert math.isfinite(regret) and regret >= 0
        assert math.isfinite(float(cells[4]))
        if cells[5] != "–":
            assert math.isfinite(float(cells[5])) and float(cells[5]) >= 0
    assert len(re.findall(r"^- .*M = 10: ENT-DPP", text, flags=re.M)) == 2
    assert "branin preference: Thompson pairs" in text
