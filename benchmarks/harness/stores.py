r"""JSON-lines stores: one record per finished run, appended as it ends.

A long benchmark appends each run to its store when the run ends, so a killed
run resumes where it stopped (a script skips the keys its store holds) and
its page is written again from the store alone (``--report`` /
``--report-only``), without measuring anything.

- :func:`read`: a store's records (none for a missing store; a torn line, as a
  killed writer leaves, skipped);
- :func:`append`: one record, flushed;
- :func:`latest`: the last record of each key, as a page shows them when a
  run was made again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any

Record = dict[str, Any]


def read(path: Path) -> list[Record]:
    r"""The records of the store at ``path``, in order.

    Args:
        path: A JSON-lines file; a missing one is an empty store.

    Returns:
        One dictionary per line that holds one; blank lines and lines that are
        not JSON (the torn last line of a killed writer) are skipped.
    """
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def append(path: Path, *records: Record) -> None:
    r"""Append ``records`` to the store at ``path``, one line each, creating
    the file (not its folder) where it is missing."""
    with path.open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
        fh.flush()


def latest(
    records: Iterable[Record], key: Callable[[Record], Hashable]
) -> list[Record]:
    r"""The last record of each ``key(record)``, in the order the keys were
    first seen (a later run of the same key replaces an earlier one)."""
    kept: dict[Hashable, Record] = {}
    for r in records:
        kept[key(r)] = r
    return list(kept.values())
