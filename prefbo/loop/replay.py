r"""Rebuilding an optimiser from its session log, every record checked.

:meth:`~prefbo.loop.PreferentialOptimizer.resume` reads the log
(:func:`~prefbo.loop.session.read_session_log`), builds the optimiser from the
header's ``config`` (read as
:meth:`LoopSettings.from_dict <prefbo.loop.settings.LoopSettings.from_dict>`
reads any layout prefbo has written) and replays the ``tell`` and ``undo``
records. A record with a valid checksum is not trusted for that: its
contents are checked as the constructor and
:meth:`~prefbo.loop.PreferentialOptimizer.tell` check their arguments, and
anything they would refuse raises :class:`~prefbo.exceptions.SessionLogError`
naming the line (nothing in the file is changed).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

from torch import Tensor

from prefbo.exceptions import (
    InputDataError,
    InputTypeError,
    PrefboError,
    SessionLogError,
    SessionLogWarning,
)
from prefbo.loop.answers import Answer, check_virtual
from prefbo.loop.session import read_session_log
from prefbo.loop.settings import LoopSettings
from prefbo.space import Space


def line_error(path: str | os.PathLike, seq: int, what: str, why: str) -> str:
    r"""The message of a :class:`~prefbo.exceptions.SessionLogError` about the
    ``what`` record on line ``seq + 1``: ``why`` it is refused, and the
    remedy (the header holds the session's settings: it is never cut)."""
    remedy = (
        "resume once its settings can be read (register a strategy or model "
        "kind of your own first), or restore the file from a backup"
        if seq == 0
        else "restore the file from a backup or cut it before that line"
    )
    return (
        f"session log {str(path)!r}: line {seq + 1} ({what}) {why.rstrip('.')}; "
        f"nothing is removed: {remedy}."
    )


#: The keys of each record type (prefbo writes no others).
RECORD_KEYS = {
    "header": {"type", "seq", "version", "config"},
    "tell": {"type", "seq", "options", "answer", "virtual"},
    "undo": {"type", "seq"},
}


def check_record_keys(path: str | os.PathLike, record: dict[str, Any]) -> None:
    r"""Refuse a verified record with keys its type never has (naming the
    line): it was not written by prefbo, and what it says would be ignored.

    Raises:
        SessionLogError: Unknown keys.
    """
    kind = record["type"]
    unknown = sorted(set(record) - RECORD_KEYS[kind])
    if unknown:
        why = f"has unknown key(s) {unknown}"
        raise SessionLogError(line_error(path, record["seq"], kind, why))


def header_config(path: str | os.PathLike, header: dict[str, Any]) -> dict[str, Any]:
    r"""The ``config`` of a verified header record.

    Raises:
        SessionLogError: The header has no ``config`` or it is not a dict
            (naming line 1).
    """
    if "config" not in header:
        raise SessionLogError(line_error(path, 0, "header", "has no 'config'"))
    config = header["config"]
    if not isinstance(config, dict):
        why = f"config must be a dict; got {type(config).__name__}"
        raise SessionLogError(line_error(path, 0, "header", why))
    return config


def tell_record(
    path: str | os.PathLike,
    record: dict[str, Any],
    check: Callable[[Any, Any], tuple[Tensor, int]],
) -> tuple[Tensor, int]:
    r"""The options and answer of a verified ``tell`` record, checked as
    :meth:`~prefbo.loop.PreferentialOptimizer.tell` checks them.

    Args:
        path: The log (for messages).
        record: The record.
        check: The optimiser's ``check_answer(answer, options)``.

    Returns:
        ``(options, answer)``: ``q x d`` float64 options and the int index.

    Raises:
        SessionLogError: A key is missing or the options or answer are not
            what ``tell`` accepts (naming the line and why).
    """
    for key in ("options", "answer"):
        if key not in record:
            why = f"has no {key!r}"
            raise SessionLogError(line_error(path, record["seq"], "tell", why))
    try:
        return check(record["answer"], record["options"])
    except (InputDataError, InputTypeError) as e:
        raise SessionLogError(
            line_error(path, record["seq"], "tell", f"holds a bad answer: {e}")
        ) from None


def virtual_record(path: str | os.PathLike, record: dict[str, Any], opt: Any) -> Tensor:
    r"""The virtual comparisons of a verified ``tell`` record, checked
    (:func:`~prefbo.loop.answers.check_virtual`) against ``opt``'s box.

    Raises:
        SessionLogError: They are not ``k x 2 x d`` distinct designs in the
            box, or the header's ``boundary_step`` is ``None`` (naming the
            line and why).
    """
    why = "virtual comparisons need a boundary_step; the header's is None."
    if opt.boundary_step is not None:
        try:
            return check_virtual(record["virtual"], opt.bounds)
        except PrefboError as e:
            why = str(e)
    why = f"holds bad virtual comparisons: {why}"
    raise SessionLogError(line_error(path, record["seq"], "tell", why))


def check_expected(
    path: str | os.PathLike, config: dict[str, Any], expected: dict[str, Any]
) -> None:
    r"""Raise unless the settings ``config`` (a header's, migrated) hold
    ``expected`` (see :meth:`~prefbo.loop.PreferentialOptimizer.resume`).

    Raises:
        InputDataError: Naming the first setting that differs or is not one.
    """
    for key, value in expected.items():
        stored = config.get(key, "<missing>")
        if isinstance(value, Tensor):
            value = value.tolist()
        if isinstance(value, Space):  # stored as its JSON form
            value = value.to_dict()
        if key not in config or stored != value:
            raise InputDataError(
                f"resume({key}=...) expected {value!r} but the log "
                f"{str(path)!r} was written with {key}={stored!r}."
            )


def replay(
    cls: type, log_path: str | os.PathLike, read_only: bool, expected: dict[str, Any]
) -> tuple[Any, int]:
    r"""An optimiser of class ``cls`` rebuilt from the log at ``log_path``.

    Args:
        cls: :class:`~prefbo.loop.PreferentialOptimizer` (or a subclass).
        log_path: The log.
        read_only: Leave the file as it is (a torn last line is only
            reported, not cut).
        expected: Settings the header's ``config`` must hold (see
            :meth:`~prefbo.loop.PreferentialOptimizer.resume`).

    Returns:
        ``(optimizer, count)``: the optimiser after the logged answers (with
        no log attached) and the number of records after the header.

    Raises:
        InputDataError: A setting differs from ``expected``.
        SessionLogError: The log is damaged, or a record holds what the
            constructor or ``tell`` would refuse (naming the line).
    """
    header, records = read_session_log(log_path, repair=not read_only, prefix=read_only)
    check_record_keys(log_path, header)
    try:
        settings = LoopSettings.from_dict(header_config(log_path, header))
    except SessionLogError:
        raise
    except PrefboError as e:
        why = f"holds settings the optimiser refuses: {e}"
        raise SessionLogError(line_error(log_path, 0, "header", why)) from None
    check_expected(log_path, settings.to_dict(), expected)
    opt = cls(settings=settings)
    for count, rec in enumerate(records):
        try:
            _apply(opt, log_path, rec)
        except SessionLogError as e:
            if not read_only:
                raise
            warnings.warn(  # a view shows what the log says up to there
                f"{e} This read-only view shows the {count} record(s) before it.",
                SessionLogWarning,
                stacklevel=3,
            )
            return opt, count
    return opt, len(records)


def _apply(opt: Any, log_path: str | os.PathLike, rec: dict[str, Any]) -> None:
    r"""Replay one record on ``opt`` (checked as ``tell`` and ``undo`` are)."""
    check_record_keys(log_path, rec)
    if rec["type"] == "tell":
        options, answer = tell_record(log_path, rec, opt.check_answer)
        virtual = virtual_record(log_path, rec, opt) if "virtual" in rec else None
        opt.restore(Answer(rec["seq"], options, answer, virtual))
    elif opt.num_answers:  # undo (no log attached yet: nothing written)
        opt.undo()
    else:
        why = "withdraws an answer where none is left"
        raise SessionLogError(line_error(log_path, rec["seq"], "undo", why))
