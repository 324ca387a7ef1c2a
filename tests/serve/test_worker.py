import functools
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest
from starlette.testclient import TestClient

from prefbo.serve import flow
from prefbo.serve.app import StudyApp
from prefbo.serve.engine import QuestionEngine
from prefbo.serve.render import Renderer
from prefbo.serve.store import Store
from prefbo.serve.worker import (
    Hyperparameters,
    WorkerSupervisor,
    config_from_store,
    health_report,
    run_worker,
    snapshot_once,
    start_process,
    work_once,
    worker_threads,
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
    assert [(r["seq"], r["origin"], r["based_on"]) for r in rows] == [
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
        carried = store.questions_of(pid)[q["seq"]]["virtual_comparisons"]
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


def _wait(condition, timeout, every=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return condition()


def _proc(pid, name):
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read()


def _served_study(tmp_path, make_config):
    config = make_config()
    store = Store(f"sqlite:///{tmp_path / 'study.db'}")
    store.set_study_source(config.source)
    return config, store


def test_a_killed_worker_is_restarted_and_logged(
    tmp_path, make_config, caplog, monkeypatch
):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    _, store = _served_study(tmp_path, make_config)
    caplog.set_level(logging.WARNING, logger="prefbo.serve")
    with WorkerSupervisor(store.url, str(tmp_path), 2, poll=0.1) as supervisor:
        before = supervisor.status()
        assert [w["index"] for w in before] == [0, 1]
        assert all(w["alive"] and w["restarts"] == 0 for w in before)
        # each worker's thread count is in its environment from its start
        # (read once it runs python: a child forked but not yet started
        # shows its parent's first environment)
        assert _wait(lambda: b"spawn_main" in _proc(before[1]["pid"], "cmdline"), 5)
        block = _proc(before[1]["pid"], "environ").split(b"\0")
        environ = dict(e.split(b"=", 1) for e in block if b"=" in e)
        threads = str(worker_threads(2)).encode()
        assert environ[b"OMP_NUM_THREADS"] == environ[b"MKL_NUM_THREADS"] == threads
        os.kill(before[1]["pid"], signal.SIGKILL)
        started = time.monotonic()
        assert _wait(lambda: supervisor.status()[1]["restarts"] == 1, 5.0)
        assert time.monotonic() - started < 5.0
        after = supervisor.status()
        assert after[1]["alive"] and after[1]["pid"] != before[1]["pid"]
        assert after[1]["last_exit"] == "killed by SIGKILL"
        assert after[0] == before[0]  # the other worker untouched
    [record] = [r for r in caplog.records if "worker 1" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert f"worker 1 (pid {before[1]['pid']}) died: killed by SIGKILL" in (
        record.getMessage()
    )
    assert all(not w["alive"] for w in supervisor.status())  # stopped


def test_a_worker_that_keeps_dying_is_restarted_with_a_growing_pause(caplog):
    caplog.set_level(logging.WARNING, logger="prefbo.serve")

    def crashing(index):  # a worker that dies at once, as one that cannot start
        return start_process(exec, ("raise SystemExit(3)",), name="crashing")

    supervisor = WorkerSupervisor(
        "sqlite://", ".", 1, poll=0.02, backoff=0.1, max_backoff=0.4, start=crashing
    )
    with supervisor:
        assert _wait(lambda: len(caplog.records) >= 4, 30.0)
    messages = [r.getMessage() for r in caplog.records]
    assert all("exited with status 3" in m for m in messages)
    # a pause that doubles with each death in a row, up to max_backoff
    pauses = [m.rsplit("restarting it in ", 1)[1] for m in messages[:4]]
    assert pauses == ["0.1 s", "0.2 s", "0.4 s", "0.4 s"]


def test_a_worker_ended_by_sigterm_is_restarted_as_information(caplog):
    # as at a shutdown, when a service manager signals the whole group
    caplog.set_level(logging.INFO, logger="prefbo.serve")

    def sleeper(index):
        return start_process(exec, ("import time; time.sleep(60)",), name="sleeper")

    with WorkerSupervisor("sqlite://", ".", 1, poll=0.05, start=sleeper) as sup:
        os.kill(sup.status()[0]["pid"], signal.SIGTERM)
        assert _wait(lambda: sup.status()[0]["restarts"] == 1, 5.0)
    died = [r for r in caplog.records if "died" in r.getMessage()]
    assert [r.levelno for r in died] == [logging.INFO]
    assert "killed by SIGTERM" in died[0].getMessage()


def test_a_worker_gets_its_thread_count_in_its_environment(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert [worker_threads(k) for k in (1, 3, 8, 20)] == [8, 2, 1, 1]
    monkeypatch.setenv("OMP_NUM_THREADS", "5")  # the user's: kept
    assert worker_threads(2) is None
    monkeypatch.delenv("OMP_NUM_THREADS")
    out = tmp_path / "threads.txt"
    code = (
        "import os, torch\n"
        f"open({str(out)!r}, 'w').write("
        "f\"{torch.get_num_threads()} {os.environ['MKL_NUM_THREADS']}\")\n"
    )
    # 1, not torch's default here (torch caps a count at the cores)
    p = start_process(exec, (code,), name="threads", threads=1)
    p.join(timeout=60)
    assert p.exitcode == 0 and out.read_text() == "1 1"
    assert "OMP_NUM_THREADS" not in os.environ  # this process's is restored


def _health_client(store, config, supervisor=None):
    health = functools.partial(health_report, store, supervisor)
    app = StudyApp(store, config, Renderer(config), "J", "R", health=health)
    return TestClient(app.app(), raise_server_exceptions=False)


def test_health_is_503_while_a_worker_is_dead(tmp_path, make_config):
    config, store = _served_study(tmp_path, make_config)

    def sleeper(index):
        return start_process(exec, ("import time; time.sleep(60)",), name="sleeper")

    supervisor = WorkerSupervisor(
        store.url, str(tmp_path), 2, poll=0.05, backoff=60.0, start=sleeper
    )
    with supervisor, _health_client(store, config, supervisor) as client:
        r = client.get("/healthz")
        assert r.status_code == 200
        body = r.json()
        assert body["ok"] and body["database"] == {"ok": True, "error": None}
        assert [w["alive"] for w in body["workers"]] == [True, True]
        os.kill(body["workers"][0]["pid"], signal.SIGKILL)  # restarted in 60 s
        assert _wait(lambda: client.get("/healthz").status_code == 503, 5.0)
        body = client.get("/healthz").json()
        assert not body["ok"] and body["database"]["ok"]
        dead = body["workers"][0]
        assert not dead["alive"] and dead["last_exit"] == "killed by SIGKILL"
        assert 50 < dead["restart_in"] <= 60 and body["workers"][1]["alive"]


def test_health_is_503_when_the_database_takes_no_write(tmp_path, make_config):
    config, store = _served_study(tmp_path, make_config)
    store.engine.dispose()
    read_only = Store(f"sqlite:///file:{tmp_path / 'study.db'}?mode=ro&uri=true")
    with _health_client(read_only, config) as client:
        r = client.get("/healthz")
    assert r.status_code == 503
    assert r.json() == {
        "ok": False,
        "database": {
            "ok": False,
            "error": "OperationalError: attempt to write a readonly database",
        },
        "workers": [],
    }
    # without a report of its own, the app probes the database alone
    app = StudyApp(read_only, config, Renderer(config), "J", "R").app()
    with TestClient(app) as client:
        r = client.get("/healthz")
    assert r.status_code == 503 and r.json()["database"]["ok"] is False
    app = StudyApp(store, config, Renderer(config), "J", "R").app()
    with TestClient(app) as client:
        r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["ok"] is True
