"""``benchmarks/space_regret.py``: its utilities' optimum and a tiny run."""

from __future__ import annotations

import math


def test_the_mixed_optimum_is_the_best_design_of_a_fine_grid(load_benchmark):
    bench = load_benchmark("space_regret")
    contrasts = [0.5 * 4 ** (i / 200) for i in range(201)]  # 0.5..2, log grid
    brute = max(
        bench.mixed_utility({"font": f, "size": s, "contrast": c, "weight": w})
        for f in bench.FONTS
        for w in bench.WEIGHTS
        for s in range(8, 25)
        for c in contrasts
    )
    assert math.isclose(bench.mixed_best(), brute, abs_tol=1e-4)
    assert brute <= bench.mixed_best() + 1e-12


def test_a_tiny_run_prints_regret_per_strategy(load_benchmark, capsys):
    bench = load_benchmark("space_regret")
    bench.main(["--seeds", "1", "--answers", "3", "--first-seed", "0"])
    out = capsys.readouterr().out
    assert "mixed (seeds 0..0" in out and "pool (seeds 0..0" in out
    assert out.count("eubo/random") == 2
