r"""Real preference and choice data sets shipped with prefbo.

Copies (gzipped, unchanged) of the data files of the prefGP library
(Benavoli & Azzimonti; BSD-3-Clause, see ``data/LICENSE-prefGP-data.txt``),
so that the real-data tutorials and their smoke tests run without network
access or a separate data folder:

- ``ModeCanada.csv``: Montreal–Toronto travel-mode choices (4,324 cases,
  long format; originally from the R package mlogit);
- ``Game.csv``: 91 students' rankings of 6 gaming platforms (mlogit);
- ``ellipse/data.csv``, ``ellipse/choices.csv``: 50 ellipses and 160
  choice-set tasks judged on two criteria.

Set the environment variable ``PREFBO_DATA`` to a folder holding the plain
``.csv`` files (e.g. a newer copy) to read those instead.

:mod:`prefbo.datasets.population` turns people's answers into one
:class:`~prefbo.datasets.population.Population`: ``Game.csv``'s rankings as
pairs (:func:`~prefbo.datasets.population.game_rankings`) and a synthetic
population with planted tastes, answering pairs
(:func:`~prefbo.datasets.population.planted_population`) or ranking a few
items each (:func:`~prefbo.datasets.population.planted_rankings`).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path

from prefbo.datasets.population import (
    PlantedPopulation,
    Population,
    game_rankings,
    planted_population,
    planted_rankings,
)
from prefbo.exceptions import InputDataError

DATA_DIR = Path(__file__).parent / "data"
NAMES = ("ModeCanada.csv", "Game.csv", "ellipse/data.csv", "ellipse/choices.csv")

__all__ = [
    "DATA_DIR",
    "NAMES",
    "PlantedPopulation",
    "Population",
    "game_rankings",
    "open_dataset",
    "planted_population",
    "planted_rankings",
    "read_csv",
]


def open_dataset(name: str) -> io.TextIOBase:
    r"""Open one of the shipped data files as text.

    Args:
        name: One of :data:`NAMES` (e.g. ``"ModeCanada.csv"``).

    Returns:
        A text stream (close it, or use it in a ``with`` block): the file in
        ``$PREFBO_DATA`` if that variable is set and holds it, else the copy
        shipped with prefbo.
    """
    if name not in NAMES:
        raise InputDataError(f"name must be one of {NAMES}; got {name!r}.")
    override = os.environ.get("PREFBO_DATA")
    if override and (Path(override) / name).is_file():
        return open(Path(override) / name, newline="", encoding="utf-8")
    return io.TextIOWrapper(
        gzip.open(DATA_DIR / f"{name}.gz", "rb"), newline="", encoding="utf-8"
    )


def read_csv(name: str) -> list[dict[str, str]]:
    r"""The rows of a shipped CSV file as dictionaries keyed by its header.

    A name the header repeats is numbered from its second occurrence on, as
    pandas does (``ellipse/data.csv`` names its 625 pixel columns ``pix_``:
    keys ``pix_``, ``pix_.1``, …, ``pix_.624``), so no column is lost.

    Args:
        name: One of :data:`NAMES`.

    Returns:
        A list of ``{column: text}`` rows, in file order.
    """
    with open_dataset(name) as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return []
        seen: dict[str, int] = {}
        keys = []
        for column in header:
            count = seen.get(column, 0)
            keys.append(column if count == 0 else f"{column}.{count}")
            seen[column] = count + 1
        rows = []
        for lineno, row in enumerate(reader, start=2):
            if not row:  # a blank line (csv.DictReader skips them too)
                continue
            if len(row) != len(keys):
                raise InputDataError(
                    f"{name}: line {lineno} has {len(row)} fields where the header "
                    f"has {len(keys)}."
                )
            rows.append(dict(zip(keys, row, strict=True)))
        return rows
