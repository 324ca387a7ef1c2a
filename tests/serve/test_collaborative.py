import copy
import threading
from dataclasses import replace

import pytest
import torch

import prefbo.loop.study_collaborative as sc
from prefbo.loop.fitted import seeded
from prefbo.loop.people_questions import ask_people
from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.models.collaborative.questions import next_questions, pair_eubo
from prefbo.serve import collaborative_favourites as cf
from prefbo.serve import flow
from prefbo.serve.answered import told_answers
from prefbo.serve.collaborative import CollaborativeEngine
from prefbo.serve.rows import QuestionRow
from prefbo.serve.worker import collaborative_round

BOX = [
    {"name": "x", "type": "continuous", "lower": 0.0, "upper": 1.0},
    {"name": "y", "type": "continuous", "lower": 0.0, "upper": 1.0},
]


def utility(X, pid):
    # people share a peak near (0.7, 0.3), each shifted a little
    centre = torch.tensor([0.7, 0.3], dtype=torch.float64) + 0.05 * (pid % 3)
    return -((X - centre) ** 2).sum(-1)


def rows_of(pid, count, seed=0, start=0):
    r"""``count`` answered questions of ``pid`` (database rows), answered by
    their utility."""
    g = torch.Generator().manual_seed(1000 * seed + pid)
    out = []
    for seq in range(start, start + count):
        X = torch.rand(2, 2, generator=g, dtype=torch.float64)
        out.append(
            QuestionRow(
                id=f"{pid}-{seq}",
                participant_id=pid,
                seq=seq,
                options=X.tolist(),
                origin="model",
                based_on=seq,
                created_at=float(seq),
                shown_at=float(seq),
                answered_at=float(seq),
                choice=int(utility(X, pid).argmax()),
            )
        )
    return out


@pytest.fixture(autouse=True)
def refits_by_growth(monkeypatch):
    r"""Refits as the answers grow by a quarter from the first: the tests
    count fits."""
    monkeypatch.setattr(sc, "REFIT_EVERY_BELOW", 0)


@pytest.fixture
def config(make_config):
    return make_config(
        space=BOX, model={"kind": "collaborative", "initial_random": 4}, seed=3
    )


@pytest.fixture
def engine(config):
    e = CollaborativeEngine(config, background=False)
    for pid in range(6):
        e.update(pid, rows_of(pid, 5))
    e.maintain()
    return e


@pytest.fixture
def plain(make_config):
    r"""``engine`` without virtual comparisons at the faces: its questions
    are the batched step's pairs of candidates as they come."""
    config = make_config(
        space=BOX,
        model={"kind": "collaborative", "initial_random": 4, "boundary_step": False},
        seed=3,
    )
    e = CollaborativeEngine(config, background=False)
    for pid in range(6):
        e.update(pid, rows_of(pid, 5))
    e.maintain()
    return e


def steps(calls):
    return [c.get("steps") for c in calls]


@pytest.fixture
def fit_calls(monkeypatch):
    r"""The keyword arguments of every model fit from now on, in order."""
    calls = []
    real_fit = CollaborativePreferenceGP.fit

    def recording_fit(model, **kwargs):
        calls.append(kwargs)
        return real_fit(model, **kwargs)

    monkeypatch.setattr(CollaborativePreferenceGP, "fit", recording_fit)
    return calls


