"""``benchmarks/serve_lone.py``: its arms' study files and its page."""

from __future__ import annotations

import pytest


def test_each_served_arm_has_its_kind(load_benchmark):
    bench = load_benchmark("serve_lone")
    kinds = {arm: bench.config_of(arm, 0).model_kind for arm in bench.ARMS[:-1]}
    assert kinds == {
        "collaborative": "collaborative",
        "batched": "collaborative",
        "population": "population",
        "individual": "individual",
    }


def test_the_page_pairs_each_arm_with_the_collaborative_one(load_benchmark, tmp_path):
    from benchmarks.harness import stores

    bench = load_benchmark("serve_lone")
    args = bench.parse_args(["--output", str(tmp_path), "--seeds", "30", "31"])
    assert args.store == tmp_path / "serve_lone.jsonl"
    for i, seed in enumerate(bench.SEEDS[:8]):
        for arm, r12 in (("collaborative", 0.1 + i / 100), ("loop", 0.5 + i / 100)):
            record = {"arm": arm, "seed": seed, "regret_3": 1.0, "regret_12": r12}
            stores.append(args.store, {**record, "seconds": 2.0})
    page = bench.report(args.store)
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    collaborative = rows[1].split(" | ")
    assert collaborative[2] == "0.135 (0.135)" and collaborative[3] == ""
    loop = rows[2].split(" | ")
    # every loop regret higher: the smallest two-sided p of 8 pairs, 2 / 2^8
    assert float(loop[3]) == pytest.approx(2 / 256, rel=0.01) and loop[4] == "0"
    assert "Seeds 30-37 (8)" in page
