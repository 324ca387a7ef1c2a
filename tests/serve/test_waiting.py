import pytest

from prefbo.serve import flow
from prefbo.serve.rows import MadeQuestion, Needing


def _join(store, name="p"):
    return store.add_participant(f"token-{name}", name)


def test_a_worker_question_is_shown_next_and_never_twice(store, make_config):
    config = make_config()
    most = config.answers_per_participant
    pid = _join(store)
    assert store.needing_questions(most) == {
        pid: Needing(seq=0, shown=None, answers=0, shown_at=float("inf"))
    }
    # the question carries one virtual comparison at a face to its answer
    carried = [[[0.1, 0.2], [0.0, 0.2]]]
    first = MadeQuestion(pid, 0, [[0.0, 0.2], [0.9, 0.8]], 0, carried)
    assert store.queue_question(first)
    assert not store.queue_question(MadeQuestion(pid, 0, [[0.3, 0.2], [0.9, 0.8]], 0))
    assert store.needing_questions(most) == {}  # one waits, unshown
    q0 = flow.current(store, config, pid)
    assert q0["options"][0]["sweetness"] == pytest.approx(0.0)
    needing = store.needing_questions(most)[pid]
    assert (needing.seq, needing.answers) == (1, 0)
    assert needing.shown == [[0.0, 0.2], [0.9, 0.8]]
    assert needing.shown_at == store.questions_of(pid)[0].shown_at
    assert needing.shown_virtual == carried
    assert store.needing_questions(most, only=[pid + 1]) == {}
    # the last question is not asked for: seq 1 is past a study of one answer
    assert store.needing_questions(1) == {}
    store.queue_question(MadeQuestion(pid, 1, [[0.5, 0.0], [0.6, 1.0]], 0))
    q1 = flow.answer(store, config, pid, q0["question_id"], 0)
    assert q1["options"][0]["sweetness"] == pytest.approx(5.0)
    rows = store.questions_of(pid)
    assert [r.origin for r in rows] == ["model", "model"]
    assert [r.virtual_comparisons for r in rows] == [carried, None]


def test_a_rounds_questions_are_stored_in_one_go_where_still_wanted(store, make_config):
    config = make_config()
    a, b, c = (_join(store, n) for n in "abc")
    qa = flow.current(store, config, a)  # a looks at question 0
    flow.current(store, config, b)
    X = [[0.1, 0.2], [0.9, 0.8]]
    made = [
        MadeQuestion(a, 1, X, 0),  # still wanted
        MadeQuestion(b, 1, X, 1),  # made at 1 answer, but b has none: stale
        MadeQuestion(c, 0, X, 0),  # a newcomer's first
        MadeQuestion(a, 1, X, 0),  # the same seq twice: stored once
    ]
    assert store.queue_questions(made) == 2
    assert [r.origin for r in store.questions_of(a)] == ["random", "model"]
    assert [r.seq for r in store.questions_of(b)] == [0]
    assert [r.origin for r in store.questions_of(c)] == ["model"]
    assert store.queue_questions([]) == 0
    # the stored question is what a's answer shows next
    nxt = flow.answer(store, config, a, qa["question_id"], 0)
    assert nxt["options"][0]["sweetness"] == pytest.approx(1.0)


def test_only_the_lease_holder_stores_a_question(store, make_config):
    a, b = _join(store, "a"), _join(store, "b")
    X = [[0.1, 0.2], [0.9, 0.8]]
    assert store.claim_leases("w1", [a], 5.0) == {a}
    assert store.claim_leases("w2", [a, b], 5.0) == {b}  # a is w1's
    # w2 stores nothing for a, and w1 nothing for b, one by one or in a round
    assert not store.queue_question(MadeQuestion(a, 0, X, 0), "w2", 5.0)
    assert store.queue_questions([MadeQuestion(b, 0, X, 0)], "w1", 5.0) == 0
    assert store.questions_of(a) == store.questions_of(b) == []
    assert store.queue_questions([MadeQuestion(a, 0, X, 0)], "w1", 5.0) == 1
    assert store.queue_question(MadeQuestion(b, 0, X, 0), "w2", 5.0)
    assert [len(store.questions_of(p)) for p in (a, b)] == [1, 1]
    # without a holder named (one process), no lease is asked for
    assert store.queue_question(MadeQuestion(a, 1, X, 0))