def test_before_the_first_fit_questions_come_from_the_prior(make_config):
    config = make_config(
        space=BOX,
        model={"kind": "collaborative", "initial_random": 4, "boundary_step": False},
        seed=3,
    )
    e = CollaborativeEngine(config, background=False)
    assert not e.fitted and e.model.num_people == 0
    assert float(e.model.shared.kl().detach()) == pytest.approx(0.0, abs=1e-12)
    asked = e.propose({0: None, 1: None})
    assert not torch.equal(asked[0], asked[1])  # each their own candidates
    for pid, pair in asked.items():
        X = e.candidates(e.own_seed(pid, None))
        with torch.no_grad():
            post = e.model.posterior(X)  # the prior: mean 0
            cov = post.mvn.covariance_matrix
        assert post.mean.abs().max() == 0
        # E[max(f_a, f_b)] of a zero mean is sd(f_a - f_b) / sqrt(2 pi)
        var = cov.diagonal()
        diff = (var[:, None] + var[None, :] - 2 * cov).clamp_min(0)
        i = (X.unsqueeze(0) == pair.unsqueeze(1)).all(-1).long().argmax(-1)
        assert float(diff[i[0], i[1]]) == pytest.approx(float(diff.triu(1).max()))
    # answers before the first fit move their participant's posterior at once
    e.update(0, rows_of(0, 3))
    e.maintain()
    assert not e.fitted and e.shared_state() is None
    assert e.model.answers.counts().tolist()[e.persons[0]] == 3
    assert e.favourites([0]) == {"population": None, "participants": {}}
    assert not torch.equal(e.model.latent_mean[e.persons[0]], e.model.latent_mean[1])
    e.update(0, rows_of(0, 4))
    e.maintain()
    assert e.fits == [4] and e.model.answers.counts().tolist() == [4]


@pytest.mark.parametrize("strategy", ["random", "thompson", "eubo"])
def test_a_question_on_screen_is_not_asked_again_before_the_first_fit(
    make_config, strategy
):
    config = make_config(
        space=BOX, model={"kind": "collaborative", "strategy": strategy}, seed=3
    )
    e = CollaborativeEngine(config, background=False)
    first = e.propose({0: None})[0]
    # the next round, no answer in between: the next question, made while
    # the first is on screen, is another
    second = e.propose({0: first.tolist()})[0]
    assert not torch.equal(first, second)
    # "no preference" to the first (not told): the third, made while the
    # second is on screen, is neither
    row = rows_of(0, 1)[0]
    row = replace(row, options=first.tolist(), choice=None, no_preference=True)
    e.update(0, [row])
    assert e.answers == 0
    third = e.propose({0: second.tolist()})[0]
    assert not torch.equal(third, second) and not torch.equal(third, first)


def test_a_newcomers_first_question_is_the_populations_best_pair(plain):
    engine = plain
    seed = _round_seed(engine)
    pair = engine.propose({99: None})[99]
    assert engine.persons[99] == 6
    X = engine.candidates(seed)
    with torch.no_grad():
        post = engine.model.posterior(X)  # the population's
        table = pair_eubo(
            post.mean.reshape(1, -1), post.mvn.covariance_matrix.unsqueeze(0)
        )[0]
    i = (X.unsqueeze(0) == pair.unsqueeze(1)).all(-1).long().argmax(-1)
    assert float(table[i[0], i[1]]) == pytest.approx(float(table.triu(1).max()))


def test_questions_follow_each_persons_posterior(plain):
    engine = plain
    shown = {0: None, 3: None}
    questions = engine.propose(shown)
    seed = _round_seed(engine)
    X = engine.candidates(seed)
    pairs = next_questions(engine.model, torch.tensor([0, 3]), X, seed=seed)
    for b, pid in enumerate(shown):
        assert torch.equal(questions[pid], X[pairs[b]])


def test_the_next_question_believes_the_likelier_answer(plain):
    engine = plain
    options = rows_of(2, 1, seed=7)[0].options
    question = engine.propose({2: options})[2]
    # the same as a copy of the model that observed the believed answer
    copy_ = copy.deepcopy(engine.model)
    X = torch.tensor(options, dtype=torch.float64)
    with torch.no_grad():
        mean = copy_.posterior(X, person=2).mean.reshape(-1)
    win = int(mean.argmax())
    copy_.observe(2, X[win : win + 1], X[1 - win : 2 - win])
    seed = _round_seed(engine)
    cands = engine.candidates(seed)
    pair = next_questions(copy_, torch.tensor([2]), cands, seed=seed)[0]
    assert torch.equal(question, cands[pair])
    # and nothing was told to the engine's model
    assert int(engine.model.answers.counts()[2]) == 5


