import dataclasses
import json

import pytest

from prefbo.serve import flow
from prefbo.serve.rows import (
    EventRow,
    ParticipantRow,
    Progress,
    QuestionRow,
    SnapshotRow,
)


def test_a_question_row_decodes_its_json_columns(store, make_config):
    config = make_config()
    pid = store.add_participant("t", "Ann")
    q = flow.current(store, config, pid)
    [row] = store.questions_of(pid)
    assert isinstance(row, QuestionRow) and row.id == q["question_id"]
    assert row.participant_id == pid and row.seq == 0 and row.origin == "random"
    assert len(row.options) == 2 and len(row.options[0]) == 2  # q x d lists
    assert row.virtual_comparisons is None and row.no_preference is False
    assert not row.answered and row.shown_at is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.choice = 1


def test_rows_as_dicts_keep_the_tables_column_order():
    row = QuestionRow("q", 1, 0, [[0.5], [0.7]], "model", 0, 1.0)
    assert list(row.as_dict()) == [
        "id",
        "participant_id",
        "seq",
        "options",
        "origin",
        "based_on",
        "created_at",
        "shown_at",
        "answered_at",
        "choice",
        "no_preference",
        "virtual_comparisons",
    ]
    person = ParticipantRow(3, "Ann", 2.0)
    assert person.as_dict() == {
        "id": 3,
        "label": "Ann",
        "joined_at": 2.0,
        "finished_at": None,
        "answers": 0,
        "last": None,
    }
    event = EventRow(1, 3, None, "join", 2.0, {"label": "Ann"})
    snap = SnapshotRow(1, 2.0, 5, {"population": None})
    for r in (row, person, event, snap):
        assert json.loads(json.dumps(r.as_dict())) == r.as_dict()


def test_progress_is_a_pair_by_name():
    p = Progress(answers=2, last=7.5)
    assert (p.answers, p.last) == (2, 7.5) and p == (2, 7.5)
