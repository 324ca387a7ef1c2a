r"""A study's folder: participants' names, which name their logs' files, and
the lock that keeps one :class:`~prefbo.loop.PopulationStudy` object per
folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

from prefbo.exceptions import InputDataError, InputTypeError, SessionLogLockedError
from prefbo.loop.session import lock_holder
from prefbo.utils.checks import describe

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

#: A participant's name: also their log's file name ``<name>.jsonl``.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def check_name(name: object) -> None:
    r"""Refuse a ``name`` that is not a str, or not one :data:`NAME` matches."""
    if not isinstance(name, str):
        raise InputTypeError(
            f"a participant's name must be a str; got {describe(name)}."
        )
    if not NAME.fullmatch(name):
        raise InputDataError(
            "a participant's name (also their log's file name) must be 1-100 "
            "letters, digits, '_', '.' or '-', not starting with '.' or '-'; got "
            f"{name!r}."
        )


def lock_folder(log_dir: Path) -> int:
    r"""An open descriptor of ``log_dir/study.json`` holding its exclusive
    lock: one study object at a time writes a study folder (two would give
    different people one id, and each would rewrite the other's list)."""
    path = log_dir / "study.json"
    fd = os.open(path, os.O_RDWR)
    if fcntl is None:
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = lock_holder(fd)
        os.close(fd)
        holder = "pid unknown on this system" if pid is None else f"pid {pid}"
        if pid == os.getpid():
            holder += ", this process"
        raise SessionLogLockedError(
            f"the study folder {str(log_dir)!r} is open in another PopulationStudy "
            f"({holder}); close it there (study.close(), or end that process) "
            "before resuming it."
        ) from None
    return fd