def test_an_undo_observes_the_answers_in_force_again(engine):
    rows = rows_of(1, 5)
    # the 4th redone: another answer, at another time
    redone = replace(rows_of(1, 1, seed=9, start=3)[0], answered_at=9.0)
    changed = [*rows[:3], redone]
    engine.update(1, changed)
    _assert_observed_afresh(engine, 1, changed)
    assert int(engine.model.answers.counts()[1]) == 4


def test_a_refit_is_due_as_the_answers_grow(engine, fit_calls):
    assert engine.fits == [30]
    for pid in range(6):
        engine.update(pid, rows_of(pid, 6))
    engine.maintain()
    assert engine.fits == [30]  # 36 < 38 = 1.25 x 30
    for pid in range(6):
        engine.update(pid, rows_of(pid, 8))
    engine.maintain()
    assert engine.fits == [30, 48]
    assert engine.model.answers.counts().tolist() == [8] * 6
    for pid in range(6):
        engine.update(pid, rows_of(pid, 10))
    engine.maintain()
    assert engine.fits == [30, 48, 60]
    # 32 lies in (30, 48], no power of 2 in (48, 60]
    assert [c.get("revive") for c in fit_calls] == [True, False]


def test_a_background_fit_gets_the_answers_told_meanwhile(config, monkeypatch):
    monkeypatch.setattr(sc, "REFIT_MIN_NEW", 20)  # no refit due at 9 answers
    e = CollaborativeEngine(config)
    release = threading.Event()
    build = e._build

    def slow_build(*args):
        release.wait(30)
        return build(*args)

    monkeypatch.setattr(e, "_build", slow_build)
    for pid in range(3):
        e.update(pid, rows_of(pid, 2))
    e.maintain()
    assert e.fitting and not e.fitted
    e.update(0, rows_of(0, 4))  # new answers
    e.update(1, rows_of(1, 1))  # an undo
    e.update(7, rows_of(7, 2))  # a newcomer
    release.set()
    e._job.result(timeout=60)
    e.maintain()
    assert e.fits == [6] and not e.fitting
    counts = e.model.answers.counts()
    assert {pid: int(counts[e.persons[pid]]) for pid in e.persons} == {
        0: 4,
        1: 1,
        2: 2,
        7: 2,
    }
    e.close()


def test_favourites_of_the_population_and_each_participant(engine):
    fav = engine.favourites([0, 1, 42])
    assert set(fav["participants"]) == {"0", "1"}
    best = fav["population"]["values"]
    assert abs(best["x"] - 0.75) < 0.25 and abs(best["y"] - 0.35) < 0.25
    assert [s["name"] for s in fav["slices"]] == ["x", "y"]
    mean, sd = cf.utility(engine.model, [None, 0], engine.candidates(0, 16))
    assert mean.shape == sd.shape == (2, 16) and bool((sd > 0).all())
    # a favourite is the told design of highest posterior mean
    shown = torch.tensor([r.options for r in rows_of(1, 5)]).reshape(-1, 2)
    got = fav["participants"]["1"]["values"]
    assert min(abs(got["x"] - a) + abs(got["y"] - b) for a, b in shown.tolist()) < 1e-6
    with torch.no_grad():
        means = engine.model.posterior(shown, person=engine.persons[1]).mean.reshape(-1)
    assert fav["participants"]["1"]["mean"] == pytest.approx(float(means.max()))


