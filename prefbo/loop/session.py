r"""Durable, append-only logs of preference sessions (JSON lines).

A session log is a text file of one JSON object per line:

- line 0, ``{"type": "header", "seq": 0, "version": 1, "config": {...}}``: the
  optimizer's settings (bounds, model, strategy, seed, ...);
- ``{"type": "tell", "seq": k, "options": [[...], ...], "answer": i}``: the
  ``q x d`` options that were asked and the index of the chosen one; with
  ``"virtual": [[inner, face], ...]`` where computing the question made
  virtual comparisons at the box's faces (:mod:`prefbo.loop.boundary`);
- ``{"type": "undo", "seq": k}``: withdraws the latest remaining answer (the
  log is never rewritten).

Every object carries ``"crc"``, the CRC-32 of its canonical JSON without that
key, and ``seq`` equals its line number. :meth:`SessionLog.append` writes the
line, flushes and ``os.fsync``\ s before it returns, so an answer whose
``tell`` returned survives a crash of the process (or of the machine, as far as
the file system honours ``fsync``). A crash during the write leaves a torn
last line (no newline, bad JSON or bad checksum): :func:`read_session_log`
reports it with a :class:`SessionLogWarning` naming the line and keeps every
earlier record; damage before the last line raises :class:`SessionLogError`.
A complete record with a valid checksum is never dropped: one out of sequence
(e.g. written by a second writer) raises :class:`SessionLogError`, one that
lacks only its newline is kept (and the newline added). Floats are written
with Python's shortest round-trip ``repr``, so float64 designs are restored
bit for bit; a ``NaN`` or ``Infinity`` token, which this writer never
produces, raises :class:`SessionLogError` naming the line.

One writer per log: a :class:`SessionLog` holds an exclusive advisory lock
(``fcntl.flock``) on the file from opening to :meth:`SessionLog.close` (or
its garbage collection, or the end of the process, which release it as
well). A second writer, in this process or another, gets a
:class:`~prefbo.exceptions.SessionLogLockedError` naming the holder's pid
(read from ``/proc/locks`` where the system has it). Readers take no lock.
Where ``fcntl`` is missing (not POSIX) or the file system refuses the lock,
a :class:`SessionLogWarning` says that a second writer will not be refused.
"""

from __future__ import annotations

import json
import math
import os
import warnings
import zlib
from pathlib import Path
from typing import Any

from prefbo.exceptions import (
    InputDataError,
    SessionLogError,
    SessionLogLockedError,
    SessionLogWarning,
)

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock
    fcntl = None

LOG_VERSION = 1
RECORD_TYPES = ("header", "tell", "undo")


def _canonical(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)


def encode_record(record: dict[str, Any]) -> str:
    r"""One log line (with its ``"crc"`` and trailing newline) for ``record``."""
    body = {k: v for k, v in record.items() if k != "crc"}
    crc = zlib.crc32(_canonical(body).encode())
    return _canonical({**body, "crc": crc}) + "\n"


class _Bad(str):
    r"""What is wrong with a line; ``complete``: the line is a whole record
    with a valid checksum (or holds a token this writer never writes), so it
    is not a torn write and is never dropped."""

    complete = False


def _complete(why: str) -> _Bad:
    bad = _Bad(why)
    bad.complete = True
    return bad


class _NonFinite(ValueError):
    r"""A JSON token for a non-finite number (never written by prefbo)."""


def _no_constant(token: str) -> Any:
    raise _NonFinite(token)


def _finite_float(token: str) -> float:
    r"""A JSON number literal as a float; one that overflows to infinity
    (``1e400``) is refused like the ``Infinity`` token."""
    value = float(token)
    if not math.isfinite(value):
        raise _NonFinite(token)
    return value


