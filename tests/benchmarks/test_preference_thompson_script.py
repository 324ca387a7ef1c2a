"""``benchmarks/preference_thompson.py``: a tiny run writes its report."""

from __future__ import annotations

import math


def test_quick_run_writes_its_report(load_benchmark, tmp_path):
    bench = load_benchmark("preference_thompson")
    out = tmp_path / "report.md"
    text = bench.main(["--quick", "--output", str(out)])
    assert out.read_text() == text
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == len(bench.METHODS)
    for row in rows:
        regret = float(row.strip("|").split("|")[1].split("±")[0])
        assert math.isfinite(regret) and regret >= 0
    assert "Thompson lower on" in text
    # a run depends on its seed only: the same command gives the same figures
    again = bench.main(["--quick", "--output", str(tmp_path / "again.md")])

    def figures(report: str) -> str:
        return report.split("Set-up")[1].split("Run time")[0]

    assert figures(again) == figures(text)