def test_a_worker_round_queues_model_questions(store, make_config):
    config = make_config(
        space=BOX, model={"kind": "collaborative", "initial_random": 3}
    )
    engine = CollaborativeEngine(config, background=False)
    pids = [store.add_participant(f"t{i}", f"p{i}") for i in range(3)]
    seen: dict = {}
    made, seen = collaborative_round(store, config, engine, seen)
    assert made == 3 and not engine.fitted  # the prior's first questions
    for pid in pids:
        q = flow.current(store, config, pid)
        flow.answer(store, config, pid, q["question_id"], 0)
    made, seen = collaborative_round(store, config, engine, seen)
    assert made == 3 and engine.fits == [3]
    assert {pid: p.answers for pid, p in seen.items()} == dict.fromkeys(pids, 1)
    # each participant's next question is the worker's
    for pid in pids:
        q = flow.current(store, config, pid)
        nxt = flow.answer(store, config, pid, q["question_id"], 1)
        row = store.questions_of(pid)[nxt["seq"]]
        assert row.origin == "model"
    made, seen = collaborative_round(store, config, engine, seen)
    assert made == 3 and engine.answers == 6


def _assert_observed_afresh(engine, pid, rows):
    r"""``pid``'s posterior in ``engine`` is that of a copy of its model told
    only ``rows`` (answered questions), one at a time."""
    fresh = copy.deepcopy(engine.model)
    fresh.forget(pid)
    for told in told_answers(rows):
        fresh.observe(pid, *told.comparisons())
    torch.testing.assert_close(
        engine.model.latent_mean[pid], fresh.latent_mean[pid], atol=1e-6, rtol=0
    )


def _round_seed(engine):
    from prefbo.loop.study_collaborative import fit_seed

    return fit_seed(engine.config.seed, engine.answers + 1)


def test_a_failed_fit_is_logged_and_tried_again_with_more_answers(
    config, monkeypatch, caplog
):
    e = CollaborativeEngine(config, background=False)
    build, calls = e._build, []

    def failing_once(*args):
        calls.append(args[1])
        if len(calls) == 1:
            raise RuntimeError("out of memory")
        return build(*args)

    monkeypatch.setattr(e, "_build", failing_once)
    for pid in range(2):
        e.update(pid, rows_of(pid, 2))
    e.maintain()
    assert not e.fitted and "fit of the collaborative model failed" in caplog.text
    e.maintain()
    assert calls == [4]  # not again at once
    e.update(0, rows_of(0, 3))
    e.maintain()
    assert calls == [4]  # nor at the next answer (FIT_RETRY_MIN_NEW)
    for pid in range(2):
        e.update(pid, rows_of(pid, 12))
    e.maintain()
    assert calls == [4, 24] and e.fits == [24]


def test_a_restored_engine_starts_from_the_saved_fit_without_fitting(
    engine, config, fit_calls
):
    state = engine.shared_state()
    assert state and all(k.startswith(("shared.", "likelihood.")) for k in state)
    fresh = CollaborativeEngine(config, background=False)
    fresh.restore(state)
    for pid in range(6):
        fresh.update(pid, rows_of(pid, 5))
    fresh.maintain()
    assert steps(fit_calls) == [0] and fresh.fits == [30]  # no gradient step
    for k, v in state.items():
        torch.testing.assert_close(fresh.model.state_dict()[k], v)
    # each person's posterior: the saved fit's, as the first engine has it
    torch.testing.assert_close(
        fresh.model.latent_mean, engine.model.latent_mean, atol=1e-5, rtol=0
    )
    # a state of another study's shape is refused, and a fit made instead
    other = CollaborativeEngine(config, background=False)
    other.restore({**state, "shared.mean": state["shared.mean"][:, :3]})
    for pid in range(6):
        other.update(pid, rows_of(pid, 5))
    other.maintain()
    assert steps(fit_calls)[-1] == 100 and other.model is not None


