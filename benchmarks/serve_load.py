r"""Load and fault benchmark of ``prefbo serve``: answers per second, latency,
and no acknowledged answer lost or duplicated across a server crash.

Procedure:
    1. a study file: the colour demo (:data:`prefbo.serve.demo.DEMO_STUDY`)
       with ``answers_per_participant = 400`` (nobody finishes during the run)
       and ``display = {"kind": "values"}``, in a fresh temporary folder with a
       fresh SQLite database (``--db URL``: that database instead, e.g.
       PostgreSQL, its prefbo tables dropped first: give one the run may
       empty);
    2. the server as a real process, ``python -m prefbo.cli serve study.json
       --db DB --port PORT --workers N`` (``--workers``, 1) on a free loopback
       port, with
       no thread variable set (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and
       ``PREFBO_THREADS`` removed: as users start it; it starts its own model
       worker process and gives it its threads); ``--model-kind`` sets the
       study's ``model.kind`` (default the demo's, ``population``);
    3. ``--participants`` (50) join through ``POST /api/join``; each then
       answers as fast as it can in its own thread, with its own HTTP
       connection, for ``--seconds`` (20): a simulated person who always takes
       the colour whose hue is nearer 200 degrees (circularly);
    4. client-side, every *acknowledged* answer (token, question id, choice:
       the server replied 200 with the next question) is recorded, with the
       latency from sending the answer to receiving the next question. An
       answer whose reply never came (connection error) is *in doubt*: not
       acknowledged, and the client fetches its current question before it
       goes on;
    5. ``--kill``: at a random moment (uniform in 30-60 % of ``--seconds``,
       from ``--seed``) the server is killed with SIGKILL while the clients
       are answering; the clients see their connection errors and wait; the
       server is restarted on the same database and port; the current question
       of every participant is fetched (``GET .../question``) and compared with
       the database (the question shown and unanswered, at ``seq`` = the
       number of answers, and the one the participant was on before the
       crash, or the next one if its in-doubt answer was committed); then the
       clients go on until ``--seconds`` of load have passed;
    6. after the run the server is stopped and the database is read (plain
       SQL through SQLAlchemy, not prefbo's store): every acknowledged answer
       must be there exactly once with its choice
       (``questions.answered_at``, ``choice``; one ``answer`` event per
       question in ``events``), and nothing else may be answered except,
       after a crash, an in-doubt answer (committed, but its reply was lost);
       per participant the answered questions are ``seq`` ``0 .. a-1`` and at
       most one more is shown. The ``origin`` of the shown questions says how
       many the model worker made and how many were random fallbacks (no
       worker question was waiting).

Finally every process the server started (found by walking the process tree
while it ran: its model worker, multiprocessing's resource tracker) must have
exited; any left behind is reported (and then killed by its pid).

Usage::

    python -m benchmarks serve_load                 # 50 participants, 20 s
    python -m benchmarks serve_load --kill          # with a crash and restart
    python -m benchmarks serve_load --participants 20 --seconds 8 --seed 1
    python -m benchmarks serve_load --think 3 --seconds 60   # people's pace
    python -m benchmarks serve_load --workers 2 --db postgresql+psycopg://...

``--leftover-wait`` (30 s) is how long the server's processes get to exit
after it stopped. Prints a Markdown table; exits 1 if a check failed or a
process was left behind. Timings are wall-clock on
whatever the machine runs (the clients, the server and its worker share it).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import MetaData, create_engine, text

from benchmarks.harness import environment
from benchmarks.harness.runner import REPO

TARGET_HUE = 200.0
START_TIMEOUT_S = 120.0
#: The tables of a served study's database (schema 3), dropped from a
#: ``--db`` database before a run.
PREFBO_TABLES = (
    "leases",
    "workers",
    "snapshots",
    "events",
    "questions",
    "participants",
    "meta",
)


# ------------------------------------------------------------------ study
def write_study(
    folder: Path, answers: int = 400, model_kind: str | None = None
) -> Path:
    r"""The demo study with ``answers`` per participant, shown as values
    (``model_kind``: its ``model.kind``, with that kind's default
    inference), as ``folder/study.json``."""
    study = copy.deepcopy(demo_study())
    study["answers_per_participant"] = answers
    if model_kind is not None:
        study["model"] = {"kind": model_kind, "strategy": "eubo"}
    study["display"] = {"kind": "values"}
    path = folder / "study.json"
    path.write_text(json.dumps(study, indent=1))
    return path


def demo_study() -> dict[str, Any]:
    r""":data:`prefbo.serve.demo.DEMO_STUDY`, read from the module's file
    (importing the package would import torch: seconds for nothing here)."""
    module = sys.modules.get("prefbo.serve.demo")
    if module is None:
        path = REPO / "prefbo" / "serve" / "demo.py"
        spec = importlib.util.spec_from_file_location("_prefbo_serve_demo", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module.DEMO_STUDY


def free_port() -> int:
    r"""A loopback port free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prefer(options: list[dict[str, Any]]) -> int:
    r"""The simulated person's choice: the option whose hue is nearest
    :data:`TARGET_HUE` (circular distance; the first on a tie)."""

    def distance(o: dict[str, Any]) -> float:
        d = abs(float(o["hue"]) - TARGET_HUE) % 360.0
        return min(d, 360.0 - d)

    return min(range(len(options)), key=lambda i: distance(options[i]))


