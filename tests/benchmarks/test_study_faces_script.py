"""``benchmarks/study_faces.py``: its people and its page."""

from __future__ import annotations

import torch


def test_each_persons_best_lies_on_the_face_x_1(load_benchmark):
    bench = load_benchmark("study_faces")
    for p in range(bench.PEOPLE):
        u = bench.utility(p)
        best = bench.GRID[u(bench.GRID).argmax()]
        assert float(best[0]) == 1.0
        assert abs(float(best[1]) - (0.3 + 0.1 * p)) < 0.01
        inside = torch.tensor([[0.9, float(best[1])]], dtype=torch.float64)
        assert float(u(best.unsqueeze(0)) - u(inside)) > 0.19  # a tenth inside


def test_the_page_pairs_the_arms_over_every_participant(load_benchmark, tmp_path):
    from benchmarks.harness import stores

    bench = load_benchmark("study_faces")
    args = bench.parse_args(["--output", str(tmp_path)])
    assert bench.report(args.store).startswith("No seed")
    for i, seed in enumerate(bench.SEEDS[:4]):
        for arm, regret in (("default", 0.3), ("none", 0.01 * i)):
            record = {"arm": arm, "seed": seed, "seconds": 1.0}
            for p in range(bench.PEOPLE):
                record[f"regret_{p}"], record[f"x_{p}"] = regret + p / 100, 0.9
            stores.append(args.store, record)
    page = bench.report(args.store)
    assert "Seeds 70-73 (4)" in page
    assert "| 1 | 0.300 (0.300) | 0.900 (0.900) | 0.015 (0.015) |" in page
    assert "lower for 12)" in page
