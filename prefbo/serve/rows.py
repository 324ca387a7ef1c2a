r"""The typed rows :class:`~prefbo.serve.store.Store` returns: one frozen
dataclass (or named tuple) per kind of row, its JSON columns decoded.

A row's fields are its table's columns in the table's order (the
``participants`` rows add their answer count and latest answer), so
``as_dict()`` gives what the researcher's status and the export show.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True, slots=True)
class QuestionRow:
    r"""One question of a participant (a ``questions`` row).

    Attributes:
        id: The question's id (32 hex digits).
        participant_id: Whose question it is.
        seq: Its place in the participant's questions, from 0.
        options: The options as the space's model points, ``q x d`` lists.
        origin: ``"model"`` (a worker's) or ``"random"`` (drawn uniformly).
        based_on: The participant's answer count it was made at.
        created_at: When it was made (seconds since the epoch).
        shown_at: When it was first shown, or ``None``.
        answered_at: When it was answered, or ``None``.
        choice: The option chosen, or ``None`` (unanswered, no preference).
        no_preference: Whether the answer was "no preference".
        virtual_comparisons: The virtual comparisons at the space's faces a
            model's question carries to its answer (``k x 2 x d`` lists), or
            ``None``.
    """

    id: str
    participant_id: int
    seq: int
    options: list
    origin: str
    based_on: int
    created_at: float
    shown_at: float | None = None
    answered_at: float | None = None
    choice: int | None = None
    no_preference: bool = False
    virtual_comparisons: list | None = None

    @classmethod
    def from_db(cls, row: Any) -> QuestionRow:
        r"""The question of a database row (its JSON columns decoded)."""
        return cls.from_columns(dict(row._mapping))

    @classmethod
    def from_columns(cls, d: dict[str, Any]) -> QuestionRow:
        r"""The question of a ``questions`` row's columns by name (its JSON
        columns decoded)."""
        d = dict(d)
        virtual = d["virtual_comparisons"]
        d["options"] = json.loads(d["options"])
        d["virtual_comparisons"] = None if virtual is None else json.loads(virtual)
        d["no_preference"] = bool(d["no_preference"])
        return cls(**d)

    @property
    def answered(self) -> bool:
        r"""Whether the question holds an answer."""
        return self.answered_at is not None

    def as_dict(self) -> dict[str, Any]:
        r"""The fields by name, JSON-serialisable."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ParticipantRow:
    r"""One participant with their progress (a ``participants`` row, its
    token's hash left out).

    Attributes:
        id: The participant's id.
        label: Their label.
        joined_at: When they joined.
        finished_at: When they answered their last question, or ``None``.
        answers: How many answers they hold now.
        last: When their answers last changed (an answer or an undo), or
            ``None`` before their first answer (in a database migrated to
            schema 4: the time of the latest answer it held then).
    """

    id: int
    label: str
    joined_at: float
    finished_at: float | None = None
    answers: int = 0
    last: float | None = None

    def as_dict(self) -> dict[str, Any]:
        r"""The fields by name, JSON-serialisable."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class EventRow:
    r"""One entry of the audit trail (an ``events`` row).

    Attributes:
        id: Its place in the trail.
        participant_id: Whose event it is.
        question_id: The question it concerns, or ``None`` (a join).
        kind: ``"join"``, ``"answer"``, ``"undo"`` or ``"replace"``.
        at: When it happened.
        data: What it recorded (decoded JSON).
    """

    id: int
    participant_id: int
    question_id: str | None
    kind: str
    at: float
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        r"""The fields by name, JSON-serialisable."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    r"""The favourites a worker stored (a ``snapshots`` row).

    Attributes:
        id: Its place among the snapshots.
        at: When it was stored.
        answers: The study's answer count it was made at.
        data: The favourites (decoded JSON).
    """

    id: int
    at: float
    answers: int
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        r"""The fields by name, JSON-serialisable."""
        return asdict(self)


class Progress(NamedTuple):
    r"""A participant's answer count and the time of their latest answer: a
    pair that changes with every answer and every undo."""

    answers: int
    last: float


class Renewal(NamedTuple):
    r"""What a worker's renewal found: the live workers' names (sorted) and
    the participants whose leases it holds now."""

    live: list[str]
    held: set[int]


@dataclass(frozen=True, slots=True)
class Needing:
    r"""What a worker needs to make a participant's next question.

    Attributes:
        seq: The ``seq`` of the question to make.
        shown: The options of the question on screen (its answer is not
            known yet), or ``None`` when nothing is on screen.
        answers: The participant's answer count.
        shown_at: When the question on screen was shown (``inf``: none is).
        shown_virtual: The virtual comparisons the question on screen
            carries, or ``None``.
    """

    seq: int
    shown: list | None
    answers: int
    shown_at: float
    shown_virtual: list | None = None


@dataclass(frozen=True, slots=True)
class MadeQuestion:
    r"""A question a worker made, to be stored.

    Attributes:
        participant_id: Whose question it is.
        seq: The ``seq`` it was made for.
        options: The options as the space's model points, ``q x d`` lists.
        based_on: The participant's answer count it was made at: it is kept
            out once they answered or undid since.
        virtual: The virtual comparisons it carries to its answer, or
            ``None``.
    """

    participant_id: int
    seq: int
    options: list
    based_on: int
    virtual: list | None = None
