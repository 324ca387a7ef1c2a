import multiprocessing

from prefbo.serve import flow
from prefbo.serve.worker import (
    config_from_store,
    run_worker,
    snapshot_once,
    work_once,
)


def test_a_round_queues_a_question_for_each_participant(store, make_config):
    config = make_config()
    store.set_study_source(config.source)
    assert config_from_store(store).source == config.source
    a, b = store.add_participant("ta", "a"), store.add_participant("tb", "b")
    assert work_once(store, config) == 2
    assert work_once(store, config) == 0  # nothing more to do
    q = flow.current(store, config, a)
    assert store.questions_of(a)[0]["origin"] == "model"
    # with two workers each takes its own participants
    assert work_once(store, config, index=1, workers=2) == 1  # a (id 1): seq 1
    assert work_once(store, config, index=0, workers=2) == 0  # b waits already
    nxt = flow.answer(store, config, a, q["question_id"], 0)
    assert nxt["seq"] == 1 and store.questions_of(a)[1]["origin"] == "model"
    assert len(store.questions_of(b)) == 1


def test_snapshots_follow_the_answers(store, make_config):
    config = make_config()
    pid = store.add_participant("t", "p")
    assert snapshot_once(store, config, -1) == 0  # no answers: empty favourites
    q = flow.current(store, config, pid)
    flow.answer(store, config, pid, q["question_id"], 0)
    assert snapshot_once(store, config, 0) == 1
    snap = store.latest_snapshot()
    assert snap["answers"] == 1 and "1" in snap["data"]["participants"]
    assert snapshot_once(store, config, 1) == 1  # unchanged: none stored
    assert store.latest_snapshot()["id"] == snap["id"]


def test_the_loop_stops_on_its_event(store, make_config):
    config = make_config()
    store.set_study_source(config.source)
    stop = multiprocessing.get_context("spawn").Event()
    stop.set()
    run_worker(store.url, ".", stop)  # returns at once
