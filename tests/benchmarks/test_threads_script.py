"""``benchmarks/threads.py``: prefbo's speed as users run it."""

from __future__ import annotations

import pytest


@pytest.mark.slow  # twelve fresh interpreters
def test_a_small_run_measures_every_setting_and_records_them(load_benchmark, tmp_path):
    bench = load_benchmark("threads")
    out = tmp_path / "threads.md"
    argv = ["--fit-sizes", "40", "--cvr-sizes", "300", "--no-loop", "--load", "0"]
    text = bench.main([*argv, "--repeats", "1", "--output", str(out)])
    assert out.read_text() == text
    assert "torch 2." in text and "threadpoolctl" in text and "load average" in text
    rows = [line for line in text.splitlines() if line.startswith("| 40 |")]
    assert [r.split(" | ")[1] for r in rows] == [
        "as users run it",
        "torch default (no policy)",
        "one thread",
    ]
    assert all(" s | " in r and "error" not in r for r in rows), rows


def test_each_setting_reaches_the_child_before_torch(load_benchmark):
    bench = load_benchmark("threads")
    assert bench.measure("cvr", "prefbo", 200, "one", 1)["torch_threads"] == 1
    env = bench.thread_environment("users")
    assert not any(v in env for v in bench.THREAD_VARIABLES)
    assert bench.thread_environment("default")["PREFBO_THREADS"] == "off"


def test_the_page_reports_slowdowns_as_users_run_it(load_benchmark):
    bench = load_benchmark("threads")
    args = bench.parse_args(["--fit-sizes", "800", "--cvr-sizes", "10000"])
    results = {
        ("idle", "fit", 800, "users", "prefbo"): {"seconds": 2.0},
        ("load", "fit", 800, "users", "prefbo"): {"seconds": 5.0},
        ("idle", "fit", 800, "users", "botorch"): {"seconds": 50.0},
        ("load", "fit", 800, "users", "botorch"): {"seconds": 200.0},
        ("idle", "loop", "users"): {
            "botorch": {"first": 0.2, "second": 0.3},
            "default": {"first": 0.05, "second": 0.06},
        },
        ("load", "loop", "users"): {
            "botorch": {"first": 0.8, "second": 0.9},
            "default": {"first": 0.1, "second": 0.3},
        },
    }
    rows = bench.slowdowns(results, args, [("idle", 0), ("load", 2)])
    assert "| fit 800 | 2.5x | 4.0x |" in rows
    assert "| cvr 10000 | - | - |" in rows
    assert "| loop, answers 1-30 | 2.0x | 4.0x |" in rows
    assert "| loop, answers 31-60 | 5.0x | 3.0x |" in rows
