"""``benchmarks/harness/stores.py``: JSON-lines stores of runs."""

from __future__ import annotations

from benchmarks.harness import stores


def test_a_missing_store_is_empty(tmp_path):
    assert stores.read(tmp_path / "none.jsonl") == []


def test_records_append_and_read_back_in_order(tmp_path):
    path = tmp_path / "runs.jsonl"
    stores.append(path, {"seed": 0, "regret": [0.5, 0.25]})
    stores.append(path, {"seed": 1}, {"seed": 2, "σ": 0.1})
    assert stores.read(path) == [
        {"seed": 0, "regret": [0.5, 0.25]},
        {"seed": 1},
        {"seed": 2, "σ": 0.1},
    ]
    assert path.read_text(encoding="utf-8").count("\n") == 3


def test_a_torn_last_line_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text('{"seed": 0}\n\n{"seed": 1}\n{"seed": 2, "regr', encoding="utf-8")
    assert stores.read(path) == [{"seed": 0}, {"seed": 1}]


def test_the_latest_record_of_a_key_replaces_earlier_ones_in_first_seen_order():
    records = [
        {"seed": 0, "v": "old"},
        {"seed": 1, "v": "only"},
        {"seed": 0, "v": "new"},
    ]
    kept = stores.latest(records, key=lambda r: r["seed"])
    assert kept == [{"seed": 0, "v": "new"}, {"seed": 1, "v": "only"}]
