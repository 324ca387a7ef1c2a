import io
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
from sqlalchemy.exc import OperationalError

from prefbo.cli import main as prefbo_main
from prefbo.serve import cli, flow, render
from prefbo.serve.cli import main, open_study, replay
from prefbo.serve.config import StudyFileError, study_from_dict
from prefbo.serve.schema import database_url
from prefbo.serve.store import Store


def _study_db(tmp_path, make_config, answers=3):
    config = make_config()
    url = f"sqlite:///{tmp_path / 'study.db'}"
    store = open_study(config, url)
    for name in ("a", "b"):
        pid = store.add_participant(f"t{name}", name)
        q = flow.current(store, config, pid)
        for _ in range(answers):
            q = flow.answer(store, config, pid, q["question_id"], 0)
    return config, store


def test_a_database_serves_one_study(tmp_path, make_config):
    config, store = _study_db(tmp_path, make_config, answers=0)
    assert open_study(config, store.url).study_source() == config.source
    with pytest.raises(StudyFileError, match="holds another study"):
        open_study(make_config(seed=9), store.url)


def test_replay_and_export_need_only_the_database(tmp_path, make_config):
    _study_db(tmp_path, make_config)
    out = replay(str(tmp_path / "study.db"))
    assert out["answers"] == 6 and out["population"]["sd"] >= 0
    assert set(out["participants"]) == {"1", "2"}
    text = io.StringIO()
    assert main(["replay", str(tmp_path / "study.db")], out=text) == 0
    assert json.loads(text.getvalue())["answers"] == 6
    text = io.StringIO()
    assert main(["export", str(tmp_path / "study.db")], out=text) == 0
    assert len(text.getvalue().strip().splitlines()) == 7  # header + 6 answers
    text = io.StringIO()
    main(["export", str(tmp_path / "study.db"), "--format", "json"], out=text)
    assert len(json.loads(text.getvalue())["questions"]) == 8  # 6 + 2 current


def test_replay_of_a_collaborative_study_refits_the_collaborative_model(
    tmp_path, make_config
):
    # as a worker's engine does, from the database alone: the population's
    # favourite and each participant's
    from prefbo.serve.collaborative import CollaborativeEngine

    config = make_config(model={"kind": "collaborative", "initial_random": 2})
    store = open_study(config, f"sqlite:///{tmp_path / 'study.db'}")
    for name in ("a", "b", "c"):
        pid = store.add_participant(f"t{name}", name)
        q = flow.current(store, config, pid)
        for _ in range(3):
            q = flow.answer(store, config, pid, q["question_id"], 0)
    out = replay(str(tmp_path / "study.db"))
    assert out["answers"] == 9 and out["population"] is not None
    engine = CollaborativeEngine(config, background=False)
    pids = [p.id for p in store.participants()]
    for pid in pids:
        engine.update(pid, store.answered([pid]))
    engine.maintain()
    expected = engine.favourites(pids)
    assert out["population"] == expected["population"]
    assert out["participants"] == expected["participants"]


def test_start_up_errors_name_the_field(tmp_path, capsys):
    bad = tmp_path / "study.toml"
    bad.write_text('q = 7\n[[space]]\nname = "x"\nlower = 0\nupper = 1\n')
    assert main([str(bad)]) == 2
    assert "q must be in [2, 4]; got 7" in capsys.readouterr().err
    assert prefbo_main(["serve", str(bad)]) == 2  # through the prefbo command
    assert "q must be in [2, 4]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["replay"])
    with pytest.raises(SystemExit):
        main([])


def test_export_and_replay_need_no_display_files(tmp_path):
    (tmp_path / "img").mkdir()
    for name in "ab":
        (tmp_path / "img" / f"{name}.png").write_bytes(b"x")
    pool = [
        {"name": "dish", "type": "items", "ids": ["a", "b"], "features": [[0.0], [1.0]]}
    ]
    display = {"kind": "files", "folder": "img", "pattern": "{dish}.png"}
    config = study_from_dict({"space": pool, "display": display}, root=tmp_path)
    store = open_study(config, f"sqlite:///{tmp_path / 'pool.db'}")
    pid = store.add_participant("t", "p")
    q = flow.current(store, config, pid)
    flow.answer(store, config, pid, q["question_id"], 0)
    for f in (tmp_path / "img").iterdir():
        f.unlink()
    (tmp_path / "img").rmdir()  # elsewhere, or the media gone
    text = io.StringIO()
    assert main(["export", str(tmp_path / "pool.db")], out=text) == 0
    assert "option0.dish" in text.getvalue()
    assert replay(str(tmp_path / "pool.db"))["answers"] == 1


