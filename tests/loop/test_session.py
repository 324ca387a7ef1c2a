import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError, SessionLogLockedError
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.session import (
    SessionLogError,
    SessionLogWarning,
    encode_record,
    read_session_log,
)

SMALL = {"num_restarts": 2, "raw_samples": 32, "maxiter": 20, "mc_samples": 32}
BOUNDS = [[0.0, 0.0], [1.0, 1.0]]
REPO = Path(__file__).resolve().parents[2]


def _random_session(path, n, close=True):
    opt = PreferentialOptimizer(BOUNDS, strategy="random", log_path=path)
    for k in range(n):
        opt.ask()
        opt.tell(k % 2)
    if close:  # one writer per log: later openers need it released
        opt.close()
    return opt


def test_resume_reproduces_the_next_question(tmp_path):
    path = tmp_path / "s.jsonl"
    kw = dict(strategy="eubo", refit_every=2, seed=5, acqf_options=SMALL)
    opt = PreferentialOptimizer(BOUNDS, log_path=path, **kw)
    for a in (0, 1, 1, 0):
        opt.ask()
        opt.tell(a)
    opt.undo()
    expected = opt.ask()
    opt._log = None  # one writer per log: the original goes on unlogged
    resumed = PreferentialOptimizer.resume(path, seed=5)
    assert torch.equal(resumed.ask(), expected)
    assert [t.answer for t in resumed.history] == [0, 1, 1]
    for t, u in zip(opt.history, resumed.history):
        assert torch.equal(t.options, u.options)  # float64 round trip is exact
    # both continue identically, and the resumed one keeps logging
    opt.tell(1)
    resumed.tell(1)
    assert torch.equal(opt.ask(), resumed.ask())
    _, records = read_session_log(path)
    assert [r["type"] for r in records] == ["tell"] * 4 + ["undo", "tell"]
    assert [r["seq"] for r in records] == list(range(1, 7))


def test_torn_last_line_is_reported_and_earlier_answers_kept(tmp_path):
    path = tmp_path / "s.jsonl"
    _random_session(path, 3)
    line = json.dumps({"type": "tell", "seq": 4, "options": [[0.5, 0.5], [0.1, 0.9]]})
    with open(path, "a") as f:
        f.write(line[:25])  # crash mid-write
    with pytest.warns(SessionLogWarning, match=r"line 5 is torn \(no trailing newline"):
        opt = PreferentialOptimizer.resume(path)
    assert [t.answer for t in opt.history] == [0, 1, 0]
    opt.ask()
    opt.tell(1)
    opt.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = PreferentialOptimizer.resume(path)  # repaired: no warning
    assert [t.answer for t in again.history] == [0, 1, 0, 1]


def test_bad_checksum_on_the_last_line_counts_as_torn(tmp_path):
    path = tmp_path / "s.jsonl"
    _random_session(path, 2)
    text = path.read_text().replace('"answer":1', '"answer":0')
    path.write_text(text)
    with pytest.warns(SessionLogWarning, match=r"line 3 is torn \(checksum mismatch"):
        header, records = read_session_log(path)
    assert header["config"]["strategy"] == "random" and len(records) == 1


def test_damage_before_the_last_line_is_an_error(tmp_path):
    path = tmp_path / "s.jsonl"
    _random_session(path, 3)
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"answer":0', '"answer":1')
    path.write_text("".join(lines))
    with pytest.raises(SessionLogError, match=r"line 2 is damaged \(checksum mismatch"):
        PreferentialOptimizer.resume(path)


def test_log_misuse_is_named(tmp_path):
    path = tmp_path / "s.jsonl"
    _random_session(path, 1)
    with pytest.raises(InputDataError, match=r"already holds a session; resume it"):
        PreferentialOptimizer(BOUNDS, log_path=path)
    with pytest.raises(
        InputDataError, match=r"resume\(seed=...\) expected 1 but .*seed=0"
    ):
        PreferentialOptimizer.resume(path, seed=1)
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    with pytest.raises(SessionLogError, match=r"has no valid header line"):
        read_session_log(empty)


def test_a_file_that_is_not_a_readable_log_is_left_untouched(tmp_path):
    # one line without a newline: torn-looking, but no header to keep
    other = tmp_path / "config.json"
    other.write_text('{"lr": 0.1, "epochs": 10}')
    with pytest.raises(SessionLogError, match=r"has no valid header line"):
        PreferentialOptimizer.resume(other)
    assert other.read_text() == '{"lr": 0.1, "epochs": 10}'
    # a log of another version whose last line this prefbo cannot decode
    path = tmp_path / "s.jsonl"
    _random_session(path, 2)
    lines = path.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header.pop("crc")
    header["version"] = 2
    lines[0] = encode_record(header)
    lines[-1] = encode_record({"type": "ask", "seq": len(lines) - 1})
    text = "".join(lines)
    path.write_text(text)
    with pytest.raises(SessionLogError, match=r"version 2; this prefbo reads version"):
        PreferentialOptimizer.resume(path)
    assert path.read_text() == text


