r"""Export of a served study: plain CSV and JSON, readable by any later
version (no pickles; options as the person saw them, by variable name, and
as the model's points).

CSV: one row per answered question, in participant and ``seq`` order, with
the columns ``participant, label, seq, question_id, origin, shown_at,
answered_at, choice, no_preference`` and, for each option ``i`` and
variable ``v``, ``option{i}.{v}``; a text cell that a spreadsheet would
read as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return) gets a leading ``'`` (OWASP's rule against CSV
injection: a participant's label is theirs to choose), numbers stay
numbers. JSON: the study as read, the schema
version, the participants, every question (answered or not, with the
virtual comparisons at the space's faces an individual model's question
carried, ``virtual_comparisons``, model points) and the audit trail of
events (undone answers included).
"""

from __future__ import annotations

import csv
import io
from typing import Any

from prefbo.serve.config import StudyConfig
from prefbo.serve.flow import option_values
from prefbo.serve.schema import SCHEMA_VERSION
from prefbo.serve.store import Store


def export_csv(store: Store, config: StudyConfig) -> str:
    r"""Every answered question as CSV text (see the module docstring)."""
    labels = {p.id: p.label for p in store.participants()}
    names = config.space.names
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    head = [
        "participant",
        "label",
        "seq",
        "question_id",
        "origin",
        "shown_at",
        "answered_at",
        "choice",
        "no_preference",
    ]
    head += [f"option{i}.{n}" for i in range(config.q) for n in names]
    writer.writerow(head)
    for q in store.answered():
        row = [
            q.participant_id,
            labels.get(q.participant_id, ""),
            q.seq,
            q.id,
            q.origin,
            q.shown_at,
            q.answered_at,
            "" if q.choice is None else q.choice,
            int(q.no_preference),
        ]
        for values in option_values(config, q.options):
            row += [values[n] for n in names]
        writer.writerow([_cell(v) for v in row])
    return buffer.getvalue()


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    r"""``value``, with a leading ``'`` where it is text that a spreadsheet
    would run as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def export_json(store: Store, config: StudyConfig) -> dict[str, Any]:
    r"""The whole study as JSON-serialisable data (see the module docstring)."""
    participants = store.participants()
    questions = []
    for p in participants:
        for q in store.questions_of(p.id):
            if q.shown_at is None and q.answered_at is None:
                continue  # made by a worker, never shown
            questions.append(
                {**q.as_dict(), "values": option_values(config, q.options)}
            )
    return {
        "format": "prefbo-serve-export",
        "schema_version": SCHEMA_VERSION,
        "study": store.study_source(),
        "participants": [p.as_dict() for p in participants],
        "questions": questions,
        "events": [e.as_dict() for e in store.events()],
    }