# ------------------------------------------------------------ processes
def _proc_stat(pid: int) -> tuple[int, int] | None:
    r"""``(parent pid, start time in ticks)`` of ``pid``, or ``None``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[19])


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def descendants(root: int) -> dict[int, tuple[int, str]]:
    r"""Every live descendant of ``root``: pid to ``(start time, cmdline)``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat is not None:
                children.setdefault(stat[0], []).append(int(entry))
    out: dict[int, tuple[int, str]] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        stat = _proc_stat(pid)
        if stat is not None:
            out[pid] = (stat[1], _cmdline(pid))
            todo.extend(children.get(pid, []))
    return out


def alive(pid: int, start: int) -> bool:
    r"""Whether ``pid`` still runs and is the process that started at
    ``start`` (not a later one with a reused pid), and is not a zombie."""
    stat = _proc_stat(pid)
    if stat is None or stat[1] != start:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


class Server:
    r"""``python -m prefbo.cli serve STUDY --db DB --port PORT --workers N``
    as a child process; remembers every process it started (walking
    ``/proc``)."""

    def __init__(
        self, study: Path, db: str, port: int, folder: Path, workers: int = 1
    ) -> None:
        self.study, self.db, self.port, self.folder = study, db, port, folder
        self.workers = workers
        self.proc: subprocess.Popen | None = None
        self.join_code: str | None = None
        self.started: dict[int, tuple[int, str]] = {}  # pid -> (start, cmdline)
        self.generation = 0
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> float:
        r"""Start the server and wait until it answers; returns the seconds
        that took.

        Raises:
            RuntimeError: It exited or did not answer within a time limit.
        """
        self.generation += 1
        out = self.folder / f"server{self.generation}.out"
        err = self.folder / f"server{self.generation}.err"
        env = environment.without_thread_variables()  # as users start it
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO), env.get("PYTHONPATH", "")) if p
        )
        cmd = [sys.executable, "-m", "prefbo.cli", "serve", str(self.study)]
        cmd += ["--db", self.db, "--port", str(self.port)]
        cmd += ["--workers", str(self.workers)]
        t0 = time.monotonic()
        with open(out, "wb") as fo, open(err, "wb") as fe:
            self.proc = subprocess.Popen(
                cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, cwd=self.folder
            )
        self.started[self.proc.pid] = (
            (_proc_stat(self.proc.pid) or (0, 0))[1],
            " ".join(cmd),
        )
        self._watch_stop.clear()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()
        with httpx.Client(timeout=2.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"the server exited with {self.proc.returncode}: "
                        f"{err.read_text()[-2000:]}"
                    )
                if time.monotonic() - t0 > START_TIMEOUT_S:
                    raise RuntimeError("the server did not answer in time.")
                if self.join_code is None:
                    for line in out.read_text().splitlines():
                        if "participants join at:" in line:
                            self.join_code = line.rsplit("/join/", 1)[1].strip()
                if self.join_code is not None:
                    try:
                        if client.get(f"{self.base}/healthz").status_code == 200:
                            return time.monotonic() - t0
                    except httpx.TransportError:
                        pass
                time.sleep(0.05)

    def _watch(self) -> None:
        assert self.proc is not None
        pid = self.proc.pid
        while not self._watch_stop.is_set() and self.proc.poll() is None:
            for child, info in descendants(pid).items():
                self.started.setdefault(child, info)
            self._watch_stop.wait(0.2)

    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        r"""SIGKILL the server process (its workers are left to notice)."""
        assert self.proc is not None
        for child, info in descendants(self.proc.pid).items():
            self.started.setdefault(child, info)
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._stop_watch()

    def stop(self, timeout: float = 30.0) -> int | None:
        r"""Stop the server as Ctrl-C would (SIGINT), SIGKILL after
        ``timeout``; returns its exit status."""
        if self.proc is None or self.proc.poll() is not None:
            self._stop_watch()
            return None if self.proc is None else self.proc.returncode
        for child, info in descendants(self.proc.pid).items():
            self.started.setdefault(child, info)
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stop_watch()
        return self.proc.returncode

    def _stop_watch(self) -> None:
        self._watch_stop.set()
        if self._watcher is not None:
            self._watcher.join()

    def leftovers(self, wait: float) -> list[tuple[int, str]]:
        r"""The processes this server started that still run after waiting
        up to ``wait`` seconds for them to exit."""
        deadline = time.monotonic() + wait
        while True:
            left = [
                (pid, cmd)
                for pid, (start, cmd) in self.started.items()
                if alive(pid, start)
            ]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.2)

    def stderr_text(self) -> str:
        return "".join(
            p.read_text(errors="replace")
            for p in sorted(self.folder.glob("server*.err"))
        )


