from dataclasses import replace

import pytest
import torch

from prefbo.serve import flow
from prefbo.serve.answered import AnsweredRows, told_answers
from prefbo.serve.config import study_from_dict
from prefbo.serve.rows import QuestionRow


@pytest.fixture
def config(tmp_path):
    return study_from_dict(
        {
            "space": [{"name": "x", "type": "continuous", "lower": 0, "upper": 1}],
            "answers_per_participant": 20,
        },
        root=tmp_path,
        name="study.toml",
    )


def _answer(store, config, pid, count, choice=0):
    q = flow.current(store, config, pid)
    for _ in range(count):
        q = flow.answer(store, config, pid, q["question_id"], choice)
    return q


def test_incremental_reads_equal_full_reads_and_fetch_only_new_rows(
    store, config, monkeypatch
):
    a, b = store.add_participant("ta", "a"), store.add_participant("tb", "b")
    reader = AnsweredRows(store)
    fetched = []
    real = store.answered_from

    def counting(starts):
        rows = real(starts)
        fetched.append(len(rows))
        return rows

    monkeypatch.setattr(store, "answered_from", counting)

    def full(pids):
        rows = store.answered(pids)
        return {p: [r for r in rows if r.participant_id == p] for p in pids}

    _answer(store, config, a, 3)
    _answer(store, config, b, 2)
    assert reader.read([a, b]) == full([a, b]) and fetched == [5]
    _answer(store, config, a, 2)
    assert reader.read([a]) == full([a]) and fetched[-1] == 2  # the new ones
    assert reader.read([a, b]) == full([a, b]) and fetched[-1] == 0
    # two undos and new answers, the count back where it was: the answers
    # from the first undone question on are read again
    q = flow.current(store, config, a)
    for _ in range(2):
        q = flow.undo(store, config, a, q["previous_id"])
    _answer(store, config, a, 2, choice=1)
    rows = reader.read([a])
    assert rows == full([a]) and fetched[-1] == 2
    assert [r.choice for r in rows[a]] == [0, 0, 0, 1, 1]
    # a participant without answers
    c = store.add_participant("tc", "c")
    assert reader.read([c]) == {c: []}


def rows_of(count):
    r"""``count`` answered questions of participant 0, the first option
    chosen where its first coordinate is larger."""
    g = torch.Generator().manual_seed(0)
    out = []
    for seq in range(count):
        X = torch.rand(2, 2, generator=g, dtype=torch.float64)
        out.append(
            QuestionRow(
                id=f"0-{seq}",
                participant_id=0,
                seq=seq,
                options=X.tolist(),
                origin="model",
                based_on=seq,
                created_at=float(seq),
                shown_at=float(seq),
                answered_at=float(seq),
                choice=int(X[:, 0].argmax()),
            )
        )
    return out


def test_no_preference_answers_are_not_told():
    rows = rows_of(3)
    rows[1] = replace(rows[1], no_preference=True, choice=None)
    told = told_answers(rows)
    assert [t[0] for t in told] == [("0-0", 0.0), ("0-2", 2.0)]
    X = torch.tensor(rows[2].options, dtype=torch.float64)
    assert torch.equal(told[1].winner, X[rows[2].choice])


def test_told_answers_reuse_those_told_before():
    rows = rows_of(6)
    rows[2] = replace(rows[2], no_preference=True, choice=None)
    before = told_answers(rows[:4])
    after = told_answers(rows, before)
    assert [t.key for t in after] == [t.key for t in told_answers(rows)]
    assert all(a is b for a, b in zip(after[:3], before, strict=True))
    # an answer of the prefix changed: from there on, read again
    again = list(rows)
    again[1] = replace(again[1], choice=1 - again[1].choice, answered_at=9.0)
    changed = told_answers(again, before)
    assert changed[0] is before[0] and changed[1] is not before[1]
    assert torch.equal(changed[1].winner, told_answers(again)[1].winner)


def test_an_answer_carries_its_questions_virtual_comparisons():
    rows = rows_of(2)
    virtual = [[[0.9, 0.5], [1.0, 0.5]], [[0.3, 0.9], [0.3, 1.0]]]
    rows[1] = replace(rows[1], virtual_comparisons=virtual)
    told = told_answers(rows)
    assert told[0].virtual is None
    assert torch.equal(told[1].virtual, torch.tensor(virtual, dtype=torch.float64))
    # the comparisons a model observes: the virtual ones first, as the loop
    # logs them, then the answer
    winners, losers = told[1].comparisons()
    X = torch.tensor(rows[1].options, dtype=torch.float64)
    c = rows[1].choice
    assert torch.equal(
        winners, torch.stack([told[1].virtual[0, 0], told[1].virtual[1, 0], X[c]])
    )
    assert torch.equal(
        losers, torch.stack([told[1].virtual[0, 1], told[1].virtual[1, 1], X[1 - c]])
    )
    w0, l0 = told[0].comparisons()
    assert w0.shape == l0.shape == (1, 2)
