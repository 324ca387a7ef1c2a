r"""Durable, append-only logs of preference sessions (JSON lines).

A session log is a text file of one JSON object per line:

- line 0, ``{"type": "header", "seq": 0, "version": 1, "config": {...}}``: the
  optimizer's settings (bounds, model, strategy, seed, ...);
- ``{"type": "tell", "seq": k, "options": [[...], ...], "answer": i}``: the
  ``q x d`` options that were asked and the index of the chosen one;
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
Floats are written with Python's shortest round-trip ``repr``, so float64
designs are restored bit for bit.
"""

from __future__ import annotations

import json
import os
import warnings
import zlib
from pathlib import Path
from typing import Any

from prefbo.exceptions import InputDataError, SessionLogError, SessionLogWarning

LOG_VERSION = 1
RECORD_TYPES = ("header", "tell", "undo")


def _canonical(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)


def encode_record(record: dict[str, Any]) -> str:
    r"""One log line (with its ``"crc"`` and trailing newline) for ``record``."""
    body = {k: v for k, v in record.items() if k != "crc"}
    crc = zlib.crc32(_canonical(body).encode())
    return _canonical({**body, "crc": crc}) + "\n"


def _decode(line: str, lineno: int) -> dict[str, Any] | str:
    r"""The record of a complete line, or a string saying what is wrong."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        return f"invalid JSON ({e.msg} at column {e.colno})"
    if not isinstance(record, dict) or "crc" not in record:
        return "not a checksummed JSON object"
    body = {k: v for k, v in record.items() if k != "crc"}
    if zlib.crc32(_canonical(body).encode()) != record["crc"]:
        return "checksum mismatch"
    if record.get("type") not in RECORD_TYPES:
        return f"unknown record type {record.get('type')!r}"
    if record.get("seq") != lineno:
        return f"sequence number {record.get('seq')!r} where {lineno} was expected"
    if (lineno == 0) != (record["type"] == "header"):
        return "the header must be the first line, and only the first"
    return body


def _check_version(path: Path, header: dict[str, Any]) -> None:
    if header.get("version") != LOG_VERSION:
        raise SessionLogError(
            f"session log {str(path)!r} has version {header.get('version')!r}; "
            f"this prefbo reads version {LOG_VERSION}."
        )


def read_session_log(
    path: str | os.PathLike, *, repair: bool = False
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    r"""Read and verify a session log.

    Args:
        path: The log file.
        repair: Truncate a torn last line from the file (so that later
            appends start on a fresh line). The dropped bytes are named in the
            warning.

    Returns:
        ``(header, records)``: the header record and the later records (``tell``
        and ``undo``), each without its ``"crc"``.

    Raises:
        SessionLogError: The file is empty, has no valid header, has another
            version, or a line other than the last is damaged. Nothing is
            removed from such a file, ``repair`` or not.

    Warns:
        SessionLogWarning: The last line is torn; it is ignored (and removed
            when ``repair``), the earlier records are kept.
    """
    path = Path(path)
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]  # tail: bytes after the last newline
    records: list[dict[str, Any]] = []
    offset = 0  # byte offset of the end of the last good line
    torn: tuple[int, str, bytes] | None = None
    for lineno, raw in enumerate(complete):
        result = _decode(raw.decode("utf-8", errors="replace"), lineno)
        if isinstance(result, str):
            if lineno == len(complete) - 1 and not tail:
                torn = (lineno, result, raw)
                break
            raise SessionLogError(
                f"session log {str(path)!r}: line {lineno + 1} is damaged "
                f"({result}) and is not the last line, so it is not a torn "
                "write; restore the file from a backup or cut it before that line."
            )
        if lineno == 0:
            _check_version(path, result)  # before reading on in another format
        records.append(result)
        offset += len(raw) + 1
    if tail and torn is None:
        torn = (len(complete), "no trailing newline", tail)
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


class SessionLog:
    r"""Append-only writer of a session log (see the module docstring).

    Example:
        >>> log = SessionLog.create("s.jsonl", {"seed": 0})
        >>> log.append({"type": "tell", "options": [[0.1], [0.7]], "answer": 1})
    """

    def __init__(self, path: str | os.PathLike, next_seq: int) -> None:
        r"""
        Args:
            path: An existing, verified log file.
            next_seq: Sequence number of the next record (= its line number).
        """
        self.path = Path(path)
        self.next_seq = int(next_seq)

    @classmethod
    def create(cls, path: str | os.PathLike, config: dict[str, Any]) -> SessionLog:
        r"""Create a new log holding only the header.

        Args:
            path: The new file; it must not exist (or be empty).
            config: JSON-serialisable settings stored in the header.

        Returns:
            The writer, positioned after the header.

        Raises:
            InputDataError: ``path`` exists and is not empty.
        """
        path = Path(path)
        if path.exists() and path.stat().st_size > 0:
            raise InputDataError(
                f"log_path {str(path)!r} already holds a session; resume it with "
                "PreferentialOptimizer.resume(log_path) or choose a new file."
            )
        log = cls(path, 0)
        log.append({"type": "header", "version": LOG_VERSION, "config": config})
        return log

    def append(self, record: dict[str, Any]) -> int:
        r"""Write one record durably (flush + ``os.fsync``) and return its ``seq``.

        Args:
            record: JSON-serialisable dictionary with a ``"type"``; ``"seq"``
                and ``"crc"`` are set here.

        Returns:
            The record's sequence number.

        Raises:
            OSError: The write failed; the file is cut back to its length
                before the call (as far as the file system allows), so a
                later append starts on a fresh line.
        """
        seq = self.next_seq
        line = encode_record({**record, "seq": seq})
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
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
        finally:
            os.close(fd)
        self.next_seq = seq + 1
        return seq
