"""``benchmarks/preference_thompson.py``: a tiny run writes its report, only
the published setting writes into ``benchmarks/results/``, the hand-written
section is kept."""

from __future__ import annotations

import math
import tempfile


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
    assert "Thompson lower on" in text and "Wilcoxon" in text
    # a run depends on its seed only: the same command gives the same figures
    again = bench.main(["--quick", "--output", str(tmp_path / "again.md")])

    def figures(report: str) -> str:
        return report.split("Set-up")[1].split("Run time")[0]

    assert figures(again) == figures(text)


def test_quick_run_never_writes_into_the_results_directory(
    load_benchmark, tmp_path, monkeypatch
):
    bench = load_benchmark("preference_thompson")
    results = tmp_path / "results"
    monkeypatch.setattr(bench, "RESULTS", results)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    assert bench.output_path(bench.parse([])) == results / "preference_thompson.md"
    assert bench.output_path(bench.parse(["--seeds", "3"])) == (
        tmp_path / "tmp" / "prefbo-quick" / "preference_thompson.md"
    )
    text = bench.main(["--quick"])
    assert not results.exists()
    written = tmp_path / "tmp" / "prefbo-quick" / "preference_thompson.md"
    assert written.read_text() == text


def test_rerun_keeps_the_hand_written_section(load_benchmark, tmp_path):
    bench = load_benchmark("preference_thompson")
    out = tmp_path / "report.md"
    out.write_text("old figures\n<!-- hand -->\n*Written by hand.*\n<!-- /hand -->\n")
    text = bench.main(["--quick", "--output", str(out)])
    assert "<!-- hand -->\n*Written by hand.*\n<!-- /hand -->" in text
    assert "old figures" not in text
