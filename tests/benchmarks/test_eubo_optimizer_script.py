"""``benchmarks/eubo_optimizer.py``: a tiny run of both prefbo arms."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("arm", ["maximize_eubo", "gen_candidates"])
def test_tiny_run_writes_the_table(load_benchmark, tmp_path, arm):
    bench = load_benchmark("eubo_optimizer")
    out = tmp_path / "eubo.md"
    argv = ["--problems", "Branin", "--models", "laplace", "--answers", "8"]
    argv += ["--seeds", "1", "--settings", "regret", "--repeats", "1"]
    text = bench.main(argv + ["--prefbo", arm, "--output", str(out)])
    assert out.read_text() == text
    assert bench.ARMS[arm] in text.splitlines()[0]
    rows = [r for r in text.splitlines() if r.startswith("| Branin | laplace")]
    assert [r.split(" | ")[3] for r in rows] == ["pair", "winner"]
    for row in rows:
        cells = row.strip("| ").split(" | ")
        assert cells[4] == "1" and float(cells[5]) > 0 and float(cells[6]) > 0
        if arm == "gen_candidates":  # BoTorch's question, found faster
            assert cells[9:12] == ["1.00", "0", "0"]
