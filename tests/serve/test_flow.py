from concurrent.futures import ThreadPoolExecutor

import pytest

from prefbo.serve import flow
from prefbo.serve.rows import MadeQuestion


def _join(store, name="p"):
    return store.add_participant(f"token-{name}", name)


def test_answers_commit_with_the_next_question_until_done(store, make_config):
    config = make_config()
    pid = _join(store)
    q0 = flow.current(store, config, pid)
    assert not q0["done"] and q0["seq"] == 0 and len(q0["options"]) == 2
    assert set(q0["options"][0]) == {"sweetness", "size"}
    # asking again shows the same question
    assert flow.current(store, config, pid)["question_id"] == q0["question_id"]
    q = q0
    for k in range(1, 4):
        q = flow.answer(store, config, pid, q["question_id"], k % 2)
        assert q["seq"] == k and q["answered"] == k
    done = flow.answer(store, config, pid, q["question_id"], 0)
    last = q["question_id"]
    assert done == {"done": True, "answered": 4, "total": 4, "previous_id": last}
    assert flow.current(store, config, pid)["done"]
    rows = store.questions_of(pid)
    assert [r.choice for r in rows] == [1, 0, 1, 0]
    assert [p.finished_at is not None for p in store.participants()] == [True]
    assert [e.kind for e in store.events()] == ["join"] + ["answer"] * 4


def test_bad_answers_store_nothing(store, make_config):
    config = make_config()
    pid, other = _join(store, "a"), _join(store, "b")
    q = flow.current(store, config, pid)
    theirs = flow.current(store, config, other)
    with pytest.raises(flow.Invalid, match=r"in \[0, 2\); got 2"):
        flow.answer(store, config, pid, q["question_id"], 2)
    with pytest.raises(flow.Invalid, match="integer option index; got '0'"):
        flow.answer(store, config, pid, q["question_id"], "0")
    with pytest.raises(flow.Invalid, match="no preference"):
        flow.answer(store, config, pid, q["question_id"], None)
    with pytest.raises(flow.Invalid, match="question_id must be a string"):
        flow.answer(store, config, pid, 7, 0)
    with pytest.raises(flow.NotFound):  # another participant's question
        flow.answer(store, config, pid, theirs["question_id"], 0)
    with pytest.raises(flow.NotFound):
        flow.answer(store, config, pid, "nonsense", 0)
    assert store.count_answers() == 0
    flow.answer(store, config, pid, q["question_id"], 0)
    with pytest.raises(flow.Conflict, match="answered already"):  # a double submit
        flow.answer(store, config, pid, q["question_id"], 1)
    assert store.count_answers() == 1
    assert store.questions_of(pid)[0].choice == 0


def test_undo_shows_the_question_again_and_keeps_the_trail(store, make_config):
    config = make_config(no_preference=True)
    pid = _join(store)
    q0 = flow.current(store, config, pid)
    with pytest.raises(flow.Invalid, match="question_id must be the id"):
        flow.undo(store, config, pid, None)
    with pytest.raises(flow.NotFound, match="no such question"):
        flow.undo(store, config, pid, "nope")
    q1 = flow.answer(store, config, pid, q0["question_id"], None)  # no preference
    assert q1["previous_id"] == q0["question_id"]
    back = flow.undo(store, config, pid, q0["question_id"])
    assert back["question_id"] == q0["question_id"] and back["answered"] == 0
    with pytest.raises(flow.Conflict, match="not the current question"):
        flow.answer(store, config, pid, q1["question_id"], 0)  # stale
    again = flow.answer(store, config, pid, q0["question_id"], 1)
    assert again["question_id"] == q1["question_id"]  # the same next question
    rows = store.questions_of(pid)
    assert (rows[0].choice, rows[0].no_preference) == (1, False)
    kinds = [(e.kind, e.data.get("choice")) for e in store.events()]
    assert kinds == [("join", None), ("answer", None), ("undo", None), ("answer", 1)]


def test_an_undo_withdraws_the_named_answer_once(store, make_config):
    config = make_config()
    pid = _join(store)
    q = flow.current(store, config, pid)
    ids = []
    for _ in range(3):
        ids.append(q["question_id"])
        q = flow.answer(store, config, pid, q["question_id"], 0)
    with pytest.raises(flow.Conflict, match="only the latest answer"):
        flow.undo(store, config, pid, ids[0])
    first = flow.undo(store, config, pid, ids[2])
    repeat = flow.undo(store, config, pid, ids[2])  # a double click, a 2nd tab
    assert first["question_id"] == repeat["question_id"] == ids[2]
    assert store.count_answers() == 2
    assert [e.kind for e in store.events()].count("undo") == 1