def test_replay_and_export_of_a_missing_database_make_none(tmp_path, capsys):
    missing = tmp_path / "typo.db"
    for target in (str(missing), f"sqlite:///{missing}"):
        for argv in (["replay", target], ["export", target]):
            assert main(argv) == 2
            assert "no study database at" in capsys.readouterr().err
    assert not missing.exists()


def _workers(pid):
    r"""The pids of ``pid``'s spawned worker processes (Linux ``/proc``; not
    multiprocessing's resource tracker)."""
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                spawned = b"spawn_main" in fh.read()
        except OSError:
            continue
        if parent == pid and spawned:
            out.append(int(entry))
    return out


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc")
def test_the_server_ends_on_sigterm_to_its_process_group(tmp_path):
    # a service manager (systemd's default, `timeout`) signals the server and
    # its workers together, and a worker may have died before: a worker gone
    # while it waited on a shared stop event used to leave the server waiting for
    # it in the event for ever
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "prefbo.cli", "serve", "--demo", "--port", "0"]
    cmd += ["--db", str(tmp_path / "demo.db"), "--workers", "2"]
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        for line in proc.stdout:  # the links come once the workers started
            if "researcher's page" in line:
                break
        db = sqlite3.connect(tmp_path / "demo.db")
        deadline = time.monotonic() + 120
        while db.execute("SELECT count(*) FROM workers").fetchone()[0] < 2:
            assert time.monotonic() < deadline, "the workers never announced"
            time.sleep(0.2)  # each announces itself in its first round
        db.close()
        time.sleep(1.0)  # the workers wait for their next round
        workers = _workers(proc.pid)
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGKILL)  # one dies while it waits
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=40) == 0
        time.sleep(1.0)  # the survivor, ended with the server, is reaped
        assert not os.path.exists(f"/proc/{workers[1]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()


SPACE_TOML = '[[space]]\nname = "x"\ntype = "continuous"\nlower = 0\nupper = 1\n'


def _callable_study(function):
    return SPACE_TOML + f'[display]\nkind = "callable"\nfunction = "{function}"\n'


def _start(tmp_path, capsys, study, *argv, **modules):
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(source)
    (tmp_path / "study.toml").write_text(study)
    out = io.StringIO()
    status = main([str(tmp_path / "study.toml"), *argv], out=out)
    return status, out.getvalue(), capsys.readouterr().err


def _refused(started, *named):
    status, out, err = started
    assert status == 2
    assert "join at" not in out and "researcher" not in out  # no link printed
    assert err.startswith("prefbo serve: error: ") and err.count("\n") == 1, err
    for text in named:
        assert text in err


def test_a_display_module_that_cannot_be_imported_is_one_line(tmp_path, capsys):
    study = _callable_study("cli_syntax:f")
    started = _start(tmp_path, capsys, study, cli_syntax="def f(values):\n    (\n")
    _refused(
        started,
        f"{tmp_path / 'study.toml'}: display.function 'cli_syntax:f' cannot be "
        "loaded: SyntaxError: '(' was never closed (cli_syntax.py, line 2)",
    )
    assert not (tmp_path / "study.db").exists()  # nothing written


def test_a_display_callable_that_fails_or_hangs_is_named(tmp_path, capsys, monkeypatch):
    failing = "def f(values):\n    raise ValueError('no')\n"
    started = _start(
        tmp_path, capsys, _callable_study("cli_fails:f"), cli_fails=failing
    )
    _refused(started, "study.toml: display.function 'cli_fails:f' failed on {")
    monkeypatch.setattr(render, "SAMPLE_SECONDS", 0.2)
    hanging = "import time\ndef f(values):\n    time.sleep(3)\n"
    started = _start(
        tmp_path, capsys, _callable_study("cli_hangs:f"), cli_hangs=hanging
    )
    _refused(
        started,
        "study.toml: display.function 'cli_hangs:f' did not return within 0.2 s on",
    )


def test_an_unknown_display_field_is_one_line(tmp_path, capsys):
    study = SPACE_TOML + '[display]\nkind = "values"\ncolour = "red"\n'
    _refused(
        _start(tmp_path, capsys, study),
        "study.toml: display.colour is not a field of display.kind = 'values' "
        "(known: ['kind'])",
    )


def test_a_failed_start_leaves_the_database_to_the_fixed_study(
    tmp_path, capsys, monkeypatch
):
    # the study file named a function the module lacks; fixed, the same
    # database serves it (the failed start wrote no study there)
    module = "def f(values):\n    return b'x', 'text/plain'\n"
    db = str(tmp_path / "kept.db")
    study = _callable_study("cli_fixed:g")
    started = _start(tmp_path, capsys, study, "--db", db, cli_fixed=module)
    _refused(started, "display.function 'cli_fixed:g' cannot be loaded: Attribute")
    served = []
    monkeypatch.setattr(cli, "run_server", lambda app, sock: served.append(sock))
    status, out, err = _start(
        tmp_path, capsys, _callable_study("cli_fixed:f"), "--db", db
    )
    assert status == 0 and err == "" and served and "participants join at" in out
    assert (
        Store(database_url(db)).study_source()["display"]["function"] == "cli_fixed:f"
    )


def test_a_database_that_takes_no_write_stops_the_start_up(tmp_path, capsys):
    path = tmp_path / "read-only.db"
    Store(database_url(str(path))).engine.dispose()
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"
    _refused(
        _start(tmp_path, capsys, SPACE_TOML, "--db", read_only),
        f"the database {read_only} does not accept writes (OperationalError: "
        "attempt to write a readonly database)",
        "--db",
    )
    missing = str(tmp_path / "no-such-folder" / "study.db")
    _refused(
        _start(tmp_path, capsys, SPACE_TOML, "--db", missing),
        f"the database sqlite:///{missing} cannot be opened (OperationalError: "
        "unable to open database file)",
    )


def test_a_database_error_at_start_up_is_one_line(tmp_path, capsys, monkeypatch):
    # the disk fills between the write probe and the secrets
    def full(self, key, make):
        full_disk = sqlite3.OperationalError("database or disk is full")
        raise OperationalError("INSERT INTO meta ...", {}, full_disk)

    monkeypatch.setattr(Store, "secret", full)
    _refused(
        _start(tmp_path, capsys, SPACE_TOML),
        "prefbo serve: error: OperationalError: database or disk is full\n",
    )


def test_a_port_in_use_is_one_line_before_any_link(tmp_path, capsys):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = _start(tmp_path, capsys, SPACE_TOML, "--port", str(port))
    _refused(started, f"cannot listen on 127.0.0.1:{port}", "in use")


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_one_line(tmp_path, capsys, port):
    _refused(_start(tmp_path, capsys, SPACE_TOML, f"--port={port}"), "--port must be")


def test_port_0_prints_the_port_it_got(tmp_path, capsys, monkeypatch):
    served = []

    def run(app, sock):
        served.append(sock.getsockname()[1])

    monkeypatch.setattr(cli, "run_server", run)
    status, out, err = _start(tmp_path, capsys, SPACE_TOML, "--port", "0")
    port = served[0]
    assert status == 0 and port > 0 and f"http://127.0.0.1:{port}/join/" in out


def test_a_file_naming_no_kind_is_served_with_its_databases_kind(tmp_path):
    from prefbo.serve.cli import served_config
    from prefbo.serve.config import study_from_dict

    space = [{"name": "x", "type": "continuous", "lower": 0, "upper": 1}]
    config = study_from_dict({"space": space}, root=tmp_path, name="study.toml")
    assert config.model_kind == "collaborative"  # today's default
    store = open_study(config, f"sqlite:///{tmp_path / 'new.db'}")
    assert store.study_source()["model"] == {"kind": "collaborative"}
    assert served_config(config, store) is config
    # a database whose study was served with the population kind (an
    # earlier default): the same file is served with it, not refused
    old = Store(f"sqlite:///{tmp_path / 'old.db'}")
    old.set_study_source({"space": space, "model": {"kind": "population"}})
    served = served_config(config, open_study(config, old.url))
    assert served.model_kind == "population" and served.boundary_step is None
    # a file naming another kind than the database's is another study
    named = study_from_dict(
        {"space": space, "model": {"kind": "collaborative"}},
        root=tmp_path,
        name="study.toml",
    )
    with pytest.raises(StudyFileError, match="model.kind is 'population', the file"):
        open_study(named, old.url)
