import pytest
from sqlalchemy import text

from prefbo.exceptions import InputDataError
from prefbo.serve import flow
from prefbo.serve.rows import Progress
from prefbo.serve.schema import (
    SCHEMA_VERSION,
    database_url,
    migrate,
    open_engine,
    schema_version,
)
from prefbo.serve.store import Store


def test_a_new_database_gets_the_schema_in_wal_mode(tmp_path):
    url = database_url(str(tmp_path / "s.db"))
    assert url == f"sqlite:///{tmp_path / 's.db'}"
    assert database_url("postgresql://u@h/db") == "postgresql://u@h/db"
    store = Store(url)
    with store.engine.connect() as conn:
        assert schema_version(conn) == SCHEMA_VERSION
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    # opening it again migrates nothing
    assert migrate(store.engine) == SCHEMA_VERSION


def test_a_newer_schema_is_refused(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    with store.transaction() as conn:
        conn.execute(text("UPDATE meta SET value = '99' WHERE key = 'schema_version'"))
    with pytest.raises(InputDataError, match="schema version 99.*upgrade prefbo"):
        migrate(open_engine(store.url))


def test_a_version_1_database_gains_the_virtual_comparisons_column(store):
    # version 1 kept no virtual comparisons: its questions get none (null)
    pid = store.add_participant("t", "Ann")
    with store.transaction() as conn:
        conn.execute(text("ALTER TABLE questions DROP COLUMN virtual_comparisons"))
        conn.execute(text("UPDATE meta SET value = '1' WHERE key = 'schema_version'"))
        conn.execute(
            text(
                "INSERT INTO questions (id, participant_id, seq, options, origin, "
                "based_on, created_at, answered_at, choice, no_preference) VALUES "
                "('q0', :pid, 0, '[[0.5], [0.7]]', 'model', 0, 1.0, 2.0, 1, false)"
            ),
            {"pid": pid},
        )
    assert migrate(store.engine) == 1
    with store.engine.connect() as conn:
        assert schema_version(conn) == SCHEMA_VERSION == 5
    (q,) = store.answered()
    assert q.options == [[0.5], [0.7]] and q.virtual_comparisons is None
    assert store.answer_progress() == {pid: Progress(1, 2.0)}


def test_a_version_3_database_gains_each_participants_progress(store, make_config):
    # version 3 counted the answers from the questions: the migration counts
    # them once onto the participants' rows, and the steps keep them after
    config = make_config()
    a, b, c = (store.add_participant(f"t{i}", f"p{i}") for i in range(3))
    for pid, answers in ((a, 2), (b, 1)):
        for _ in range(answers):
            q = flow.current(store, config, pid)["question_id"]
            flow.answer(store, config, pid, q, 0)
    flow.current(store, config, c)  # shown, not answered
    before = {p.id: (p.answers, p.last) for p in store.participants()}
    with store.transaction() as conn:
        conn.execute(text("ALTER TABLE participants DROP COLUMN answers"))
        conn.execute(text("ALTER TABLE participants DROP COLUMN changed_at"))
        conn.execute(text("UPDATE meta SET value = '3' WHERE key = 'schema_version'"))
    assert migrate(store.engine) == 3
    assert {p.id: (p.answers, p.last) for p in store.participants()} == before
    assert before[a][0] == 2 and before[b][0] == 1 and before[c] == (0, None)
    assert set(store.answer_progress()) == {a, b}
    q = flow.current(store, config, b)["question_id"]
    flow.answer(store, config, b, q, 1)
    assert store.answer_progress()[b].answers == 2 == store.count_answers() - 2


def test_a_version_4_database_keeps_the_kind_its_study_was_served_with(store):
    # version 4 was written while a study file without model.kind served
    # the population kind: its stored study is given that kind, so that a
    # later default does not change a running study's model
    space = [{"name": "x", "type": "continuous", "lower": 0, "upper": 1}]
    store.set_study_source({"space": space, "model": {"strategy": "eubo"}})
    with store.transaction() as conn:
        conn.execute(text("UPDATE meta SET value = '4' WHERE key = 'schema_version'"))
    assert migrate(store.engine) == 4
    assert store.study_source() == {
        "space": space,
        "model": {"strategy": "eubo", "kind": "population"},
    }


def test_a_stored_study_without_a_model_table_or_naming_its_kind(tmp_path):
    space = [{"name": "x", "type": "continuous", "lower": 0, "upper": 1}]
    for source, kind in (
        ({"space": space}, "population"),
        ({"space": space, "model": {"kind": "individual"}, "q": 3}, "individual"),
    ):
        store = Store(f"sqlite:///{tmp_path / (kind + '.db')}")
        store.set_study_source(source)
        with store.transaction() as conn:
            conn.execute(
                text("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
            )
        migrate(store.engine)
        assert store.study_source()["model"]["kind"] == kind
        store.engine.dispose()
