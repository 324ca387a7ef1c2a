"""``benchmarks/variational_scale.py``: its data, its metric and a tiny run."""

from __future__ import annotations

import torch


def test_data_follow_the_probit_model_and_the_metric_is_exact_for_the_truth(
    load_benchmark,
):
    bench = load_benchmark("variational_scale")
    data, u = bench.make_data(20_000, 50, seed=1)
    w, l = data.comparisons[:, 0], data.comparisons[:, 1]
    assert (w != l).all()
    # P(answer agrees with the utility) = E[Φ(|Δ|/√2)] over the random pairs
    agree = ((u[w] - u[l]) > 0).double().mean()
    i = torch.cat([w, l])
    j = torch.cat([l, w])
    expected = torch.special.ndtr((u[i] - u[j]).abs() / 2**0.5).mean()
    assert abs(float(agree - expected)) < 0.02
    X, u_test, pairs = bench.test_set()
    assert bench.accuracy(u_test, u_test, pairs) == 1.0
    assert bench.accuracy(-u_test, u_test, pairs) == 0.0


def test_tiny_run_writes_a_report(load_benchmark, tmp_path):
    bench = load_benchmark("variational_scale")
    out = tmp_path / "report.md"
    argv = ["--sizes", "2000", "--steps", "8", "--laplace-size", "2000"]
    text = bench.main(argv + ["--in-process", "--output", str(out)])
    assert out.read_text() == text
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert [r.split(" | ")[0] for r in rows] == [
        "| PairwiseLaplaceGP",
        "| VariationalPreferenceGP",
    ]
    accuracy = [float(r.split(" | ")[-1].rstrip(" |")) for r in rows]
    assert all(a > 0.7 for a in accuracy)
