import json

import pytest
from sqlalchemy import text

from prefbo.serve import flow
from prefbo.serve.config import study_from_dict
from prefbo.serve.schema import database_url
from prefbo.serve.store import Store, state_tag, token_hash


@pytest.fixture
def config(tmp_path):
    return study_from_dict(
        {"space": [{"name": "x", "type": "continuous", "lower": 0, "upper": 1}]},
        root=tmp_path,
        name="study.toml",
    )


def test_participants_tokens_are_stored_hashed(store):
    pid = store.add_participant("secret-token", "Ann")
    assert store.participant_by_token("secret-token").id == pid
    assert store.participant_by_token("other") is None
    with store.engine.connect() as conn:
        stored = conn.execute(text("SELECT token_hash FROM participants")).scalar()
    assert stored == token_hash("secret-token") and "secret-token" not in stored
    [row] = store.participants()
    assert (row.label, row.answers, row.last) == ("Ann", 0, None)
    assert "token_hash" not in row.as_dict()
    assert [e.kind for e in store.events()] == ["join"]


def test_secrets_and_study_are_made_once(store):
    made = iter(["first", "second"])
    assert store.secret("join_code", lambda: next(made)) == "first"
    assert store.secret("join_code", lambda: next(made)) == "first"
    assert store.study_source() is None
    store.set_study_source({"q": 2})
    assert store.study_source() == {"q": 2}


def test_snapshots_latest_first(store):
    assert store.latest_snapshot() is None
    store.add_snapshot(3, {"population": None})
    store.add_snapshot(5, {"population": {"mean": 1.0}})
    snap = store.latest_snapshot()
    assert snap.answers == 5 and snap.data == {"population": {"mean": 1.0}}
    assert json.loads(json.dumps(snap.as_dict()))["data"] == snap.data


def test_the_write_probe_commits_a_row(store):
    assert store.write_probe() is None
    assert store.write_probe() is None  # the second time the row is updated
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT key FROM meta WHERE key = 'health'")).all()
    assert len(rows) == 1


def test_the_write_probe_of_a_read_only_database_says_why(tmp_path):
    path = tmp_path / "s.db"
    Store(database_url(str(path))).engine.dispose()
    # opened read-only (the tests run as root, whom a chmod does not stop)
    read_only = Store(f"sqlite:///file:{path}?mode=ro&uri=true")
    assert read_only.study_source() is None  # reads work
    error = read_only.write_probe()
    assert error == "OperationalError: attempt to write a readonly database"
    read_only.engine.dispose()


def test_the_write_probe_waits_briefly_for_a_lock_held_elsewhere(store, monkeypatch):
    from prefbo.serve import store as store_module

    monkeypatch.setattr(store_module, "PROBE_SECONDS", 0.2)
    other = store_module.open_engine(store.url)
    with other.connect() as holder:
        if store.engine.dialect.name == "sqlite":
            holder.exec_driver_sql("BEGIN EXCLUSIVE")
        else:
            holder.exec_driver_sql("BEGIN")
            holder.exec_driver_sql("LOCK TABLE meta IN ACCESS EXCLUSIVE MODE")
        error = store.write_probe()
        holder.rollback()
    other.dispose()
    assert error is not None and ("locked" in error or "lock" in error), error
    assert store.write_probe() is None  # the lock gone: healthy again
    if store.engine.dialect.name == "sqlite":  # the pool's timeout is back
        with store.engine.connect() as conn:
            busy = conn.exec_driver_sql("PRAGMA busy_timeout").scalar()
        assert busy == int(store_module.BUSY_SECONDS * 1000)


def test_the_write_probe_fails_when_a_table_is_gone(store):
    with store.transaction() as conn:
        conn.exec_driver_sql("ALTER TABLE questions RENAME TO questions_gone")
    try:
        error = store.write_probe()
    finally:
        with store.transaction() as conn:
            conn.exec_driver_sql("ALTER TABLE questions_gone RENAME TO questions")
    assert error is not None and "questions" in error, error


def test_answers_of_some_participants_and_the_progress_of_each(store, config):
    a, b = store.add_participant("ta", "a"), store.add_participant("tb", "b")
    assert store.answer_progress() == {}
    qa = flow.current(store, config, a)
    qa1 = flow.answer(store, config, a, qa["question_id"], 1)
    qb = flow.current(store, config, b)
    flow.answer(store, config, b, qb["question_id"], 0)
    flow.answer(store, config, a, qa1["question_id"], 0)
    progress = store.answer_progress()
    assert {pid: p.answers for pid, p in progress.items()} == {a: 2, b: 1}
    assert [(r.participant_id, r.seq) for r in store.answered([a])] == [
        (a, 0),
        (a, 1),
    ]
    assert len(store.answered()) == 3 and store.answered([]) == []
    # an undo and the same count again: the pair still changes
    flow.undo(store, config, a, qa1["question_id"])
    assert store.answer_progress()[a].answers == 1
    flow.answer(store, config, a, qa1["question_id"], 1)
    again = store.answer_progress()[a]
    assert again.answers == 2 and again != progress[a]


def test_the_model_state_is_saved_and_replaced(store):
    assert store.model_state() is None and store.model_state_tag() is None
    store.set_model_state("first")
    first = store.model_state_tag()
    store.set_model_state("second")
    assert store.model_state() == "second"
    assert store.model_state_tag() == state_tag("second") != first


def test_answered_keys_and_answers_from_a_seq(store, config):
    a, b = store.add_participant("ta", "a"), store.add_participant("tb", "b")
    for pid, count in ((a, 3), (b, 1)):
        q = flow.current(store, config, pid)
        for _ in range(count):
            q = flow.answer(store, config, pid, q["question_id"], 0)
    everything = store.answered()
    keys = store.answered_keys([a, b])
    assert keys == {
        pid: [
            (r.seq, r.id, r.answered_at) for r in everything if r.participant_id == pid
        ]
        for pid in (a, b)
    }
    assert store.answered_keys([]) == {}
    tail = store.answered_from({a: 1, b: 0})
    assert tail == [r for r in everything if (r.participant_id, r.seq) != (a, 0)]
    assert store.answered_from({}) == []
