import random
import threading

import pytest
from sqlalchemy import text

from prefbo.serve import flow
from prefbo.serve.rows import QuestionRow
from prefbo.serve.steps import ParticipantSteps, Raced


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


def _recount(store):
    # the progress from the questions themselves, by plain SQL
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT participant_id, count(answered_at) FROM questions "
                "GROUP BY participant_id"
            )
        ).all()
    return {int(pid): int(n) for pid, n in rows if n}


def test_the_progress_counts_the_answers_held_through_answers_and_undos(
    store, make_config
):
    # random answers, undos, repeated undos and replacements by two people:
    # the progress kept on their rows always equals a recount of the answers
    config = make_config(answers_per_participant=6)
    pids = [store.add_participant(f"t{i}", f"p{i}") for i in range(2)]
    rng = random.Random(3)
    for _ in range(40):
        pid = rng.choice(pids)
        question = flow.current(store, config, pid)
        move = rng.random()
        if question.get("done") or (move < 0.3 and question.get("previous_id")):
            flow.undo(store, config, pid, question["previous_id"])
            if rng.random() < 0.5:  # a double click: withdraws nothing more
                flow.undo(store, config, pid, question["previous_id"])
        elif move < 0.4:
            flow.replace(store, config, pid, question["question_id"], "odd")
        else:
            flow.answer(store, config, pid, question["question_id"], rng.randrange(2))
        progress = store.answer_progress()
        held = {pid: p.answers for pid, p in progress.items() if p.answers}
        assert held == _recount(store)
        assert store.count_answers() == sum(held.values())
        assert {p.id: p.answers for p in store.participants()} == {
            pid: held.get(pid, 0) for pid in pids
        }


def test_a_step_reads_a_window_and_checks_the_answer_count_it_read(store, make_config):
    config = make_config(answers_per_participant=6)
    pid, ids = _answered(store, config, 4)
    current = flow.current(store, config, pid)
    with store.participant(pid) as steps:
        window = steps.window()
        assert window.answers == 4
        # questions a - 2 .. a + 1 only (a + 1: the worker's, none here)
        assert [r.seq for r in window.rows] == [2, 3, 4]
        assert window.at(4).id == current["question_id"] and window.at(1) is None
        assert steps.question(ids[0]).seq == 0 and steps.question("nope") is None
    # a count that is no longer the participant's: a race, rolled back whole
    with pytest.raises(Raced, match="answers changed from 3"):
        with store.participant(pid) as steps:
            steps.record_answer(current["question_id"], 1, 9.0, answers=3)
    rows = store.questions_of(pid)
    assert sum(r.answered for r in rows) == 4 == store.answer_progress()[pid].answers
    assert not any(r.answered_at == 9.0 for r in rows)


def _answered(store, config, answers):
    # a participant who answered ``answers`` questions; their ids
    pid = store.add_participant("t", "Ann")
    ids = []
    for _ in range(answers):
        q = flow.current(store, config, pid)["question_id"]
        ids.append(q)
        flow.answer(store, config, pid, q, 0)
    return pid, ids


def _two_tabs(store, config, pid, method, second):
    # while the first tab's step is at ``method`` (its row claimed), a second
    # tab's step starts; it waits until the first commits
    original = getattr(ParticipantSteps, method)
    out = {}

    def run():
        try:
            out["second"] = second()
        except Exception as e:  # what the second tab gets
            out["second"] = e

    tab = threading.Thread(target=run)

    def patched(self, *args, **kwargs):
        if not tab.is_alive() and "second" not in out:
            tab.start()
            tab.join(0.3)
            out["waited"] = tab.is_alive()
        return original(self, *args, **kwargs)

    return patched, tab, out


@pytest.mark.parametrize("first", ["replace", "undo"])
def test_two_tabs_steps_run_one_after_the_other(store, make_config, monkeypatch, first):
    # tab 1 replaces the current question (or undoes the latest answer) while
    # tab 2 answers the current question: tab 2 waits, then finds its
    # question replaced (404) or no longer current (409); nothing is lost or
    # counted twice, and no database error reaches a participant
    config = make_config(answers_per_participant=6)
    pid, ids = _answered(store, config, 2)
    q = flow.current(store, config, pid)["question_id"]
    method = "drop_from" if first == "replace" else "hide"
    patched, tab, out = _two_tabs(
        store, config, pid, method, lambda: flow.answer(store, config, pid, q, 1)
    )
    monkeypatch.setattr(ParticipantSteps, method, patched)
    if first == "replace":
        shown = flow.replace(store, config, pid, q, "cannot render")
    else:
        shown = flow.undo(store, config, pid, ids[-1])
    tab.join(60)
    assert out["waited"]  # the second step waited for the first's commit
    expected = flow.NotFound if first == "replace" else flow.Conflict
    assert isinstance(out["second"], expected), out["second"]
    answers = 2 if first == "replace" else 1
    assert _recount(store).get(pid, 0) == answers == store.count_answers()
    assert shown["seq"] == answers
    assert flow.current(store, config, pid)["question_id"] == shown["question_id"]
