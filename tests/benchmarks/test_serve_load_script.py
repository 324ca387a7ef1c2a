"""``benchmarks/serve_load.py``: short load runs of ``prefbo serve`` (50
participants, ~8 s), one steady and one with the server SIGKILLed and
restarted, keep every acknowledged answer exactly once. The two runs go
side by side (each with its own server and database) and end with a SIGKILL
of the server (no wait for its worker's round) to keep the test short; only
"some answers per second" is asserted of the figures."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("sqlalchemy")


def test_preference_takes_the_hue_nearer_200_circularly(load_benchmark):
    bench = load_benchmark("serve_load")
    assert bench.prefer([{"hue": 10.0}, {"hue": 190.0}]) == 1
    assert bench.prefer([{"hue": 359.0}, {"hue": 60.0}]) == 1
    assert bench.prefer([{"hue": 30.0}, {"hue": 300.0}]) == 1  # 170 vs 100 away
    assert bench.demo_study()["answers_per_participant"] == 12  # edited on a copy


def test_load_runs_keep_every_acknowledged_answer_exactly_once(
    load_benchmark, tmp_path
):
    bench = load_benchmark("serve_load")
    (tmp_path / "steady").mkdir()
    (tmp_path / "kill").mkdir()

    def one(kill: bool):
        folder = tmp_path / ("kill" if kill else "steady")
        return bench.run(
            participants=50,
            seconds=8.0,
            kill=kill,
            seed=3,
            folder=folder,
            leftover_wait=0.0,
            final_stop="kill",  # quicker than a clean stop
        )

    with ThreadPoolExecutor(2) as pool:
        steady, killed = pool.map(one, [False, True])
    for result in (steady, killed):
        assert result.problems() == []
        assert result.acked > 0 and result.answers_per_s > 0
        assert len(result.latencies) == result.acked
        assert not result.lost and not result.duplicated and not result.unexpected
        assert not result.invariant
        assert result.db_answered == result.acked + result.in_doubt_committed
        assert sum(result.origins_answered.values()) == result.db_answered
        assert "| acknowledged answers lost | 0 |" in bench.report(result)
    assert steady.in_doubt == steady.transport_errors == 0
    assert steady.in_doubt_committed == 0
    assert killed.restart_s is not None and killed.kill_at_s is not None
    assert killed.transport_errors > 0  # the clients did see the crash
    assert killed.in_doubt_committed <= killed.in_doubt
    assert not killed.wrong_after_restart


def test_a_given_database_is_emptied_of_prefbo_tables_only(load_benchmark, tmp_path):
    from sqlalchemy import create_engine, inspect, text

    bench = load_benchmark("serve_load")
    assert bench.database_url(tmp_path / "s.db") == f"sqlite:///{tmp_path / 's.db'}"
    url = "postgresql+psycopg://u@h/db?options=-csearch_path%3Dx"
    assert bench.database_url(url) == url
    db = bench.database_url(tmp_path / "s.db")
    engine = create_engine(db)
    with engine.begin() as conn:
        for name in ("meta", "questions", "leases", "mine"):
            conn.execute(text(f"CREATE TABLE {name} (id INTEGER)"))
    bench.empty_database(db)
    assert inspect(engine).get_table_names() == ["mine"]
    bench.empty_database(db)  # none left: nothing to do
    engine.dispose()