def test_concurrent_undos_of_one_answer_withdraw_it_once(store, make_config):
    config = make_config()
    pid = _join(store)
    q = flow.current(store, config, pid)
    for _ in range(3):
        last = q["question_id"]
        q = flow.answer(store, config, pid, q["question_id"], 0)
    with ThreadPoolExecutor(4) as pool:
        replies = list(
            pool.map(lambda _: flow.undo(store, config, pid, last), range(4))
        )
    assert {r["question_id"] for r in replies} == {last}
    assert store.count_answers() == 2


def test_a_replaced_question_is_gone_and_its_successor_differs(store, make_config):
    config = make_config()
    pid = _join(store)
    q0 = flow.current(store, config, pid)
    assert store.queue_question(MadeQuestion(pid, 1, [[0.5, 0.5], [0.1, 0.9]], 0))
    q1 = flow.replace(store, config, pid, q0["question_id"], "no file")
    assert q1["seq"] == 0 and q1["options"] != q0["options"]
    assert [r.seq for r in store.questions_of(pid)] == [0]  # the worker's goes
    q2 = flow.replace(store, config, pid, q1["question_id"], "again")
    assert q2["options"] not in (q0["options"], q1["options"])
    with pytest.raises(flow.Conflict, match="not the current question"):
        flow.replace(store, config, pid, q0["question_id"], "stale")
    events = [e for e in store.events() if e.kind == "replace"]
    assert [e.data["reason"] for e in events] == ["no file", "again"]
    assert events[0].question_id == q0["question_id"]


def test_without_a_worker_question_a_random_one_is_shown(store, make_config):
    config = make_config()
    pid = _join(store)
    q0 = flow.current(store, config, pid)
    [row] = store.questions_of(pid)
    assert row.origin == "random" and q0["options"][0] != q0["options"][1]
    # the same draw for the same participant, question and seed
    assert flow._random_options(config, pid, 0) == row.options


def test_a_newcomer_waits_briefly_for_the_models_first_question(store, make_config):
    import threading
    import time

    # the population kind: no model question in the study yet, no wait
    population = make_config(model={"kind": "population"})
    started = time.monotonic()
    flow.current(store, population, _join(store, "early"))
    assert time.monotonic() - started < flow.FIRST_QUESTION_WAIT / 2
    # the collaborative kind's workers ask from its prior before any answer:
    # the study's very first newcomer waits for theirs too
    config = make_config(model={"kind": "collaborative"})
    first = _join(store, "first")
    made = MadeQuestion(first, 0, [[0.1, 0.2], [0.9, 0.8]], 0)
    worker = threading.Timer(0.1, store.queue_question, (made,))
    worker.start()
    flow.current(store, config, first)
    worker.join()
    assert store.questions_of(first)[0].origin == "model"
    late = _join(store, "late")
    made = MadeQuestion(late, 0, [[0.3, 0.2], [0.7, 0.8]], 0)
    worker = threading.Timer(0.1, store.queue_question, (made,))
    worker.start()
    q0 = flow.current(store, config, late)
    worker.join()
    assert q0["options"][0]["sweetness"] == pytest.approx(3.0)
    assert store.questions_of(late)[0].origin == "model"
    # no worker question within the wait: a uniform one
    last = _join(store, "last")
    started = time.monotonic()
    flow.current(store, config, last)
    assert time.monotonic() - started >= flow.FIRST_QUESTION_WAIT
    assert store.questions_of(last)[0].origin == "random"
    # the population kind waits once a worker has made a question
    started = time.monotonic()
    flow.current(store, population, _join(store, "after"))
    assert time.monotonic() - started >= flow.FIRST_QUESTION_WAIT
    # the individual kind does not wait: a newcomer's model knows nothing
    solo = make_config(model={"kind": "individual"})
    started = time.monotonic()
    flow.current(store, solo, _join(store, "solo"))
    assert time.monotonic() - started < flow.FIRST_QUESTION_WAIT / 2
