import pytest

from prefbo.serve import flow
from prefbo.serve.answered import AnsweredRows
from prefbo.serve.config import study_from_dict


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
