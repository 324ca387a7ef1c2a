import pytest

from prefbo.serve import flow
from prefbo.serve.rows import QuestionRow
from prefbo.serve.steps import Raced


def test_a_step_writes_conditionally_and_commits_together(store, make_config):
    config = make_config()
    pid = store.add_participant("t", "Ann")
    q = flow.current(store, config, pid)["question_id"]
    with store.participant(pid) as steps:
        assert steps.record_answer(q, 1, at=5.0)
        assert not steps.record_answer(q, 0, at=6.0)  # answered already
        steps.log(q, "answer", {"choice": 1}, at=5.0)
    [row] = store.questions_of(pid)
    assert (row.answered_at, row.choice, row.no_preference) == (5.0, 1, False)
    with store.participant(pid) as steps:
        assert steps.withdraw(q) and not steps.withdraw(q)
        assert steps.count_events("answer") == 1 and steps.count_events("undo") == 0
    assert not store.questions_of(pid)[0].answered


def test_an_error_in_a_step_rolls_all_of_it_back(store, make_config):
    config = make_config()
    pid = store.add_participant("t", "Ann")
    q = flow.current(store, config, pid)["question_id"]
    with pytest.raises(RuntimeError, match="midway"), store.participant(pid) as steps:
        steps.record_answer(q, 0, at=5.0)
        steps.set_finished(5.0)
        raise RuntimeError("midway")
    assert not store.questions_of(pid)[0].answered
    assert store.participants()[0].finished_at is None


def test_a_row_stored_first_elsewhere_is_a_race(store, make_config):
    config = make_config()
    pid = store.add_participant("t", "Ann")
    flow.current(store, config, pid)
    taken = QuestionRow("other", pid, 0, [[0.1, 1], [0.2, 2]], "model", 0, 1.0)
    with pytest.raises(Raced, match=f"participant {pid}'s step"):
        with store.participant(pid) as steps:
            steps.add_question(taken)  # seq 0 is there already
    assert [r.id for r in store.questions_of(pid)] != ["other"]
