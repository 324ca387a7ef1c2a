"""``benchmarks/variational_scale.py``: its metric and a tiny run."""

from __future__ import annotations


def test_the_metric_is_exact_for_the_truth(load_benchmark):
    bench = load_benchmark("variational_scale")
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
