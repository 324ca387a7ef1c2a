"""``benchmarks/pbo_regret.py``: a tiny run writes a finite table and a PNG."""

from __future__ import annotations

import math

import pytest


def test_tiny_run_writes_the_table_and_the_plot(load_benchmark, tmp_path):
    bench = load_benchmark("pbo_regret")
    argv = ["--problems", "Branin", "--seeds", "2", "--answers", "3"]
    argv += ["--configs", "botorch-eubo", "laplace-eubo", "laplace-random"]
    argv += ["--noises", "low", "--raw-samples", "16", "--maxiter", "10"]
    text = bench.main(argv + ["--output", str(tmp_path)])
    assert (tmp_path / "pbo_regret.md").read_text() == text
    assert (tmp_path / "pbo_regret.png").stat().st_size > 1000
    body = text.split("## Paired verdicts")[0]
    rows = [r for r in body.splitlines() if r.startswith("| ") and "---" not in r]
    rows = rows[1:]  # header
    assert [r.split(" | ")[0] for r in rows] == [
        "| botorch-eubo",
        "| laplace-eubo",
        "| laplace-random",
    ]
    for row in rows:
        cells = [c.strip() for c in row.strip("| ").split(" | ")]
        mean, se = (float(v) for v in cells[1].split(" ± "))
        assert math.isfinite(mean) and mean >= 0 and math.isfinite(se)
        assert math.isfinite(float(cells[3])) and float(cells[3]) > 0
        if cells[0] != "botorch-eubo":
            assert 0.0 <= float(cells[2]) <= 1.0
            assert math.isfinite(float(cells[4]))
            delta, _ = (float(v) for v in cells[5].split(" ± "))
            p_worse, p_better = float(cells[6]), float(cells[7])
            assert 0 < p_worse <= 1 and 0 < p_better <= 1
            assert p_worse + p_better >= 1  # the observed mean counts in both
    verdicts = text.split("## Paired verdicts")[1]
    assert "| laplace-eubo |" in verdicts and "| laplace-random |" in verdicts


def test_noise_is_scaled_by_the_spread(load_benchmark):
    bench = load_benchmark("pbo_regret")
    from prefbo.test_functions import Hartmann6

    assert bench.utility_spread(Hartmann6()) == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_test_matches_scipy_exact_permutation(load_benchmark, seed):
    stats = pytest.importorskip("scipy.stats")
    import torch

    bench = load_benchmark("pbo_regret")
    d = torch.randn(9, generator=torch.Generator().manual_seed(seed)) + 0.3
    p_worse, p_better = bench.paired_test(d)
    for alternative, p in (("greater", p_worse), ("less", p_better)):
        ref = stats.permutation_test(
            (d.numpy(),),
            lambda x: x.mean(),
            permutation_type="samples",
            alternative=alternative,
            n_resamples=10**6,
        )
        assert p == pytest.approx(ref.pvalue, abs=1e-9)


def test_paired_test_extremes(load_benchmark):
    import torch

    bench = load_benchmark("pbo_regret")
    p_worse, p_better = bench.paired_test(torch.ones(5))
    assert p_worse == pytest.approx(1 / 32) and p_better == 1.0
    p_worse, p_better = bench.paired_test(-torch.arange(1.0, 11.0))
    assert p_worse == 1.0 and p_better == pytest.approx(1 / 1024)
