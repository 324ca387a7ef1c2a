r"""``prefbo serve``: run a study in the browser, replay or export it.

    prefbo serve study.toml [--db study.db | --db postgresql://...]
                            [--host 127.0.0.1] [--port 8000] [--workers 1]
    prefbo serve --demo
    prefbo serve replay study.db
    prefbo serve export study.db --format csv|json

The server prints the participants' join link and the researcher's link (the
secrets are kept in the database, so a restart prints the same links). It
listens on loopback unless ``--host`` says otherwise. Every check comes before
a link is printed and before the study is written to the database: a study
file, display or database that cannot be served stops it with one line
naming the file and the field, and exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import signal
import socket
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import uvicorn
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from prefbo.exceptions import PrefboError
from prefbo.serve.answered import AnsweredRows
from prefbo.serve.app import StudyApp, new_token
from prefbo.serve.collaborative import CollaborativeEngine
from prefbo.serve.config import StudyConfig, StudyFileError, load_study, study_from_dict
from prefbo.serve.demo import DEMO_STUDY
from prefbo.serve.engine import QuestionEngine
from prefbo.serve.export import export_csv, export_json
from prefbo.serve.render import Renderer
from prefbo.serve.schema import database_url, model_kind, with_kind
from prefbo.serve.store import Store, one_line
from prefbo.serve.supervisor import WorkerSupervisor, health_report
from prefbo.serve.worker import config_from_store


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="prefbo serve", description=__doc__.split("\n")[0])
    p.add_argument("study", nargs="?", help="study.toml / study.json, or replay/export")
    p.add_argument("database", nargs="?", help="replay/export: the study's database")
    p.add_argument("--demo", action="store_true", help="serve the colour demo")
    p.add_argument("--db", help="database file or SQLAlchemy URL (default: STUDY.db)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: %(default)s)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=8000,
        help="port (default: %(default)s; 0: any free)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="model worker processes (default: %(default)s)",
    )
    p.add_argument(
        "--format",
        choices=["csv", "json"],
        default="csv",
        help="export: csv (the default) or json",
    )
    return p


def shown_url(url: str) -> str:
    r"""``url`` for a message: as given, but a password masked."""
    try:
        parsed = make_url(url)
    except SQLAlchemyError:
        return url
    if parsed.password is None:
        return url
    return parsed.render_as_string(hide_password=True)


def open_store(url: str) -> Store:
    r"""The database ``url``, opened and migrated (made if new).

    Raises:
        StudyFileError: It cannot be opened (the message says why).
    """
    try:
        return Store(url)
    except (SQLAlchemyError, OSError) as e:
        raise StudyFileError(
            f"the database {shown_url(url)} cannot be opened ({one_line(e)})."
        ) from e


def open_study(config: StudyConfig, url: str) -> Store:
    r"""The study's database, checked to take a write and to hold this study
    or none, and then holding it. Call it once the study's other checks
    passed (its :class:`~prefbo.serve.render.Renderer` built): a start that
    fails before writes no study, so the fixed study file is served from
    the same database. The study is stored with the ``model.kind`` it is
    served with; a file that names none is the database's study when the
    rest is the same (:func:`served_config` then serves the stored kind).

    Raises:
        StudyFileError: The database cannot be opened, takes no write, or
            holds another study.
    """
    store = open_store(url)
    source = with_kind(config.source, config.model_kind)
    try:
        stored = store.study_source()
        if stored is not None and model_kind(config.source) is None:
            source = with_kind(config.source, model_kind(stored))  # the database's
        if stored is not None and stored != source:
            kinds = (model_kind(stored), model_kind(source))
            why = (
                f": its model.kind is {kinds[0]!r}, the file's {kinds[1]!r}"
                if kinds[0] != kinds[1]
                else ""
            )
            raise StudyFileError(
                f"the database {shown_url(url)} holds another study (started "
                f"from a different study file{why}); use a new --db, or the "
                "study file it was started with."
            )
        error = store.write_probe()
        if error is not None:
            raise StudyFileError(
                f"the database {shown_url(url)} does not accept writes ({error}); "
                "check its permissions and free disk space, or give another --db."
            )
        if stored is None:
            store.set_study_source(source)
    except SQLAlchemyError as e:
        raise StudyFileError(
            f"the database {shown_url(url)} cannot be used ({one_line(e)})."
        ) from e
    return store


def served_config(config: StudyConfig, store: Store) -> StudyConfig:
    r"""The study to serve from ``store`` (:func:`open_study`'s): ``config``,
    or where its file names no kind and the database's study names another
    (a study started under an earlier default), the database's."""
    stored = store.study_source()
    kind = None if stored is None else model_kind(stored)
    if kind is None or kind == config.model_kind:
        return config
    return study_from_dict(stored, root=config.root, name=config.name)


def existing_store(target: str) -> Store:
    r"""The study database ``target`` (a file or an SQLAlchemy URL) for
    ``replay`` and ``export``, which never make one.

    Raises:
        StudyFileError: ``target`` names a file that does not exist.
    """
    url = database_url(target)
    sqlite = url.startswith("sqlite:///")
    if sqlite and not Path(url.removeprefix("sqlite:///")).is_file():
        raise StudyFileError(f"no study database at {target!r} (no such file).")
    return open_store(url)


def replay(target: str) -> dict:
    r"""Every answer of the study in ``target`` (a database file or URL) fed
    to a fresh model of the study's kind: the population's and each
    participant's favourite (the collaborative kind: one fit on every
    answer, as a worker's first, :class:`CollaborativeEngine`)."""
    store = existing_store(target)
    config = config_from_store(store, check_files=False)
    pids = [p.id for p in store.participants()]
    if config.model_kind != "collaborative":
        engine = QuestionEngine(config, store.answered())
        return {"answers": len(engine.answered), **engine.favourites(pids)}
    rows = AnsweredRows(store).read(pids)
    collaborative = CollaborativeEngine(config, background=False)
    for pid in pids:
        collaborative.update(pid, rows[pid])
    collaborative.maintain()
    answers = sum(len(r) for r in rows.values())
    return {"answers": answers, **collaborative.favourites(pids)}


def serve(
    config: StudyConfig,
    url: str,
    host: str,
    port: int,
    workers: int,
    out: TextIO,
) -> None:
    r"""Serve ``config`` from the database ``url`` until interrupted, with
    ``workers`` worker processes kept running (:class:`WorkerSupervisor`).

    Raises:
        StudyFileError: The display or the database cannot be served
            (before any link is printed).
    """
    renderer = Renderer(config)  # first: a display that fails writes nothing
    store = open_study(config, url)
    config = served_config(config, store)
    join = store.secret("join_code", new_token)
    researcher = store.secret("researcher_token", new_token)
    supervisor = WorkerSupervisor(url, str(config.root), workers)
    health = functools.partial(health_report, store, supervisor)
    app = StudyApp(store, config, renderer, join, researcher, health=health).app()
    with listen(host, port) as sock:  # before any link: a port in use is named
        supervisor.start()
        base = f"http://{host}:{sock.getsockname()[1]}"  # port 0: the one given
        kind = f"model.kind {config.model_kind!r}"
        print(
            f"prefbo serve: {config.title!r}, {kind}, database {shown_url(url)}",
            file=out,
        )
        print(f"  participants join at:  {base}/join/{join}", file=out)
        print(f"  researcher's page:     {base}/r/{researcher}", file=out, flush=True)
        # uvicorn ends on SIGTERM by raising it again after its own shutdown,
        # which would skip the workers' stop below: make it an interrupt
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            run_server(app, sock)
        finally:
            signal.signal(signal.SIGTERM, previous)
            supervisor.stop()


def run_server(app: Any, sock: socket.socket) -> None:
    r"""Serve the ASGI ``app`` on the listening ``sock`` (uvicorn) until
    interrupted."""
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def listen(host: str, port: int) -> socket.socket:
    r"""A socket bound to ``host:port``, listening (the server's own, made
    before any link is printed).

    Raises:
        OSError: It cannot be bound (the port is in use, the host is not
            this machine's), in one line naming both.
    """
    if not 0 <= port <= 65535:
        raise OSError(f"--port must be in 0..65535 (0: any free port); got {port}.")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except (OSError, OverflowError) as e:
        sock.close()
        reason = getattr(e, "strerror", None) or str(e)
        if getattr(e, "errno", None) == errno.EADDRINUSE:
            reason = "the port is in use (another server?); choose one with --port"
        raise OSError(f"cannot listen on {host}:{port}: {reason}.") from None
    sock.set_inheritable(True)
    return sock


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    r"""Run ``prefbo serve``; returns the exit status."""
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    try:
        if args.study in ("replay", "export"):
            if args.database is None:
                _parser().error(f"{args.study} needs the study's database")
            if args.study == "replay":
                print(json.dumps(replay(args.database), indent=2), file=out)
                return 0
            store = existing_store(args.database)
            config = config_from_store(store, check_files=False)
            if args.format == "csv":
                out.write(export_csv(store, config))
            else:
                print(json.dumps(export_json(store, config), indent=1), file=out)
            return 0
        if args.workers < 1:
            _parser().error("--workers must be at least 1")
        if args.demo:
            with tempfile.TemporaryDirectory(prefix="prefbo-demo-") as folder:
                config = study_from_dict(DEMO_STUDY, root=folder, name="demo study")
                if args.db is None:
                    print(
                        "the demo's database is deleted at exit (keep it: --db)",
                        file=out,
                    )
                db = args.db or str(Path(folder) / "demo.db")
                url = database_url(db)
                serve(config, url, args.host, args.port, args.workers, out)
            return 0
        if args.study is None:
            _parser().error("give a study file, or --demo")
        else:
            config = load_study(args.study)
            db = args.db or str(Path(args.study).with_suffix(".db"))
        serve(config, database_url(db), args.host, args.port, args.workers, out)
        return 0
    except (PrefboError, OSError, SQLAlchemyError) as e:
        # one line, whatever the message (a database's without its SQL)
        text = one_line(e) if isinstance(e, SQLAlchemyError) else str(e)
        print(f"prefbo serve: error: {' '.join(text.split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
