import multiprocessing
import subprocess
import sys
import time

import pytest

from prefbo.serve import flow
from prefbo.serve.engine import QuestionEngine
from prefbo.serve.sharing import Share
from prefbo.serve.worker import (
    Hyperparameters,
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
    assert store.questions_of(a)[0].origin == "model"
    # with two workers each takes its own participants: w1 ranks first of
    # the two live ones (even ids), w2 second (odd ids)
    one, two = Share(store, "w1"), Share(store, "w2")
    one.renew(), two.renew(), one.renew()
    assert work_once(store, config, one) == 0  # b (id 2) waits already
    assert work_once(store, config, two) == 1  # a (id 1): seq 1
    assert store.lease_holders() == {a: "w2"}
    nxt = flow.answer(store, config, a, q["question_id"], 0)
    assert nxt["seq"] == 1 and store.questions_of(a)[1].origin == "model"
    assert len(store.questions_of(b)) == 1


def test_snapshots_follow_the_answers(store, make_config):
    config = make_config()
    pid = store.add_participant("t", "p")
    assert snapshot_once(store, config, -1) == 0  # no answers: empty favourites
    q = flow.current(store, config, pid)
    flow.answer(store, config, pid, q["question_id"], 0)
    assert snapshot_once(store, config, 0) == 1
    snap = store.latest_snapshot()
    assert snap.answers == 1 and "1" in snap.data["participants"]
    assert snapshot_once(store, config, 1) == 1  # unchanged: none stored
    assert store.latest_snapshot().id == snap.id


def test_the_loop_stops_on_its_event(store, make_config):
    config = make_config()
    store.set_study_source(config.source)
    stop = multiprocessing.get_context("spawn").Event()
    stop.set()
    run_worker(store.url, ".", stop)  # returns at once


def test_a_participant_who_moved_on_gets_the_question_one_later(
    store, make_config, monkeypatch
):
    config = make_config()
    pid = store.add_participant("t", "p")
    q = flow.current(store, config, pid)  # a random question 0, on screen
    real = QuestionEngine.propose_each

    def meanwhile(self, shown, shown_virtual=None):
        for item in real(self, shown, shown_virtual):
            # the participant answers while the worker fits: question 1 is
            # shown at once (uniform), so the worker's goes to question 2
            flow.answer(store, config, pid, q["question_id"], 0)
            yield item

    monkeypatch.setattr(QuestionEngine, "propose_each", meanwhile)
    assert work_once(store, config) == 1
    rows = store.questions_of(pid)
    assert [(r.seq, r.origin, r.based_on) for r in rows] == [
        (0, "random", 0),
        (1, "random", 1),
        (2, "model", 0),
    ]


def test_a_worker_ends_when_its_server_is_killed(tmp_path):
    # the server (here a plain process) starts a child that watches it; the
    # child must end soon after the server is SIGKILLed, even mid-round
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', "
            "'import os; from prefbo.serve.worker import _watch; "
            "parent = os.getppid(); "  # before the test can kill it
            "print(os.getpid(), flush=True); _watch(parent, 0.1)'])\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    with server.stdout:
        child = int(server.stdout.readline())
    server.kill()
    server.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(child):
        time.sleep(0.05)
    assert not _running(child)


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_hyperparameters_are_refitted_as_the_answers_grow(store, make_config):
    config = make_config()
    hyper = Hyperparameters()
    assert hyper.current(0) is None
    a, b = store.add_participant("ta", "a"), store.add_participant("tb", "b")
    for pid in (a, b):
        q = flow.current(store, config, pid)
        for _ in range(2):
            q = flow.answer(store, config, pid, q["question_id"], 0)
    assert work_once(store, config, hyper=hyper) == 2  # fits once
    assert hyper.at == 4 and hyper.state is not None
    assert hyper.current(13) is hyper.state  # fewer than 10 new answers
    assert hyper.current(14) is None  # 10 more: refit
    hyper.at = 100
    assert hyper.current(124) is hyper.state and hyper.current(125) is None


def test_the_workers_questions_keep_their_virtual_comparisons(
    store, make_config, monkeypatch
):
    # an individual participant answering the workers' questions: a question
    # with an option on a face of the sweetness range is stored with its
    # virtual comparison "a tenth of the range inside beats the face", and
    # the next question, made while it is on screen, is made with it
    config = make_config(model={"kind": "individual"}, answers_per_participant=12)
    seen = []
    real = QuestionEngine.propose_each

    def recording(self, shown, shown_virtual=None):
        seen.append(shown_virtual)
        yield from real(self, shown, shown_virtual)

    monkeypatch.setattr(QuestionEngine, "propose_each", recording)
    pid = store.add_participant("t", "p")
    carried = None
    for _ in range(11):
        while work_once(store, config):
            pass
        q = flow.current(store, config, pid)
        carried = store.questions_of(pid)[q["seq"]].virtual_comparisons
        if carried:
            break
        sweeter = max(range(2), key=lambda i: q["options"][i]["sweetness"])
        flow.answer(store, config, pid, q["question_id"], sweeter)
    assert carried, "no question on a face within 11 answers"
    for inner, face in carried:
        assert face[0] in (0.0, 1.0) and abs(inner[0] - face[0]) == pytest.approx(0.1)
        assert inner[1:] == face[1:]  # the size column has no faces
    if not store.questions_of(pid)[q["seq"] + 1 :]:
        assert work_once(store, config) == 1  # the next, made while q is shown
    assert {pid: carried} in seen


def test_an_answer_between_the_worker_s_reads_waits_for_the_next_round(
    store, make_config, monkeypatch
):
    # the question on screen is answered after the worker saw it on screen
    # and before it read the answers: its answer is not told twice (answered
    # and believed); the participant gets their question next round
    config = make_config(model={"kind": "individual"})
    pid = store.add_participant("t", "p")
    work_once(store, config)
    q = flow.current(store, config, pid)
    answered = store.answered

    def answering_meanwhile():
        monkeypatch.setattr(store, "answered", answered)
        flow.answer(store, config, pid, q["question_id"], 0)
        return answered()

    monkeypatch.setattr(store, "answered", answering_meanwhile)
    told = []
    real = QuestionEngine.__init__

    def recording(self, config, answered, *args):
        told.append(len(answered))
        real(self, config, answered, *args)

    monkeypatch.setattr(QuestionEngine, "__init__", recording)
    assert work_once(store, config) == 0 and told == []
    assert work_once(store, config) == 1 and told == [1]


def test_a_lease_given_up_mid_round_is_not_stored_for(store, make_config, monkeypatch):
    r"""A worker's heartbeat can give a participant's lease up during a
    round (another worker joined and the participant falls to it now): the
    question made for them is not offered for storing, so the new holder's
    is the only one made for that seq."""
    config = make_config()
    a, b = store.add_participant("ta", "a"), store.add_participant("tb", "b")
    share = Share(store, "w1")
    share.renew()
    offered = []
    queue = store.queue_question

    def recorded(question, holder=None, seconds=0.0):
        offered.append(question.participant_id)
        return queue(question, holder, seconds)

    monkeypatch.setattr(store, "queue_question", recorded)
    real = QuestionEngine.propose_each

    def losing(self, shown, shown_virtual=None):
        for pid, options in real(self, shown, shown_virtual):
            # the heartbeat gives b up, in the database and the share
            renewal = store.renew_share("w1", share.lease_seconds, lambda live: [b])
            share.held = renewal.held
            yield pid, options

    monkeypatch.setattr(QuestionEngine, "propose_each", losing)
    assert work_once(store, config, share) == 1
    assert offered == [a]