def test_a_failed_write_leaves_no_partial_line(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    opt = _random_session(path, 1, close=False)
    before = path.read_bytes()
    real_write = os.write
    calls = []

    def failing_write(fd, data):  # half a record reaches the disk, then ENOSPC
        calls.append(len(data))
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    opt.ask()
    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(OSError, match="No space left"):
        opt.tell(0)
    monkeypatch.setattr(os, "write", real_write)
    assert calls and path.read_bytes() == before  # cut back to the last record
    assert len(opt.history) == 1  # the failed answer is not in force either
    opt.tell(1)  # the next answer is appended on a fresh line and survives
    opt.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = PreferentialOptimizer.resume(path)
    assert [t.answer for t in resumed.history] == [0, 1]


CHILD = textwrap.dedent(
    """
    import os, sys, warnings
    warnings.simplefilter("ignore")
    from prefbo.loop.optimizer import PreferentialOptimizer
    path = sys.argv[1]
    if os.path.exists(path):
        opt = PreferentialOptimizer.resume(path)
    else:
        opt = PreferentialOptimizer(
            [[0.0, 0.0], [1.0, 1.0]], strategy="random", log_path=path
        )
    k = len(opt.history)
    print("ready", k, flush=True)
    while k < 300:
        opt.ask()
        opt.tell(k % 2)
        print("told", k, flush=True)
        k += 1
    """
)


def test_no_told_answer_is_lost_when_killed(tmp_path):
    path, script = tmp_path / "s.jsonl", tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    rng = random.Random(0)
    told = -1  # highest k whose "told k" line the parent read
    deadline = time.monotonic() + 60
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, str(script), str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        try:
            ready = child.stdout.readline().split()
            assert ready[0] == "ready" and int(ready[1]) >= told + 1
            for _ in range(rng.randint(2, 40)):
                line = child.stdout.readline()
                if not line or time.monotonic() > deadline:
                    break
                told = max(told, int(line.split()[1]))
            time.sleep(rng.uniform(0, 0.003))  # land the kill anywhere in a tell
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
            child.stdout.close()
        assert child.returncode == -signal.SIGKILL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SessionLogWarning)  # a torn line is allowed
        opt = PreferentialOptimizer.resume(path)
    answers = [t.answer for t in opt.history]
    assert len(answers) >= told + 1
    assert answers == [k % 2 for k in range(len(answers))]


# ------------------------------------------------------------ one writer per log
def test_a_second_opener_in_the_same_process_is_refused_until_the_first_closes(
    tmp_path,
):
    path = tmp_path / "s.jsonl"
    first = _random_session(path, 2, close=False)
    with pytest.raises(SessionLogLockedError, match=rf"pid {os.getpid()}\b"):
        PreferentialOptimizer.resume(path)
    with pytest.raises(SessionLogLockedError, match="is open in another optimiser"):
        PreferentialOptimizer(BOUNDS, log_path=tmp_path / "s.jsonl")
    assert len(read_session_log(path)[1]) == 2  # reading is always allowed
    first.close()
    first.close()  # closing twice is harmless
    with pytest.raises(InputDataError, match=r"log .* is closed"):
        first.tell(0, options=torch.tensor([[0.1, 0.1], [0.2, 0.2]]))
    with PreferentialOptimizer.resume(path) as second:
        assert len(second.history) == 2
    del second  # released by the with block, not by garbage collection
    third = PreferentialOptimizer.resume(path)
    del third  # released when the optimiser is garbage collected
    PreferentialOptimizer.resume(path).close()


def test_a_read_only_view_replays_without_the_lock_and_cannot_tell(tmp_path):
    path = tmp_path / "s.jsonl"
    writer = _random_session(path, 3, close=False)
    view = PreferentialOptimizer.resume(path, read_only=True)
    assert [t.answer for t in view.history] == [0, 1, 0]
    assert torch.equal(view.ask(), writer.ask())
    with pytest.raises(InputDataError, match=r"read-only view"):
        view.tell(0)
    with pytest.raises(InputDataError, match=r"read-only view"):
        view.undo()
    writer.tell(1)  # the writer still holds the log
    with pytest.raises(InputTypeError, match=r"read_only must be a bool; got str"):
        PreferentialOptimizer.resume(path, read_only="yes")


HOLDER = textwrap.dedent(
    """
    import sys, warnings
    warnings.simplefilter("ignore")
    from prefbo.loop.optimizer import PreferentialOptimizer
    opt = PreferentialOptimizer.resume(sys.argv[1])
    opt.ask()
    opt.tell(1)
    print("holding", flush=True)
    sys.stdin.readline()  # hold the log until the parent says so
    opt.ask()
    opt.tell(0)
    print("done", flush=True)
    """
)