# --------------------------------------------------------------- clients
@dataclass
class Participant:
    r"""One simulated person and what the client saw."""

    token: str
    acked: list[tuple[str, int, int]] = field(default_factory=list)  # qid, choice, seq
    in_doubt: list[tuple[str, int, int]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    last_question: dict[str, Any] | None = None  # the last one the server gave
    conflicts: int = 0
    server_errors: int = 0
    transport_errors: int = 0
    done: bool = False


class Gate:
    r"""Where clients wait after a connection error while the server is
    restarted (open unless a crash is being handled)."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()


def run_participant(
    p: Participant,
    base: str,
    gate: Gate,
    stop: threading.Event,
    think: float = 0.0,
    rng: random.Random | None = None,
) -> None:
    r"""Answer until ``stop``: GET the current question when there is none,
    look at it for ``think`` seconds on average (uniform in 0.5-1.5 times
    it; 0: answer at once), POST the preferred option, record what came
    back."""
    rng = rng or random.Random(0)
    question: dict[str, Any] | None = None
    with httpx.Client(base_url=base, timeout=60.0) as client:
        while not stop.is_set():
            if not gate.open.is_set():
                gate.open.wait(0.2)
                continue
            if question is None:
                try:
                    r = client.get(f"/api/p/{p.token}/question")
                except httpx.TransportError:
                    p.transport_errors += 1
                    stop.wait(0.05)
                    continue
                if r.status_code != 200:
                    p.server_errors += 1
                    stop.wait(0.05)
                    continue
                question = r.json()
                p.last_question = question
            if question.get("done"):
                p.done = True
                return
            qid, seq = question["question_id"], int(question["seq"])
            choice = prefer(question["options"])
            if think > 0 and stop.wait(think * rng.uniform(0.5, 1.5)):
                break
            t0 = time.perf_counter()
            try:
                r = client.post(
                    f"/api/p/{p.token}/answer",
                    json={"question_id": qid, "choice": choice},
                )
            except httpx.TransportError:
                p.transport_errors += 1
                p.in_doubt.append((qid, choice, seq))
                question = None
                continue
            elapsed = time.perf_counter() - t0
            if r.status_code == 200:
                p.acked.append((qid, choice, seq))
                p.latencies.append(elapsed)
                question = r.json()
                p.last_question = question
            else:
                if r.status_code == 409:
                    p.conflicts += 1
                else:
                    p.server_errors += 1
                question = None


def join_all(base: str, code: str, n: int) -> list[Participant]:
    r"""``n`` participants joined through ``POST /api/join``."""
    out = []
    with httpx.Client(base_url=base, timeout=60.0) as client:
        for i in range(n):
            r = client.post("/api/join", json={"join": code, "label": f"load {i}"})
            r.raise_for_status()
            out.append(Participant(token=r.json()["token"]))
    return out


# ------------------------------------------------------------------ run
@dataclass
class Result:
    r"""The figures and the checks of one run."""

    participants: int
    seconds: float
    kill: bool
    seed: int
    think: float = 0.0
    model_kind: str = "population"
    kill_worker: bool = False
    workers: int = 1
    #: the database's kind (``sqlite``, ``postgresql``)
    database: str = "sqlite"
    load_s: float = 0.0
    #: wall-clock (``time.time()``) at the start of the load
    epoch0: float = 0.0
    #: minute of the load -> origin -> questions shown in it
    shown_by_minute: dict[int, dict[str, int]] = field(default_factory=dict)
    #: per snapshot of the favourites during the load: seconds from the
    #: newest answer it includes to the next snapshot (how far behind the
    #: researcher's page could be)
    favourites_behind_s: list[float] = field(default_factory=list)
    worker_killed_at_s: float | None = None
    worker_back_s: float | None = None
    acked: int = 0
    latencies: list[float] = field(default_factory=list)
    start_s: float = 0.0
    stop_s: float = 0.0
    leftover_wait_s: float = 0.0
    kill_at_s: float | None = None
    restart_s: float | None = None
    downtime_s: float | None = None
    in_doubt: int = 0
    in_doubt_committed: int = 0
    conflicts: int = 0
    server_errors: int = 0
    transport_errors: int = 0
    origins_shown: dict[str, int] = field(default_factory=dict)
    origins_answered: dict[str, int] = field(default_factory=dict)
    db_answered: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    wrong_after_restart: list[str] = field(default_factory=list)
    invariant: list[str] = field(default_factory=list)
    leftovers: list[tuple[int, str]] = field(default_factory=list)
    server_log_errors: list[str] = field(default_factory=list)
    people: list[Participant] = field(default_factory=list, repr=False)

    @property
    def answers_per_s(self) -> float:
        return self.acked / self.load_s if self.load_s > 0 else 0.0

    def percentile(self, p: float) -> float:
        r"""The ``p``-th percentile (nearest rank) of the latencies, seconds."""
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        rank = max(1, min(len(xs), int(-(-p * len(xs) // 100))))
        return xs[rank - 1]

    def problems(self) -> list[str]:
        r"""Every failed check of the answers and the replies, as lines
        (empty: all passed). Processes left behind are :attr:`leftovers`."""
        out = []
        for name in ("lost", "duplicated", "unexpected", "wrong_after_restart"):
            items = getattr(self, name)
            if items:
                out.append(f"{name}: {len(items)} (e.g. {items[:3]})")
        if self.invariant:
            out.append(f"invariant: {self.invariant[:3]}")
        if self.server_errors:
            out.append(f"server errors (5xx / unexpected status): {self.server_errors}")
        if self.server_log_errors:
            out.append(f"tracebacks in the server's log: {self.server_log_errors[:2]}")
        if not self.kill and (self.transport_errors or self.in_doubt):
            out.append(f"connection errors without a crash: {self.transport_errors}")
        return out


def database_url(db: str | Path) -> str:
    r"""``db`` as an SQLAlchemy URL (a path: the SQLite file)."""
    return str(db) if "://" in str(db) else f"sqlite:///{db}"


def _query(db: str, sql: str) -> list[dict[str, Any]]:
    r"""The rows of ``sql`` on database ``db`` (a URL), as dicts."""
    engine = create_engine(db)
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def empty_database(db: str) -> None:
    r"""Drop the prefbo tables of database ``db`` (a URL), if any."""
    engine = create_engine(db)
    try:
        found = MetaData()
        with engine.begin() as conn:
            names = [t for t in PREFBO_TABLES if engine.dialect.has_table(conn, t)]
            found.reflect(conn, only=names)
            found.drop_all(conn)
    finally:
        engine.dispose()


def _answers_by_pid(db: str) -> tuple[dict[str, int], dict[int, list[dict]], dict]:
    r"""Read the database (a URL): token hash -> participant id, each
    participant's questions by seq, and the ``answer`` events per question
    id."""
    pids = {r["token_hash"]: r["id"] for r in _query(db, "SELECT * FROM participants")}
    rows: dict[int, list[dict]] = {}
    for r in _query(db, "SELECT * FROM questions ORDER BY participant_id, seq"):
        rows.setdefault(r["participant_id"], []).append(r)
    events: dict[str, int] = {}
    for r in _query(db, "SELECT question_id FROM events WHERE kind = 'answer'"):
        events[r["question_id"]] = events.get(r["question_id"], 0) + 1
    return pids, rows, events


def favourites_behind(db: str, result: Result) -> list[float]:
    r"""For each snapshot of the favourites written during the load: the
    seconds from the time its newest answer (its answer count's) was
    committed to the next snapshot (or the end of the load): the most the
    researcher's page lagged the answers while it showed that snapshot."""
    times = sorted(
        r["answered_at"]
        for r in _query(
            db, "SELECT answered_at FROM questions WHERE answered_at IS NOT NULL"
        )
    )
    snaps = [
        (r["at"], r["answers"])
        for r in _query(db, "SELECT at, answers FROM snapshots ORDER BY id")
    ]
    end = result.epoch0 + result.load_s
    snaps = [(at, n) for at, n in snaps if result.epoch0 <= at <= end and n > 0]
    out = []
    for k, (_, n) in enumerate(snaps):
        following = snaps[k + 1][0] if k + 1 < len(snaps) else end
        newest = times[min(n, len(times)) - 1]
        out.append(max(0.0, following - newest))
    return out


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_after_restart(
    base: str, db: str, people: list[Participant], result: Result
) -> None:
    r"""With the clients held at the gate: each participant's current question
    (``GET``) must be the one the database shows as shown and unanswered at
    ``seq`` = its answers, and the one it was on before the crash (or the
    next, if its in-doubt answer was committed)."""
    current = {}
    with httpx.Client(base_url=base, timeout=60.0) as client:
        for p in people:
            r = client.get(f"/api/p/{p.token}/question")
            if r.status_code != 200:
                result.wrong_after_restart.append(f"GET question: {r.status_code}")
                continue
            current[p.token] = r.json()
    pids, rows, _ = _answers_by_pid(db)
    for p in people:
        q = current.get(p.token)
        if q is None:
            continue
        qs = rows.get(pids.get(_hash(p.token), -1), [])
        a = sum(r["answered_at"] is not None for r in qs)
        shown_open = [
            r for r in qs if r["shown_at"] is not None and r["answered_at"] is None
        ]
        tag = p.token[:6]
        if q.get("done"):
            result.wrong_after_restart.append(f"{tag}: done after {a} answers")
            continue
        if [r["id"] for r in shown_open] != [q["question_id"]]:
            result.wrong_after_restart.append(
                f"{tag}: got {q['question_id']} (seq {q['seq']}); the database "
                f"shows {[(r['id'], r['seq']) for r in shown_open]} unanswered"
            )
            continue
        if q["seq"] != a:
            result.wrong_after_restart.append(f"{tag}: seq {q['seq']} != {a} answers")
        before = p.last_question
        if before is None or before.get("done"):
            continue
        by_id = {r["id"]: r for r in qs}
        was = by_id.get(before["question_id"])
        if was is None:
            result.wrong_after_restart.append(f"{tag}: its question is gone")
        elif was["answered_at"] is None and q["question_id"] != before["question_id"]:
            result.wrong_after_restart.append(
                f"{tag}: was on {before['question_id']} (unanswered), now "
                f"{q['question_id']}"
            )
        elif was["answered_at"] is not None and q["seq"] != before["seq"] + 1:
            result.wrong_after_restart.append(
                f"{tag}: {before['question_id']} was answered in doubt; now on "
                f"seq {q['seq']}, not {before['seq'] + 1}"
            )


def check_database(db: str, people: list[Participant], result: Result) -> None:
    r"""Exactly once: every acknowledged answer in the database once, with its
    choice; nothing else answered but committed in-doubt answers; per
    participant, answers at seq ``0 .. a-1`` and at most one shown beyond."""
    pids, rows, events = _answers_by_pid(db)
    by_id = {r["id"]: r for qs in rows.values() for r in qs}
    claimed: dict[str, str] = {}
    for p in people:
        pid = pids.get(_hash(p.token))
        tag = p.token[:6]
        if pid is None:
            result.lost.append(f"{tag}: participant missing")
            continue
        in_doubt = {qid: choice for qid, choice, _ in p.in_doubt}
        acked = {}
        for qid, choice, seq in p.acked:
            if qid in acked or qid in claimed:
                result.duplicated.append(f"{tag}: {qid} acknowledged twice")
            acked[qid] = choice
            claimed[qid] = p.token
            row = by_id.get(qid)
            if row is None or row["participant_id"] != pid:
                result.lost.append(f"{tag}: {qid} (seq {seq}) not in the database")
            elif row["answered_at"] is None:
                result.lost.append(f"{tag}: {qid} (seq {seq}) is unanswered")
            elif row["choice"] != choice:
                result.lost.append(
                    f"{tag}: {qid} has choice {row['choice']}, acknowledged {choice}"
                )
            elif row["seq"] != seq:
                result.lost.append(f"{tag}: {qid} at seq {row['seq']}, shown as {seq}")
        qs = rows.get(pid, [])
        answered = [r for r in qs if r["answered_at"] is not None]
        for r in answered:
            if r["id"] in acked:
                continue
            if r["id"] in in_doubt and in_doubt[r["id"]] == r["choice"]:
                result.in_doubt_committed += 1
            else:
                result.unexpected.append(
                    f"{tag}: {r['id']} (seq {r['seq']}) answered {r['choice']}, "
                    "never sent"
                )
        for r in answered:
            if events.get(r["id"], 0) != 1:
                result.duplicated.append(
                    f"{tag}: {r['id']} has {events.get(r['id'], 0)} answer events"
                )
        a = len(answered)
        if sorted(r["seq"] for r in answered) != list(range(a)):
            result.invariant.append(f"{tag}: answered seqs are not 0..{a - 1}")
        if any(r["shown_at"] is not None for r in qs if r["seq"] > a):
            result.invariant.append(f"{tag}: a question beyond seq {a} was shown")
        if any(r["seq"] > a + 1 for r in qs):
            result.invariant.append(f"{tag}: a question beyond seq {a + 1} exists")
    result.favourites_behind_s = favourites_behind(db, result)
    result.db_answered = sum(
        r["answered_at"] is not None for qs in rows.values() for r in qs
    )
    for qs in rows.values():
        for r in qs:
            if r["shown_at"] is not None:
                o = r["origin"]
                result.origins_shown[o] = result.origins_shown.get(o, 0) + 1
                if r["shown_at"] >= result.epoch0:
                    minute = int((r["shown_at"] - result.epoch0) // 60)
                    counts = result.shown_by_minute.setdefault(minute, {})
                    counts[o] = counts.get(o, 0) + 1
            if r["answered_at"] is not None:
                o = r["origin"]
                result.origins_answered[o] = result.origins_answered.get(o, 0) + 1


def run(
    participants: int = 50,
    seconds: float = 20.0,
    kill: bool = False,
    seed: int = 0,
    folder: Path | None = None,
    leftover_wait: float = 30.0,
    final_stop: str = "interrupt",
    think: float = 0.0,
    model_kind: str | None = None,
    kill_worker: bool = False,
    workers: int = 1,
    db: str | None = None,
) -> Result:
    r"""One run (see the module docstring) in ``folder`` (default: a fresh
    temporary one); the checks are in the result (:meth:`Result.problems`,
    :attr:`Result.leftovers`: the server's processes still running
    ``leftover_wait`` seconds after it stopped, then killed). The server is
    stopped at the end by SIGINT (``final_stop = "interrupt"``, as Ctrl-C:
    it waits up to 10 s for its worker) or SIGKILL (``"kill"``: quicker; its
    worker is then normally among the leftovers). ``db``: a database URL
    (its prefbo tables are dropped first), default a fresh SQLite file in
    the folder; ``workers``: the server's ``--workers``."""
    result = Result(participants, seconds, kill, seed, think)
    result.model_kind = model_kind or demo_study()["model"]["kind"]
    result.kill_worker = kill_worker
    result.workers = workers
    own = folder is None
    tmp = tempfile.TemporaryDirectory(prefix="prefbo-serve-load-") if own else None
    work = Path(tmp.name) if tmp is not None else Path(folder)  # type: ignore[arg-type]
    try:
        study = write_study(work, model_kind=model_kind)
        if db is None:
            db = database_url(work / "study.db")
        else:
            empty_database(db)
        result.database = db.split(":", 1)[0].split("+", 1)[0]
        server = Server(study, db, free_port(), work, workers)
        try:
            _drive(server, db, result)
        finally:
            t_stop = time.monotonic()
            if final_stop == "kill" and server.proc is not None:
                if server.proc.poll() is None:
                    server.kill()
            server.stop()
            result.stop_s = time.monotonic() - t_stop
            result.leftovers = server.leftovers(wait=leftover_wait)
            result.leftover_wait_s = time.monotonic() - t_stop - result.stop_s
            for pid, _ in result.leftovers:  # ours: started by our server
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        log = server.stderr_text()
        result.server_log_errors = [
            chunk.strip().splitlines()[-1]
            for chunk in log.split("Traceback (most recent call last):")[1:]
        ]
        check_database(db, result.people, result)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return result


def _drive(server: Server, db: str, result: Result) -> None:
    rng = random.Random(result.seed)
    result.start_s = server.start()
    assert server.join_code is not None
    people = join_all(server.base, server.join_code, result.participants)
    result.people = people
    gate, stop = Gate(), threading.Event()
    threads = [
        threading.Thread(
            target=run_participant,
            args=(p, server.base, gate, stop, result.think),
            kwargs={"rng": random.Random(result.seed * 1000 + i)},
        )
        for i, p in enumerate(people)
    ]
    t0 = time.monotonic()
    result.epoch0 = time.time()
    for t in threads:
        t.start()
    down = 0.0
    try:
        if result.kill_worker:
            time.sleep(rng.uniform(0.3, 0.6) * result.seconds)
            result.worker_killed_at_s = time.monotonic() - t0
            result.worker_back_s = kill_worker_process(server)
        elif result.kill:
            kill_at = rng.uniform(0.3, 0.6) * result.seconds
            time.sleep(kill_at)
            result.kill_at_s = time.monotonic() - t0
            t_kill = time.monotonic()
            server.kill()
            gate.open.clear()  # clients that see an error now wait here
            result.restart_s = server.start()
            check_after_restart(server.base, db, people, result)
            down = time.monotonic() - t_kill
            result.downtime_s = down
            gate.open.set()
        remaining = result.seconds - (time.monotonic() - t0 - down)
        if remaining > 0:
            time.sleep(remaining)
    finally:
        stop.set()
        gate.open.set()
        for t in threads:
            t.join()
    result.load_s = time.monotonic() - t0 - down
    for p in people:
        result.acked += len(p.acked)
        result.latencies.extend(p.latencies)
        result.in_doubt += len(p.in_doubt)
        result.conflicts += p.conflicts
        result.server_errors += p.server_errors
        result.transport_errors += p.transport_errors


def worker_pids(server: Server) -> list[int]:
    r"""The server's model worker processes (spawned children running
    :mod:`multiprocessing`, not its resource tracker)."""
    return [
        pid
        for pid, (_, cmd) in descendants(server.pid()).items()
        if "multiprocessing" in cmd and "resource_tracker" not in cmd
    ]


def kill_worker_process(server: Server, timeout: float = 60.0) -> float | None:
    r"""SIGKILL the server's (first) model worker; the seconds until a new
    worker process runs (``None``: none within ``timeout``)."""
    before = worker_pids(server)
    if not before:
        return None
    os.kill(before[0], signal.SIGKILL)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if [p for p in worker_pids(server) if p not in before]:
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


# --------------------------------------------------------------- report
def report(result: Result) -> str:
    r"""A Markdown table of ``result``'s figures and checks."""
    ms = 1000.0

    def origins(d: dict[str, int]) -> str:
        return f"{d.get('model', 0)} model / {d.get('random', 0)} random"

    rows = [
        ("participants", str(result.participants)),
        ("model kind", result.model_kind),
        ("database, workers", f"{result.database}, {result.workers}"),
        ("think time, mean (s)", f"{result.think:g}"),
        ("load time (s, without downtime)", f"{result.load_s:.1f}"),
        ("server start (s)", f"{result.start_s:.1f}"),
        ("acknowledged answers", str(result.acked)),
        ("answers per second", f"{result.answers_per_s:.1f}"),
        ("answer -> next question p50 (ms)", f"{result.percentile(50) * ms:.1f}"),
        ("answer -> next question p99 (ms)", f"{result.percentile(99) * ms:.1f}"),
        ("questions shown: origin", origins(result.origins_shown)),
        ("questions answered: origin", origins(result.origins_answered)),
        ("answered in the database", str(result.db_answered)),
    ]
    if result.favourites_behind_s:
        behind = sorted(result.favourites_behind_s)
        rows.append(
            (
                "favourites behind the answers, median / max (s)",
                f"{behind[len(behind) // 2]:.1f} / {behind[-1]:.1f} "
                f"({len(behind)} snapshots)",
            )
        )
    for minute, counts in sorted(result.shown_by_minute.items()):
        total = sum(counts.values())
        share = counts.get("model", 0) / total if total else float("nan")
        rows.append(
            (
                f"minute {minute + 1}: questions shown, from the model",
                f"{total}, {share:.1%}",
            )
        )
    if result.kill_worker:
        back = result.worker_back_s
        rows += [
            ("worker SIGKILL at (s of load)", f"{result.worker_killed_at_s:.1f}"),
            (
                "a new worker running after (s)",
                "never" if back is None else f"{back:.1f}",
            ),
        ]
    if result.kill:
        rows += [
            ("SIGKILL at (s of load)", f"{result.kill_at_s:.1f}"),
            ("restart until healthy (s)", f"{result.restart_s:.1f}"),
            ("downtime incl. checks (s)", f"{result.downtime_s:.1f}"),
            ("answers in doubt (reply lost)", str(result.in_doubt)),
            ("... of them committed", str(result.in_doubt_committed)),
            (
                "wrong current question after restart",
                str(len(result.wrong_after_restart)),
            ),
        ]
    rows += [
        ("connection errors seen by clients", str(result.transport_errors)),
        ("409 conflicts", str(result.conflicts)),
        ("other error replies", str(result.server_errors)),
        ("acknowledged answers lost", str(len(result.lost))),
        ("answers duplicated", str(len(result.duplicated))),
        ("answered but never sent", str(len(result.unexpected))),
        ("invariant violations", str(len(result.invariant))),
        ("server stop until exit (s)", f"{result.stop_s:.1f}"),
        ("then until its processes exited (s)", f"{result.leftover_wait_s:.1f}"),
        ("processes left behind", str(len(result.leftovers))),
    ]
    mode = "with SIGKILL and restart" if result.kill else "no fault"
    lines = [
        f"### prefbo serve load, {mode} (seed {result.seed})",
        "",
        "| figure | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in rows),
        "",
    ]
    problems = result.problems()
    lines.append("**checks: all passed**" if not problems else "**checks FAILED**:")
    lines += [f"- {p}" for p in problems]
    if result.leftovers:
        lines += ["", "**processes left behind** (then killed by pid):"]
        lines += [f"- {pid}: `{cmd[:120]}`" for pid, cmd in result.leftovers]
    return "\n".join(lines) + "\n"


def machine() -> str:
    r"""The machine, the library versions and the load (this process does not
    import torch: :mod:`benchmarks.harness.environment` reads the versions
    from the installed distributions)."""
    load = environment.load_average()
    return (
        f"{environment.machine()}; {environment.versions_text()}; load average "
        f"{'n/a' if load is None else f'{load:.2f}'}"
    )


def server_threads() -> str:
    r"""The server's thread settings: ``prefbo.utils.threads.describe()`` in a
    process started as the server is, in this process's environment (this
    process does not import torch)."""
    code = "from prefbo.utils.threads import describe; print(describe())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--participants", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--kill", action="store_true", help="SIGKILL and restart")
    parser.add_argument(
        "--kill-worker", action="store_true", help="SIGKILL the model worker once"
    )
    parser.add_argument(
        "--model-kind",
        choices=("population", "collaborative", "individual"),
        default=None,
        help="the study's model.kind (default: the demo study's)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workers", type=int, default=1, help="the server's worker processes"
    )
    parser.add_argument(
        "--db",
        default=None,
        help="a database URL whose prefbo tables the run drops and fills "
        "(default: a fresh SQLite file)",
    )
    parser.add_argument(
        "--think", type=float, default=0.0, help="mean seconds a person looks"
    )
    parser.add_argument(
        "--leftover-wait",
        type=float,
        default=30.0,
        help="seconds the server's processes get to exit after it stopped",
    )
    args = parser.parse_args(argv)
    result = run(
        args.participants,
        args.seconds,
        args.kill,
        args.seed,
        leftover_wait=args.leftover_wait,
        think=args.think,
        model_kind=args.model_kind,
        kill_worker=args.kill_worker,
        workers=args.workers,
        db=args.db,
    )
    print(report(result))
    print(f"machine: {machine()}")
    print(f"server threads: {server_threads()}")
    return 1 if result.problems() or result.leftovers else 0