def _decode(line: str, lineno: int) -> dict[str, Any] | _Bad:
    r"""The record of a line, or a :class:`_Bad` saying what is wrong."""
    try:
        record = json.loads(
            line, parse_constant=_no_constant, parse_float=_finite_float
        )
    except json.JSONDecodeError as e:
        return _Bad(f"invalid JSON ({e.msg} at column {e.colno})")
    except _NonFinite as e:  # NaN, Infinity, 1e400: never written by encode_record
        return _complete(f"the non-finite JSON token {e} (never written by prefbo)")
    except ValueError as e:  # e.g. an integer of over 4,300 digits
        return _complete(f"a JSON value prefbo never writes ({e})")
    except RecursionError:  # brackets nested deeper than the parser goes
        return _Bad("JSON nested too deeply to read")
    if not isinstance(record, dict) or "crc" not in record:
        return _Bad("not a checksummed JSON object")
    body = {k: v for k, v in record.items() if k != "crc"}
    if zlib.crc32(_canonical(body).encode()) != record["crc"]:
        return _Bad("checksum mismatch")
    if record.get("type") not in RECORD_TYPES:
        return _complete(f"unknown record type {record.get('type')!r}")
    if type(record.get("seq")) is not int or record["seq"] != lineno:  # not 2.0, True
        return _complete(
            f"sequence number {record.get('seq')!r} where {lineno} was expected; "
            "a complete record out of sequence, e.g. from a second writer"
        )
    if (lineno == 0) != (record["type"] == "header"):
        return _complete("the header must be the first line, and only the first")
    return body


def _check_version(path: Path, header: dict[str, Any]) -> None:
    if header.get("version") != LOG_VERSION:
        raise SessionLogError(
            f"session log {str(path)!r} has version {header.get('version')!r}; "
            f"this prefbo reads version {LOG_VERSION}."
        )


def read_session_log(
    path: str | os.PathLike, *, repair: bool = False, prefix: bool = False
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    r"""Read and verify a session log.

    Args:
        path: The log file.
        repair: Truncate a torn last line from the file (so that later
            appends start on a fresh line); the dropped bytes are named in the
            warning. Call it only while holding the log's lock (as
            :meth:`~prefbo.loop.PreferentialOptimizer.resume` does), so that
            no writer's line is cut mid-write.
        prefix: Return the records before a damaged line (after the header)
            with a warning instead of raising (for a read-only view; the
            file is not changed). Not with ``repair``.

    Returns:
        ``(header, records)``: the header record and the later records (``tell``
        and ``undo``), each without its ``"crc"``.

    Raises:
        SessionLogError: The file is empty, has no valid header, has another
            version, a line other than the last is damaged, or any line is a
            complete, checksummed record out of sequence or holds a ``NaN``
            or ``Infinity`` token (unless ``prefix``). Nothing is removed
            from such a file, ``repair`` or not.

    Warns:
        SessionLogWarning: The last line is torn (no newline, bad JSON or a
            bad checksum); it is ignored (and removed when ``repair``), the
            earlier records are kept. Or the last line is a complete record
            lacking only its newline: it is kept (and the newline added when
            ``repair``). With ``prefix``: a damaged line, and the records
            before it that are returned.
    """
    if repair and prefix:
        raise InputDataError("read_session_log: repair and prefix exclude each other.")
    path = Path(path)
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]  # tail: bytes after the last newline
    records: list[dict[str, Any]] = []
    offset = 0  # byte offset of the end of the last good line
    torn: tuple[int, str, bytes] | None = None
    newline_missing = False
    for lineno, raw in enumerate(complete + ([tail] if tail else [])):
        result = _decode(raw.decode("utf-8", errors="replace"), lineno)
        last = lineno == len(complete) - (0 if tail else 1)
        if isinstance(result, str):
            if last and not result.complete:
                why = result if lineno < len(complete) else "no trailing newline"
                torn = (lineno, why, raw)
                break
            where = "" if result.complete else " and is not the last line"
            if prefix and records:
                warnings.warn(
                    f"session log {str(path)!r}: line {lineno + 1} is damaged "
                    f"({result}){where}; this read-only view shows the "
                    f"{len(records) - 1} record(s) before it.",
                    SessionLogWarning,
                    stacklevel=2,
                )
                break
            raise SessionLogError(
                f"session log {str(path)!r}: line {lineno + 1} is damaged "
                f"({result}){where}, so it is not a torn write; nothing is "
                "removed: restore the file from a backup or cut it before that line."
            )
        if lineno == 0:
            _check_version(path, result)  # before reading on in another format
        records.append(result)
        offset += len(raw) + 1
        newline_missing = lineno == len(complete)
    # nothing is cut from a file that is not a readable log
    if not records:
        raise SessionLogError(
            f"session log {str(path)!r} has no valid header line; expected a JSON "
            'line {"type": "header", "seq": 0, ...} written by PreferentialOptimizer.'
        )
    if torn is not None:
        lineno, why, raw = torn
        warnings.warn(
            f"session log {str(path)!r}: line {lineno + 1} is torn ({why}; "
            f"{len(raw)} bytes: {raw[:60]!r}{'...' if len(raw) > 60 else ''}), "
            "probably a crash while writing it; it is "
            + ("removed" if repair else "ignored")
            + f" and the {len(records) - 1} earlier record(s) are kept.",
            SessionLogWarning,
            stacklevel=2,
        )
        if repair:
            with open(path, "r+b") as f:
                f.truncate(offset)
                f.flush()
                os.fsync(f.fileno())
    if newline_missing:  # a complete record: kept
        warnings.warn(
            f"session log {str(path)!r}: line {len(records)} lacks its newline "
            "(a crash right after writing it); the record is complete and "
            "checksummed, so it is kept"
            + (" and the newline added." if repair else "."),
            SessionLogWarning,
            stacklevel=2,
        )
        if repair:
            with open(path, "ab") as f:
                f.write(b"\n")
                f.flush()
                os.fsync(f.fileno())
    header = records[0]
    return header, records[1:]


