"""``benchmarks/harness/reports.py``: the command a page shows, hand-written
blocks, medians, where unpublished settings write."""

from __future__ import annotations

import shlex
import tempfile

import pytest

from benchmarks.harness import environment, reports


def test_the_command_is_the_runners_and_runs_as_written_in_a_shell():
    text = reports.command("pbo_regret", ["--seed-set", "untuned", "--report"], {})
    assert text == "python -m benchmarks pbo_regret --seed-set untuned --report"
    quoted = reports.command("x", ["--output", "a b.md"], {"OMP_NUM_THREADS": "1"})
    assert quoted == "OMP_NUM_THREADS=1 python -m benchmarks x --output 'a b.md'"
    assert shlex.split(quoted)[-1] == "a b.md"


def test_the_command_sets_the_thread_variables_this_process_has(monkeypatch):
    for name in environment.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert reports.command("threads") == "python -m benchmarks threads"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert reports.command("threads") == (
        "OMP_NUM_THREADS=1 python -m benchmarks threads"
    )
    assert reports.command("threads", env={}) == "python -m benchmarks threads"


def test_the_hand_written_block_of_a_page(tmp_path):
    page = tmp_path / "page.md"
    assert reports.hand_written(page) == ""  # no page yet
    page.write_text("# t\n\n<!-- hand -->\nWhy.\n\nMore.\n<!-- /hand -->\n| 1 |\n")
    assert reports.hand_written(page) == "<!-- hand -->\nWhy.\n\nMore.\n<!-- /hand -->"
    page.write_text("# t\n| 1 |\n")
    assert reports.hand_written(page) == ""


@pytest.mark.parametrize(
    ("values", "median"), [([4.0, 1.0, 3.0, 2.0], 2.5), ([3.0, 1.0, 2.0], 2.0)]
)
def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two(values, median):
    assert reports.median(values) == median


def test_unpublished_settings_write_under_the_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert reports.scratch_dir() == tmp_path / "prefbo-quick"
    path = reports.write(reports.scratch_dir() / "a" / "page.md", "text\n")
    assert path.read_text(encoding="utf-8") == "text\n"