def test_a_second_process_is_refused_naming_the_holder_and_no_answer_is_lost(
    tmp_path,
):
    path, script = tmp_path / "s.jsonl", tmp_path / "holder.py"
    script.write_text(HOLDER)
    _random_session(path, 2)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, str(script), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    watchdog = threading.Timer(120, child.kill)  # a hung child fails, not hangs
    watchdog.start()
    try:
        assert child.stdout.readline().strip() == "holding"
        with pytest.raises(SessionLogLockedError, match=rf"pid {child.pid}\b"):
            PreferentialOptimizer.resume(path)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        assert child.wait(timeout=60) == 0  # exit releases the lock
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        child.stdout.close()
        child.stdin.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt = PreferentialOptimizer.resume(path)
    assert [t.answer for t in opt.history] == [0, 1, 1, 0]


def _write_records(path, records):
    path.write_text("".join(encode_record(r) for r in records))


def test_a_complete_checksummed_last_record_is_never_dropped(tmp_path):
    path = tmp_path / "s.jsonl"
    _random_session(path, 2)
    lines = path.read_text().splitlines(keepends=True)
    # a second writer's record: valid checksum, sequence number already used
    other = json.loads(lines[2])
    other.pop("crc")
    other["answer"] = 0
    path.write_text("".join(lines) + encode_record(other))
    text = path.read_text()
    with pytest.raises(
        SessionLogError, match=r"line 4 .*sequence number 2 where 3 was expected"
    ):
        PreferentialOptimizer.resume(path)
    assert path.read_text() == text  # nothing removed
    # a read-only view shows the answers before the out-of-sequence record
    with pytest.warns(SessionLogWarning, match=r"line 4 is damaged .*shows the 2"):
        view = PreferentialOptimizer.resume(path, read_only=True)
    assert [t.answer for t in view.history] == [
        json.loads(x)["answer"] for x in lines[1:]
    ]
    assert path.read_text() == text
    # a complete record that lacks only its newline is kept, and the newline added
    path.write_text("".join(lines) + encode_record({**other, "seq": 3}).rstrip("\n"))
    with pytest.warns(SessionLogWarning, match=r"line 4 lacks its newline.*kept"):
        opt = PreferentialOptimizer.resume(path)
    assert [t.answer for t in opt.history] == [0, 1, 0]
    opt.close()
    assert path.read_text().endswith("}\n")


@pytest.mark.parametrize("line", [0, 1, 2])
@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400", "-2E+999"])
def test_a_nan_token_in_any_line_is_named(tmp_path, line, token):
    path = tmp_path / "s.jsonl"
    _random_session(path, 2)
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[line])
    key = "seed" if line == 0 else "answer"
    if line == 0:
        record["config"][key] = 12345
    else:
        record[key] = 12345
    lines[line] = json.dumps(record).replace("12345", token) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(SessionLogError, match=rf"line {line + 1} .*{re.escape(token)}"):
        PreferentialOptimizer.resume(path)
    # a literal that overflows to infinity (1e400) counts as a non-finite token;
    # a read-only view shows the answers before the line (none without a header)
    named = rf"line {line + 1} .*{re.escape(token)}"
    if line == 0:
        with pytest.raises(SessionLogError, match=named):
            PreferentialOptimizer.resume(path, read_only=True)
    else:
        with pytest.warns(SessionLogWarning, match=named):
            view = PreferentialOptimizer.resume(path, read_only=True)
        assert len(view.history) == line - 1


@pytest.mark.parametrize("last", [True, False])
def test_deeply_nested_or_huge_json_is_a_damaged_line(tmp_path, last):
    path = tmp_path / "s.jsonl"
    _random_session(path, 2)
    lines = path.read_text().splitlines(keepends=True)
    deep = "[" * 100_000
    if last:  # a torn last line: ignored with a warning, the answers kept
        path.write_text("".join(lines) + deep)
        with pytest.warns(SessionLogWarning, match=r"line 4 is torn"):
            view = PreferentialOptimizer.resume(path, read_only=True)
        assert len(view.history) == 2
    else:  # further up: refused for writing, shown up to it read-only
        path.write_text("".join(lines[:2]) + deep + "\n" + lines[2])
        with pytest.raises(SessionLogError, match=r"line 3 is damaged .*nested"):
            PreferentialOptimizer.resume(path)
    record = json.loads(lines[1])
    record["answer"] = 12345
    huge = json.dumps(record).replace("12345", "9" * 5000)  # over 4,300 digits
    path.write_text(lines[0] + huge + "\n")
    with pytest.raises(SessionLogError, match=r"line 2 .*prefbo never writes"):
        PreferentialOptimizer.resume(path)


@pytest.mark.parametrize("seq", [1.0, True])
def test_a_sequence_number_must_be_an_int(tmp_path, seq):
    path = tmp_path / "s.jsonl"
    _random_session(path, 2)
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[1])
    record.pop("crc")
    record["seq"] = seq  # equal to 1 in Python, but not what prefbo writes
    path.write_text(lines[0] + encode_record(record) + lines[2])
    with pytest.raises(SessionLogError, match=r"line 2 .*sequence number"):
        PreferentialOptimizer.resume(path)