def check_json_config(config: dict[str, Any]) -> None:
    r"""Raise if a value of ``config`` cannot be stored in a log header.

    Raises:
        InputDataError: Naming the first setting that is not
            JSON-serialisable (or holds a NaN or an infinity).
    """
    for key, value in config.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InputDataError(
                f"{key} cannot be stored in the session log at log_path "
                f"(it must be JSON-serialisable: {e}); pass plain values "
                "or log_path=None."
            ) from None


def lock_holder(fd: int) -> int | None:
    r"""The pid holding a ``flock`` on the file of ``fd``, from ``/proc/locks``
    (``None`` where the system does not say)."""
    st = os.fstat(fd)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()  # "1: FLOCK ADVISORY WRITE pid maj:min:inode ..."
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == key:
            try:
                pid = int(fields[4])
            except ValueError:
                return None
            return pid if pid > 0 else None  # <= 0: outside this pid namespace
    return None


def _lock(fd: int, path: Path) -> None:
    r"""Take the exclusive advisory lock on ``fd`` (see the module docstring)."""
    if fcntl is None:
        warnings.warn(
            f"session log {str(path)!r} cannot be locked on this system (no "
            "fcntl); a second writer of this log will not be refused.",
            SessionLogWarning,
            stacklevel=3,
        )
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = lock_holder(fd)
        holder = "pid unknown on this system" if pid is None else f"pid {pid}"
        if pid == os.getpid():
            holder += ", this process"
        raise SessionLogLockedError(
            f"session log {str(path)!r} is open in another optimiser ({holder}); "
            "a log has one writer at a time, or answers are lost. Close it "
            "there (opt.close(), or end that process), or open a read-only "
            "view with PreferentialOptimizer.resume(log_path, read_only=True)."
        ) from None
    except OSError as e:  # a file system without locks (some network mounts)
        warnings.warn(
            f"session log {str(path)!r} cannot be locked ({e}); a second writer "
            "of this log will not be refused.",
            SessionLogWarning,
            stacklevel=3,
        )


