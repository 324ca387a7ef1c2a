from dataclasses import replace

import torch

from prefbo.loop import PreferentialOptimizer
from prefbo.serve.engine import QuestionEngine
from prefbo.serve.rows import QuestionRow


def _row(pid, k, X, virtual=None):
    r"""``pid``'s answered question ``k``: the sweeter option of ``X`` wins."""
    return QuestionRow(
        id=f"{pid}-{k}",
        participant_id=pid,
        seq=k,
        options=X.tolist(),
        origin="model",
        based_on=k,
        created_at=float(k),
        shown_at=float(k),
        answered_at=float(k),
        choice=int(X[:, 0].argmax()),
        virtual_comparisons=None if virtual is None else virtual.tolist(),
    )


def _answers(config, pid, n, seed=0):
    r"""``n`` answered questions of ``pid`` with uniform options."""
    g = torch.Generator().manual_seed(seed)
    return [
        _row(
            pid,
            k,
            config.space.snap(torch.rand(config.q, config.space.dim, generator=g)),
        )
        for k in range(n)
    ]


def test_the_next_question_is_not_the_one_being_looked_at(make_config):
    # the next question is made before the current one is answered: the
    # engine believes the likelier answer, so the two differ
    config = make_config()
    answered = _answers(config, 1, 6) + _answers(config, 2, 3, seed=1)
    engine = QuestionEngine(config, answered)
    now = engine.propose({2: None})[2]
    assert now.shape == (2, config.space.dim)
    after = engine.propose({2: now.tolist()})[2]
    assert not torch.allclose(after, now) and not torch.allclose(after, now.flip(0))


def test_no_preference_answers_are_not_told(make_config):
    config = make_config()
    rows = _answers(config, 1, 3)
    rows[1] = replace(rows[1], no_preference=True, choice=None)
    assert len(QuestionEngine(config, rows).answered) == 2


def test_favourites_and_slices_of_a_population(make_config):
    config = make_config()
    answered = _answers(config, 1, 8) + _answers(config, 2, 8, seed=1)
    fav = QuestionEngine(config, answered).favourites([1, 2, 3])
    assert fav["population"]["values"]["sweetness"] > 5.0
    assert fav["population"]["sd"] >= 0
    assert set(fav["participants"]) == {"1", "2", "3"}  # 3: a newcomer
    sweet, size = fav["slices"]
    assert sweet["name"] == "sweetness" and not sweet["discrete"]
    assert len(sweet["mean"]) == 21 and sweet["mean"][-1] > sweet["mean"][0]
    assert size["labels"] == [1, 2, 3, 4, 5] and size["discrete"]


def test_individual_models_ask_q_options_each(make_config):
    config = make_config(q=3, model={"kind": "individual", "strategy": "random"})
    answered = _answers(config, 1, 4)
    engine = QuestionEngine(config, answered)
    out = engine.propose({1: None, 2: None})
    assert out[1].shape == out[2].shape == (3, config.space.dim)
    fav = engine.favourites([1, 2])
    assert fav["population"] is None and set(fav["participants"]) == {"1"}
    assert QuestionEngine(config, []).favourites([1])["participants"] == {}


def test_an_individual_participant_is_asked_what_the_library_loop_asks(make_config):
    # the engine rebuilds the participant's optimiser from the stored answers
    # and the virtual comparisons their questions carried: the questions are
    # those of one PreferentialOptimizer asked and told in a loop
    config = make_config(model={"kind": "individual"})
    pid, rows, made = 3, [], 0
    loop = PreferentialOptimizer(
        config.space,
        model=config.inference,
        strategy=config.strategy,
        q=config.q,
        seed=config.seed * 100_003 + pid,
        initial_random=config.initial_random,
        boundary_step=config.boundary_step,
    )
    for k in range(8):
        engine = QuestionEngine(config, rows)
        X = engine.propose({pid: None})[pid]
        carried = engine.carried[pid]
        torch.testing.assert_close(X, loop.ask(), atol=0, rtol=0)
        same = loop.pending_virtual
        assert (carried is None) == (same is None)
        made += carried is not None
        rows.append(_row(pid, k, X, carried))
        loop.tell(rows[-1].choice)
    assert made > 0  # some questions had options on the sweetness faces
    # the question made while one is on screen tells its believed answer with
    # the comparisons that question carries: the loop's next question when
    # the believed answer is the real one
    shown = max(range(8), key=lambda k: rows[k].virtual_comparisons is not None)
    shown_virtual = {pid: rows[shown].virtual_comparisons}
    after = QuestionEngine(config, rows[:shown]).propose(
        {pid: rows[shown].options}, shown_virtual
    )[pid]
    mean, _ = (
        QuestionEngine(config, rows[:shown])
        ._individual(pid)
        .predict(torch.tensor(rows[shown].options, dtype=torch.float64))
    )
    believed = replace(rows[shown], choice=int(mean.argmax()))
    stored = QuestionEngine(config, [*rows[:shown], believed])
    torch.testing.assert_close(after, stored.propose({pid: None})[pid], atol=0, rtol=0)


def test_kept_optimisers_ask_what_rebuilt_ones_ask(make_config):
    # a worker keeps each individual participant's optimiser between rounds
    # (one new fit per answer instead of the whole chain); questions,
    # carried comparisons, believed answers and favourites are those of
    # optimisers rebuilt from the store, also after an undo
    config = make_config(model={"kind": "individual"})
    kept, rows, first = {}, [], None
    for k in range(5):
        fresh = QuestionEngine(config, rows)
        again = QuestionEngine(config, rows, optimizers=kept)
        for engine in (fresh, again):
            engine.question = engine.propose({1: None})[1]
        torch.testing.assert_close(again.question, fresh.question, atol=0, rtol=0)
        assert (again.carried[1] is None) == (fresh.carried[1] is None)
        rows.append(_row(1, k, fresh.question, fresh.carried[1]))
        shown = {1: rows[-1].options}, {1: rows[-1].virtual_comparisons}
        believing = QuestionEngine(config, rows[:-1], optimizers=kept).propose(*shown)
        expected = QuestionEngine(config, rows[:-1]).propose(*shown)
        torch.testing.assert_close(believing[1], expected[1], atol=0, rtol=0)
        first = first or kept[1]
    assert kept[1] is first  # kept all along, told one answer a round
    assert len(first.history) == 4  # the believed answer was taken back
    undone = rows[:2]  # the participant undid answers: rebuilt, not extended
    a = QuestionEngine(config, undone, optimizers=kept).propose({1: None})[1]
    assert kept[1] is not first
    b = QuestionEngine(config, undone).propose({1: None})[1]
    torch.testing.assert_close(a, b, atol=0, rtol=0)
    fav = QuestionEngine(config, rows, optimizers=kept).favourites([1])
    assert fav == QuestionEngine(config, rows).favourites([1])