def test_a_worker_saves_its_fits_and_a_new_worker_resumes_from_them(store, make_config):
    from prefbo.serve.worker import Seat, _CollaborativeRounds, decode_state

    config = make_config(
        space=BOX, model={"kind": "collaborative", "initial_random": 3}
    )
    rounds = _CollaborativeRounds(Seat(store, config))
    rounds.engine.close()
    rounds.engine = CollaborativeEngine(config, background=False)
    for i in range(3):
        pid = store.add_participant(f"t{i}", f"p{i}")
        q = flow.current(store, config, pid)
        flow.answer(store, config, pid, q["question_id"], 0)
    rounds.round()
    saved = decode_state(store.model_state())
    for k, v in rounds.engine.shared_state().items():
        assert torch.equal(saved[k], v)
    again = _CollaborativeRounds(Seat(store, config))
    assert again.engine._saved is not None
    again.engine.close()


def test_a_question_answered_again_differently_is_observed_again(engine):
    # an undo and a new answer to the same question between two rounds:
    # the same question ids, but the answer in force changed
    rows = rows_of(1, 5)
    again = list(rows)
    again[-1] = replace(again[-1], choice=1 - again[-1].choice, answered_at=9.0)
    engine.update(1, again)
    _assert_observed_afresh(engine, 1, again)


def test_the_question_on_screen_is_not_asked_again(engine):
    # a newcomer shown the round's best pair is asked another pair next,
    # though nothing else changed
    first = engine.propose({77: None})[77]
    after = engine.propose({77: first.tolist()})[77]
    same = {tuple(x) for x in first.tolist()} == {tuple(x) for x in after.tolist()}
    assert not same


def test_the_batched_step_is_given_each_participants_answered_questions(
    engine, monkeypatch
):
    # the repeat rule's input: each participant's told questions as
    # [winner, loser] model points; a newcomer has none
    seen = []
    real = engine.questions.for_people

    def spy(*args, asked=None, **kwargs):
        seen.append(asked)
        return real(*args, asked=asked, **kwargs)

    monkeypatch.setattr(engine.questions, "for_people", spy)
    engine.propose({0: None, 3: None, 77: None})
    (asked,) = seen
    for pid, given in zip((0, 3), asked[:2], strict=True):
        told = engine.told[pid]
        assert given.shape == (5, 2, 2)
        for t, pair in zip(told, given, strict=True):
            assert torch.equal(pair, torch.stack([t.winner, t.loser]))
    assert asked[2] is None
    # a new answer is in the next step's
    engine.update(0, rows_of(0, 6))
    engine.propose({0: None})
    assert seen[-1][0].shape == (6, 2, 2)


def test_a_follower_never_fits_and_adopts_each_saved_fit(engine, config, fit_calls):
    follower = CollaborativeEngine(config, background=False, fitter=False)
    for pid in range(6):
        follower.update(pid, rows_of(pid, 5))
    follower.maintain()
    assert not follower.fitted  # no fit of its own, however many answers
    follower.restore(engine.shared_state())
    follower.maintain()
    assert steps(fit_calls) == [0] and follower.fits == [30]
    torch.testing.assert_close(
        follower.model.latent_mean, engine.model.latent_mean, atol=1e-5, rtol=0
    )
    # far past a refit's count: still no fit of its own, answers observed
    for pid in range(6):
        follower.update(pid, rows_of(pid, 12))
    follower.maintain()
    assert steps(fit_calls) == [0] and follower.fits == [30]
    assert follower.model.answers.counts().tolist() == [12] * 6
    # the fitter's next fit, adopted: the people's posteriors at its shared
    # part, as the fitter has them
    for pid in range(6):
        engine.update(pid, rows_of(pid, 12))
    engine.maintain()
    follower.restore(engine.shared_state())
    follower.maintain()
    assert steps(fit_calls) == [0, 100, 0] and follower.fits == [30, 72]
    for k, v in engine.shared_state().items():
        torch.testing.assert_close(follower.model.state_dict()[k], v)
    torch.testing.assert_close(
        follower.model.latent_mean, engine.model.latent_mean, atol=1e-5, rtol=0
    )


