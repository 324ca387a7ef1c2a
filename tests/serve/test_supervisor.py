import functools
import logging
import os
import signal
import time

from starlette.testclient import TestClient

from prefbo.serve.app import StudyApp
from prefbo.serve.render import Renderer
from prefbo.serve.sharing import worker_name
from prefbo.serve.store import Store
from prefbo.serve.supervisor import (
    WORKER_NICENESS,
    WorkerSupervisor,
    health_report,
    start_process,
)
from prefbo.utils.threads import child_threads


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


def _niceness(pid):
    tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    return {os.getpriority(os.PRIO_PROCESS, t) for t in tids}


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
        threads = str(child_threads(2)).encode()
        assert environ[b"OMP_NUM_THREADS"] == threads
        # no MKL count: MKL then follows the OpenMP count that prefbo's
        # policy lowers per thread for small work (an MKL_NUM_THREADS of 2
        # kept MKL on two threads under load: a 2-answer fit took 40 s, not 4)
        assert b"MKL_NUM_THREADS" not in environ
        assert environ[b"PREFBO_THREADS"] == b"auto"  # the policy stays on
        # a worker yields the cores to the server's requests (set once its
        # target runs, after its imports)
        nicer = min(19, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS)
        for w in before:  # every thread: those its imports started too
            assert _wait(lambda p=w["pid"]: _niceness(p) == {nicer}, 60)
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


def test_a_worker_that_keeps_dying_is_restarted_with_a_growing_pause(caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="prefbo.serve")

    def crashing(index):  # a worker that dies at once, as one that cannot start
        return start_process(exec, ("raise SystemExit(3)",), name="crashing")

    supervisor = WorkerSupervisor(
        f"sqlite:///{tmp_path / 'study.db'}",
        ".",
        1,
        poll=0.02,
        backoff=0.1,
        max_backoff=0.4,
        start=crashing,
    )
    with supervisor:
        assert _wait(lambda: len(caplog.records) >= 4, 30.0)
    messages = [r.getMessage() for r in caplog.records]
    assert all("exited with status 3" in m for m in messages)
    # a pause that doubles with each death in a row, up to max_backoff
    pauses = [m.rsplit("restarting it in ", 1)[1] for m in messages[:4]]
    assert pauses == ["0.1 s", "0.2 s", "0.4 s", "0.4 s"]


def test_a_dead_workers_leases_are_released_at_once(tmp_path, make_config):
    # without it the others wait up to a lease's seconds to take its
    # participants over (here a minute)
    config, store = _served_study(tmp_path, make_config)
    pid = store.add_participant("tok", "p")

    def sleeper(index):
        return start_process(exec, ("import time; time.sleep(60)",), name="sleeper")

    with WorkerSupervisor(store.url, ".", 1, poll=0.05, start=sleeper) as sup:
        worker = sup.status()[0]["pid"]
        name = worker_name(worker)
        store.renew_share(name, 60.0, lambda live: [])
        assert store.claim_leases(name, [pid], 60.0) == {pid}
        os.kill(worker, signal.SIGKILL)
        assert _wait(lambda: sup.status()[0]["restarts"] == 1, 5.0)
        assert store.lease_holders() == {}
        assert store.renew_share("other", 60.0, lambda live: []).live == ["other"]


def test_a_worker_ended_by_sigterm_is_restarted_as_information(caplog, tmp_path):
    # as at a shutdown, when a service manager signals the whole group
    caplog.set_level(logging.INFO, logger="prefbo.serve")

    def sleeper(index):
        return start_process(exec, ("import time; time.sleep(60)",), name="sleeper")

    url = f"sqlite:///{tmp_path / 'study.db'}"
    with WorkerSupervisor(url, ".", 1, poll=0.05, start=sleeper) as sup:
        os.kill(sup.status()[0]["pid"], signal.SIGTERM)
        assert _wait(lambda: sup.status()[0]["restarts"] == 1, 5.0)
    died = [r for r in caplog.records if "died" in r.getMessage()]
    assert [r.levelno for r in died] == [logging.INFO]
    assert "killed by SIGTERM" in died[0].getMessage()


def test_a_worker_gets_its_thread_count_in_its_environment(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert [child_threads(k) for k in (1, 3, 8, 20)] == [8, 2, 1, 1]
    monkeypatch.setenv("OMP_NUM_THREADS", "5")  # the user's: kept
    assert child_threads(2) is None
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")  # also the user's
    assert child_threads(2) is None
    monkeypatch.delenv("MKL_NUM_THREADS")
    monkeypatch.setenv("PREFBO_THREADS", "off")  # the policy off: kept off
    assert child_threads(2) is None
    monkeypatch.setenv("PREFBO_THREADS", "auto")
    assert child_threads(2) == 4
    monkeypatch.delenv("PREFBO_THREADS")
    out = tmp_path / "threads.txt"
    code = (
        "import os, torch\n"
        f"open({str(out)!r}, 'w').write("
        "f\"{torch.get_num_threads()} {os.environ.get('MKL_NUM_THREADS')}\")\n"
    )
    # 1, not torch's default here (torch caps a count at the cores)
    p = start_process(exec, (code,), name="threads", threads=1)
    p.join(timeout=60)
    assert p.exitcode == 0 and out.read_text() == "1 None"
    assert "OMP_NUM_THREADS" not in os.environ  # this process's is restored
    assert "PREFBO_THREADS" not in os.environ


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
