"""``benchmarks/sampler_throughput.py``: its ESS estimator and a tiny run."""

from __future__ import annotations

import math

import numpy as np


def test_ess_of_ar1_chains_matches_the_known_autocorrelation_time(load_benchmark):
    # AR(1) with coefficient a has integrated autocorrelation time (1 + a)/(1 - a)
    bench = load_benchmark("sampler_throughput")
    rng = np.random.default_rng(0)
    n, chains = 4000, 8
    coefs = np.array([0.0, 0.5, 0.9])
    x = np.empty((n, chains, 3))
    x[0] = rng.standard_normal((chains, 3)) / np.sqrt(1 - coefs**2)
    for t in range(1, n):
        x[t] = coefs * x[t - 1] + rng.standard_normal((chains, 3))
    ess = bench.effective_sample_size(x)
    expected = n * chains * (1 - coefs) / (1 + coefs)
    np.testing.assert_allclose(ess, expected, rtol=0.15)


def test_tiny_run_writes_a_well_formed_table(load_benchmark, tmp_path):
    bench = load_benchmark("sampler_throughput")
    out = tmp_path / "throughput.md"
    argv = ["--sizes", "8", "--chains", "1,4", "--budget-s", "0.05"]
    text = bench.main([*argv, "--burnin-s", "0.02", "--output", str(out)])
    assert out.read_text() == text
    rows = [line for line in text.splitlines() if line.startswith("| 8 |")]
    assert len(rows) == 6  # three samplers x two chain counts
    header = next(line for line in text.splitlines() if line.startswith("| m |"))
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == header.count("|") - 1
        assert math.isfinite(float(cells[10]))  # ESS/s min
    bench.main([*argv, "--burnin-s", "0.02", "--output", str(out), "--append"])
    assert out.read_text().count("# Truncated-Gaussian samplers") == 2