def test_worker_one_adopts_the_fits_worker_zero_saves(store, make_config):
    from prefbo.serve.worker import Seat, _CollaborativeRounds

    config = make_config(
        space=BOX, model={"kind": "collaborative", "initial_random": 3}
    )
    leader = _CollaborativeRounds(Seat(store, config, index=0))
    follower = _CollaborativeRounds(Seat(store, config, index=1))
    for rounds in (leader, follower):
        rounds.engine.close()
    leader.engine = CollaborativeEngine(config, background=False)
    follower.engine = CollaborativeEngine(config, background=False, fitter=False)
    pids = [store.add_participant(f"t{i}", f"p{i}") for i in range(3)]
    for pid in pids:
        q = flow.current(store, config, pid)
        flow.answer(store, config, pid, q["question_id"], 0)
    follower.round()
    assert not follower.engine.fitted  # nothing saved yet, nothing fitted
    leader.round()
    assert leader.engine.fits == [3] and store.model_state_tag() is not None
    follower.round()
    assert follower.engine.fits == [3]
    for k, v in leader.engine.shared_state().items():
        assert torch.equal(follower.engine.model.state_dict()[k], v)
    follower.round()  # the same saved fit is not adopted twice
    assert follower.engine.fits == [3]


def test_favourites_are_each_persons_best_told_design_by_the_posterior(engine):
    # against the model's BoTorch posterior, one person at a time
    pids = list(range(6))
    fav = engine.favourites(pids)
    everyone = []
    for pid in pids:
        X = cf.told_designs(engine.told[pid])
        everyone.append(X)
        with torch.no_grad():
            post = engine.model.posterior(X.unsqueeze(-2), person=engine.persons[pid])
        mean, sd = post.mean.reshape(-1), post.variance.reshape(-1).sqrt()
        i = int(mean.argmax())
        got = fav["participants"][str(pid)]
        assert got["mean"] == pytest.approx(float(mean[i]), abs=1e-9)
        assert got["sd"] == pytest.approx(float(sd[i]), abs=1e-9)
        assert got["values"] == engine.config.space.decode(X[i : i + 1])[0]
    X = torch.cat(everyone)
    with torch.no_grad():
        post = engine.model.posterior(X.unsqueeze(-2))  # the population's
    i = int(post.mean.reshape(-1).argmax())
    assert fav["population"]["mean"] == pytest.approx(float(post.mean.max()), abs=1e-9)
    assert fav["population"]["values"] == engine.config.space.decode(X[i : i + 1])[0]


@pytest.fixture
def lone(config):
    r"""An engine whose one participant has answered 6 questions."""
    e = CollaborativeEngine(config, background=False)
    e.update(0, rows_of(0, 6))
    e.maintain()
    return e


def test_an_answers_virtual_comparisons_are_observed_and_fitted(config, lone):
    virtual = [[[0.9, 0.5], [1.0, 0.5]]]
    rows = rows_of(0, 7)
    rows[6] = replace(rows[6], virtual_comparisons=virtual)
    lone.update(0, rows)
    assert int(lone.model.answers.counts()[0]) == 6 + 2
    _assert_observed_afresh(lone, 0, rows)
    built = CollaborativeEngine(config, background=False)
    built.update(0, rows)
    built.maintain()
    assert built.model.answers.counts().tolist() == [8]