class SessionLog:
    r"""Append-only writer of a session log (see the module docstring).

    It holds the log's exclusive lock until :meth:`close` (or its garbage
    collection, or the end of the process).

    Example:
        >>> log = SessionLog.create("s.jsonl", {"seed": 0})
        >>> log.append({"type": "tell", "options": [[0.1], [0.7]], "answer": 1})
        >>> log.close()
    """

    _fd: int | None = None

    def __init__(
        self, path: str | os.PathLike, next_seq: int, *, create: bool = False
    ) -> None:
        r"""Open ``path`` for appending and take its lock.

        Args:
            path: An existing log file (or, with ``create``, a new one).
            next_seq: Sequence number of the next record (= its line number).
            create: Create the file if it does not exist.

        Raises:
            InputDataError: ``path`` is a directory.
            SessionLogLockedError: Another optimiser holds the log.
            OSError: The file cannot be opened (e.g. ``FileNotFoundError``).
        """
        self.path = Path(path)
        self.next_seq = int(next_seq)
        if self.path.is_dir():
            raise InputDataError(
                f"log_path {str(self.path)!r} is a directory; a session log is a "
                "file, e.g. log_path='session.jsonl'."
            )
        flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT if create else 0)
        fd = os.open(self.path, flags, 0o644)
        try:
            _lock(fd, self.path)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    @classmethod
    def create(cls, path: str | os.PathLike, config: dict[str, Any]) -> SessionLog:
        r"""Create a new log holding only the header.

        Args:
            path: The new file; it must not exist (or be empty).
            config: JSON-serialisable settings stored in the header.

        Returns:
            The writer, positioned after the header, holding the lock.

        Raises:
            InputDataError: ``path`` exists and is not empty, or is a directory.
            SessionLogLockedError: Another optimiser holds the file.
        """
        log = cls(path, 0, create=True)
        if os.fstat(log._fd).st_size > 0:  # checked under the lock
            log.close()
            raise InputDataError(
                f"log_path {str(log.path)!r} already holds a session; resume it "
                "with PreferentialOptimizer.resume(log_path) or choose a new file."
            )
        log.append({"type": "header", "version": LOG_VERSION, "config": config})
        return log

    @property
    def closed(self) -> bool:
        r"""Whether :meth:`close` was called (the lock is then released)."""
        return self._fd is None

    def close(self) -> None:
        r"""Release the lock and close the file (again: nothing happens)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # releases the flock

    def __del__(self, _close: Any = os.close) -> None:
        # os.close bound at definition: module globals may be gone at exit
        fd, self._fd = self._fd, None
        if fd is not None:
            _close(fd)

    def append(self, record: dict[str, Any]) -> int:
        r"""Write one record durably (flush + ``os.fsync``) and return its ``seq``.

        Args:
            record: JSON-serialisable dictionary with a ``"type"``; ``"seq"``
                and ``"crc"`` are set here.

        Returns:
            The record's sequence number.

        Raises:
            InputDataError: The log was closed.
            OSError: The write failed; the file is cut back to its length
                before the call (as far as the file system allows), so a
                later append starts on a fresh line.
        """
        fd = self._fd
        if fd is None:
            raise InputDataError(
                f"session log {str(self.path)!r} is closed; resume it with "
                "PreferentialOptimizer.resume(log_path) to answer on."
            )
        seq = self.next_seq
        line = encode_record({**record, "seq": seq})
        size = os.fstat(fd).st_size
        try:
            data = line.encode()
            while data:  # os.write may write less than asked
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        except BaseException:
            # a failed write (disk full, interrupt) must not leave part of
            # a line that the next record would be appended to: cut back
            # to the last complete record, then report the failure
            try:
                os.ftruncate(fd, size)
                os.fsync(fd)
            except OSError:
                pass  # the torn line is then reported on reading
            raise
        self.next_seq = seq + 1
        return seq
