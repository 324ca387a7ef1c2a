"""Smoke test of ``benchmarks/laplace_vs_botorch.py`` on a tiny configuration."""

from __future__ import annotations

import math
from pathlib import Path

import pytest


def _table_row(text: str, section: str, first_cell: str) -> list[str]:
    """The cells of the row starting with ``first_cell`` in a markdown section."""
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in section {section!r}:\n{body}")


def _assert_tables_well_formed(text: str) -> None:
    """Every row of every markdown table has as many cells as its header."""
    widths: list[int] = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            widths.append(line.count("|"))
        elif widths:
            assert len(set(widths)) == 1, widths
            widths = []


def _is_finite_number(cell: str) -> bool:
    try:
        return math.isfinite(float(cell))
    except ValueError:
        return False


def test_tiny_run_writes_markdown(
    tmp_path: Path, load_benchmark, capsys: pytest.CaptureFixture
) -> None:
    bench = load_benchmark("laplace_vs_botorch")
    output = tmp_path / "report.md"
    status = bench.main(
        [
            "--sizes", "30:60",
            "--batch-size", "2", "--batch-n", "20", "--batch-m", "40",
            "--num-restarts", "2", "--raw-samples", "16", "--acqf-maxiter", "10",
            "--posterior-repeats", "2", "--n-test", "40", "--n-test-pairs", "100",
            "--seed", "3",
            "--output", str(output),
        ]
    )  # fmt: skip
    assert status == 0
    assert output.is_file()
    text = output.read_text(encoding="utf-8")
    assert text in capsys.readouterr().out
    assert "--sizes 30:60 --batch-size 2" in text  # the exact command is recorded
    _assert_tables_well_formed(text)

    row = _table_row(text, "One data set", "30")
    assert len(row) == 13
    assert row[1] == "60"
    assert all(_is_finite_number(cell) for cell in row), row
    for accuracy in (float(row[11]), float(row[12])):
        assert 0.0 <= accuracy <= 1.0

    agreement = _table_row(text, "Agreement and diagnostics", "30")
    assert all(_is_finite_number(cell) for cell in agreement), agreement

    batched = _table_row(text, "Batched fits", "2")
    assert batched[1:3] == ["20", "40"]
    assert all(_is_finite_number(cell) for cell in batched), batched


def test_failure_skip_and_warnings_are_reported_not_raised(
    load_benchmark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_benchmark("laplace_vs_botorch")

    class Broken:
        def __init__(self, *args: object, **kwargs: object) -> None:
            import warnings

            warnings.warn("about to fail", RuntimeWarning, stacklevel=2)
            raise RuntimeError("boom | bang")

    monkeypatch.setitem(bench.LIBRARIES, bench.BOTORCH, (Broken, Broken))
    output = tmp_path / "report.md"
    bench.main(
        [
            "--sizes", "30:60,40:80", "--skip-botorch-above", "35",
            "--batch-size", "0",
            "--num-restarts", "2", "--raw-samples", "16", "--acqf-maxiter", "10",
            "--posterior-repeats", "1", "--n-test", "40", "--n-test-pairs", "100",
            "--output", str(output),
        ]
    )  # fmt: skip
    text = output.read_text(encoding="utf-8")
    row = _table_row(text, "One data set", "30")
    assert len(row) == 13  # the "|" in the message does not break the table
    _assert_tables_well_formed(text)
    assert _is_finite_number(row[2]) and _is_finite_number(row[11])
    assert row[3] == "error: RuntimeError: boom / bang"
    assert row[12].startswith("n/a")
    skipped = _table_row(text, "One data set", "40")
    assert _is_finite_number(skipped[2]) and _is_finite_number(skipped[11])
    assert skipped[3] == "skipped" and skipped[12] == "skipped"
    assert "## Batched fits" not in text
    assert "- BoTorch: 1\n" in text  # the warm-up one is counted separately
    assert "- warm-up: 1\n" in text
    assert "RuntimeWarning: about to fail" in text