def test_a_participant_alone_is_asked_as_the_loop_asks(lone, monkeypatch):
    # cross-check: ask_person on a copy of the model told the comparisons
    # the question on screen carries and the answer to it the model finds
    # likelier, refitted as the next answer refits the model
    from prefbo.loop.person_question import ask_person

    monkeypatch.setattr(sc, "REFIT_EVERY_BELOW", 64)  # a refit at every answer
    shown = rows_of(0, 1, seed=7, start=6)[0].options
    carried = [[[0.9, 0.5], [1.0, 0.5]]]
    mean = lone.model.latent_mean.clone()
    question = lone.propose({0: shown}, {0: carried})[0]
    virtual = lone.carried[0]
    assert torch.equal(lone.model.latent_mean, mean)  # nothing told
    twin = copy.deepcopy(lone.model)
    X = torch.tensor(shown, dtype=torch.float64)
    with torch.no_grad():
        win = int(twin.posterior(X, person=0).mean.reshape(-1).argmax())
    V = torch.tensor(carried, dtype=torch.float64)
    twin.observe(
        0,
        torch.cat([V[:, 0], X[win : win + 1]]),
        torch.cat([V[:, 1], X[1 - win : 2 - win]]),
    )
    s = sc.fit_seed(lone.config.seed, 7)
    with seeded(s), torch.enable_grad():
        twin.fit(steps=sc.REFIT_STEPS, seed=s, revive=False)  # no power of 2 in (6, 7]
    asked = [torch.stack([t.winner, t.loser]) for t in lone.told[0]] + [X]
    want, want_virtual, _ = ask_person(
        lone.questions, twin, 0, asked, _round_seed(lone), lambda: X[0]
    )
    torch.testing.assert_close(question, want, atol=1e-6, rtol=0)
    assert virtual is not None
    torch.testing.assert_close(virtual, want_virtual, atol=1e-6, rtol=0)


def test_once_another_has_answered_the_batched_step_asks_everyone(lone):
    lone.update(1, rows_of(1, 1))
    questions = lone.propose({0: None, 1: None})
    seed = _round_seed(lone)
    maker = lone.questions
    X = lone.candidates(seed)
    asked = ask_people(
        lone.model,
        torch.tensor([0, 1]),
        X,
        [None, None],
        seed=seed,
        box=maker.box,
        step=maker.inset,
    )
    for b, pid in enumerate([0, 1]):
        assert torch.equal(questions[pid], asked.questions[b])
        if asked.virtual[b] is None:
            assert pid not in lone.carried
        else:
            assert torch.equal(lone.carried[pid], asked.virtual[b])


@pytest.mark.parametrize("newcomer", [False, True], ids=["alone", "batched"])
def test_a_question_is_stored_with_its_comparisons(store, make_config, newcomer):
    r"""A lone participant's question (the loop's) and a newcomer's first
    one (the batched step's, at the population's broad posterior, which
    proposes faces) are stored with the virtual comparisons they carry, and
    those are told with the answer."""
    config = make_config(
        space=BOX,
        model={"kind": "collaborative", "initial_random": 3},
        answers_per_participant=10,
    )
    engine = CollaborativeEngine(config, background=False)
    pid = store.add_participant("t0", "p0")
    q = flow.current(store, config, pid)
    for choice in (0, 1, 0):
        q = flow.answer(store, config, pid, q["question_id"], choice)
    if newcomer:
        pid = store.add_participant("t1", "p1")
        flow.current(store, config, pid)  # uniform, until the round below
    seen: dict = {}
    made, seen = collaborative_round(store, config, engine, seen)
    assert made == 1 + newcomer and pid in engine.carried
    row = store.questions_of(pid)[-1]
    assert row.origin == "model" and row.virtual_comparisons is not None
    V = torch.tensor(row.virtual_comparisons, dtype=torch.float64)
    assert torch.equal(V, engine.carried[pid])
    # answered, its comparisons are told to the engine with the answer
    q = flow.current(store, config, pid)  # the uniform one it was made behind
    nxt = flow.answer(store, config, pid, q["question_id"], 0)
    assert nxt["question_id"] == row.id
    flow.answer(store, config, pid, row.id, 0)
    collaborative_round(store, config, engine, seen)
    assert torch.equal(engine.told[pid][-1].virtual, V)
    told = 2 if newcomer else 5
    assert int(engine.model.answers.counts()[engine.persons[pid]]) == told + len(V)
