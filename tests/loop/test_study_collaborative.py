import json

import pytest
import torch

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.loop import study_collaborative as sc
from prefbo.loop.boundary import DEFAULT_STEP
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.repeats import RepeatRule
from prefbo.loop.study import PopulationStudy
from prefbo.models.collaborative import (
    CollaborativePreferenceGP,
    PersonModel,
    ep_people,
)

SMALL = {"num_restarts": 2, "raw_samples": 32, "maxiter": 20}
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
PEAK = torch.tensor([0.7, 0.3], dtype=torch.float64)
#: Few gradient steps, refits by growth alone and every question from the
#: batched step: the tests check the study's bookkeeping, not the fits.
FEW = {
    "FIT_STEPS": 30,
    "REFIT_STEPS": 10,
    "REFIT_EVERY_BELOW": 0,
    "ASK_ONE_STRATEGIES": (),
}
#: The study's own steps, for the tests of what its fits find.
OWN = {k: getattr(sc, k) for k in FEW}


def _people(n, seed=0):
    r"""``n`` planted people: a shared peak plus a taste of their own (a
    linear tilt), ``{name: utility of ... x d designs}``."""
    g = torch.Generator().manual_seed(seed)
    tilts = torch.randn(n, 2, generator=g, dtype=torch.float64)
    return {
        f"p{i}": (lambda X, t=t: -4 * ((X - PEAK) ** 2).sum(-1) + X @ t)
        for i, t in enumerate(tilts)
    }


def _round(study, people):
    for name, u in people.items():
        X = study.ask(name)
        study.tell(name, int(u(X).argmax()))


def _spy(patch):
    r"""Record the people of every model-based question the study asks."""
    calls = []
    real = QuestionMaker.for_people

    def spy(self, model, people, shown=None, seed=0, shown_virtual=None, asked=None):
        calls.append(people.tolist())
        return real(self, model, people, shown, seed, shown_virtual, asked)

    patch.setattr(QuestionMaker, "for_people", spy)
    return calls


@pytest.fixture(autouse=True)
def few_steps(monkeypatch):
    for k, v in FEW.items():
        monkeypatch.setattr(sc, k, v)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    r"""8 planted people, 8 rounds; the first round uniform (initial_random=8)
    and refits at the ends of rounds 3, 5 and 7 (REFIT_MIN_NEW=16)."""
    with pytest.MonkeyPatch.context() as patch:
        for k, v in FEW.items():
            patch.setattr(sc, k, v)
        patch.setattr(sc, "REFIT_MIN_NEW", 16)
        calls = _spy(patch)
        log_dir = tmp_path_factory.mktemp("collab")
        study = PopulationStudy(
            BOUNDS,
            log_dir=log_dir,
            model="collaborative",
            seed=3,
            initial_random=8,
            acqf_options=SMALL,
        )
        people = _people(8)
        for _ in range(8):
            _round(study, people)
        asked = len(calls)
        model = study.model
        first = study.ask("dee")  # a newcomer after the fits
        newcomer_calls = calls[asked:]
    study.close()
    return study, people, log_dir, asked, model, first, newcomer_calls


def test_questions_after_initial_random_come_from_the_model(ran):
    study, _, log_dir, asked, model, _, _ = ran
    assert isinstance(model, CollaborativePreferenceGP)
    # built at 8 answers, refitted at max(ceil(1.25 a), a + 16): 24, 40, 56
    assert study.collaborative.fits == [8, 24, 40, 56]
    assert study.collaborative.online_updates == 64 - 8
    assert asked == 64 - 8 and study.random_fallbacks == 0
    assert json.loads((log_dir / "study.json").read_text())["model"] == "collaborative"


def test_a_newcomer_s_first_question_comes_from_the_population(ran):
    study, _, _, _, model, first, calls = ran
    assert study.participants[-1] == "dee" and model.num_people == 9
    assert calls == [[8]]  # one model-based question, for person 8: added
    X = torch.rand(5, 2, 2, dtype=torch.float64)
    a, b = model.posterior(X, person=8), model.posterior(X, person=None)
    torch.testing.assert_close(a.mean, b.mean)
    torch.testing.assert_close(a.variance, b.variance)
    # EUBO at the population's posterior sets a design it rates highly
    # against one to explore: the better of the two lies above 95 % of
    # uniform designs by the population's mean (a uniform pair: ~0.1)
    U = torch.rand(4096, 1, 2, generator=torch.Generator().manual_seed(0)).double()
    with torch.no_grad():
        rated = model.posterior(U, person=None).mean.reshape(-1)
        mine = model.posterior(first.unsqueeze(-2), person=None).mean.reshape(-1)
    assert float((rated < mine.max()).double().mean()) > 0.95


def test_the_recommendations_beat_random_designs(ran):
    study, people, _, _, _, _, _ = ran
    U = torch.rand(4096, 2, generator=torch.Generator().manual_seed(0)).double()
    got = torch.tensor([float(u(study.best(n)[0])) for n, u in people.items()])
    chance = torch.stack([u(U).mean() for u in people.values()])
    assert got.mean() > chance.mean() + 0.3


def test_best_and_views_read_the_collaborative_posterior(ran):
    study, _, _, _, model, _, _ = ran
    x, mean, sd = study.best()
    told = torch.cat(
        [
            torch.stack(list(t.options))
            for n in study.participants
            for t in study.history(n)
        ]
    )
    with torch.no_grad():
        post = model.posterior(told.unsqueeze(-2), person=None)
    i = int(post.mean.reshape(-1).argmax())
    torch.testing.assert_close(x, told[i])
    assert mean == pytest.approx(float(post.mean.reshape(-1)[i])) and sd > 0
    x_zed, mean_zed, _ = study.best("zed")  # never seen: the population's
    assert torch.equal(x_zed, x) and mean_zed == pytest.approx(mean)
    view = study.participant_model("p1")
    assert isinstance(view, PersonModel) and view.person == 1
    X = torch.rand(4, 1, 2, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(
            view.posterior(X).mean, model.posterior(X, person=1).mean
        )


def test_a_view_scores_repeats_under_the_model_s_likelihood(ran):
    study, _, _, _, model, _, _ = ran
    asked = [t.options for t in study.history("p2")]
    rule = RepeatRule(study.participant_model("p2"), asked)  # BALD needs it
    info = rule.information(torch.stack(asked[:2]))
    assert info.shape == (2,) and bool((info > 0).all())
    assert study.participant_model("p2").likelihood is model.likelihood


def test_the_exact_model_s_methods_are_refused(ran):
    study = ran[0]
    for method, args in (
        ("hyperparameters", ()),
        ("fix_hyperparameters", (None,)),
        ("disagreement", ()),
    ):
        with pytest.raises(
            UnsupportedError,
            match=rf"{method}\(\) needs the exact population model's kernel .* "
            r"model='collaborative' does not have; use model='ep' or 'laplace'\.",
        ):
            getattr(study, method)(*args)


def _small(**kwargs):
    return PopulationStudy(
        BOUNDS,
        model="collaborative",
        seed=1,
        initial_random=3,
        acqf_options=SMALL,
        **kwargs,
    )


def test_a_tell_updates_only_the_teller_online(monkeypatch):
    monkeypatch.setattr(sc, "REFIT_MIN_NEW", 6)  # fits at 3, then 9
    calls = _spy(monkeypatch)
    study, people = _small(), _people(3)
    for _ in range(2):
        _round(study, people)
    model = study.model
    pending = {n: study.ask(n) for n in people}
    study.tell("p0", int(people["p0"](pending["p0"]).argmax()))  # 7 answers
    n = len(calls)
    for name in ("p1", "p2"):  # still pending, not asked again
        assert torch.equal(study.ask(name), pending[name])
    assert len(calls) == n
    study.ask("p0")
    assert len(calls) == n + 1 and calls[-1] == [0]
    # the online path: the same model, and p0's posterior is the EP
    # posterior (the probit's default) of all their answers at the shared
    # part's means
    assert study.model is model and study.collaborative.fits == [3]
    ids = torch.tensor([0])
    batch = model.answers.gather(ids)
    delta, offset = model.answer_rows(batch.winners, batch.losers)
    post = ep_people(model.likelihood, delta, offset, batch.mask, model.prior_mean(ids))
    carried = [t.virtual for t in study.history("p0") if t.virtual is not None]
    assert int(batch.mask.sum()) == 3 + sum(len(v) for v in carried)
    torch.testing.assert_close(model.latent_mean[ids], post.mean)
    torch.testing.assert_close(model.latent_precision_chol[ids], post.precision_chol)
    # the answer that reaches 9 refits the shared part (warm: the same
    # object) and drops every pending question
    study.tell("p1", int(people["p1"](pending["p1"]).argmax()))
    study.ask("p0")
    n = len(calls)
    study.tell("p2", int(people["p2"](pending["p2"]).argmax()))
    assert study.collaborative.fits == [3, 9] and study.model is model
    study.ask("p0"), study.ask("p1")
    assert len(calls) == n + 2


def test_questions_follow_the_global_order_of_answers(monkeypatch):
    monkeypatch.setattr(sc, "REFIT_MIN_NEW", 3)  # fits at 3, then 6
    a, b = _small(), _small()

    def both(name, answer):  # the same answer in both; their questions agree
        X = a.ask(name)
        assert torch.equal(b.ask(name), X)
        a.tell(name, answer), b.tell(name, answer)

    a.tell("p0", 0, a.ask("p0"))
    a.best()  # a model fitted for the read, dropped at the next answer
    assert a.collaborative.fits == [1]
    b.tell("p0", 0, b.ask("p0"))
    both("p1", 1)
    both("p2", 0)
    assert a.collaborative.fits == b.collaborative.fits == [3]
    # between fits a question does not depend on when it is asked
    early = a.ask("p2")
    both("p0", 1)
    both("p1", 0)
    both("p2", 0)
    assert torch.equal(a.history("p2")[-1].options, early)
    assert a.collaborative.fits == b.collaborative.fits == [3, 6]
    both("p1", 1)


def test_undo_rebuilds_and_a_resumed_study_asks_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(sc, "REFIT_MIN_NEW", 3)
    study, people = _small(log_dir=tmp_path), _people(3, seed=5)
    for _ in range(3):
        _round(study, people)
    study.ask("p0"), study.tell("p0", 1)
    model = study.model
    assert study.collaborative.fits == [3, 6, 9]
    study.ask("p1")
    study.undo("p0")  # rebuilt from scratch on the 9 answers left
    assert study.model is not model and study.collaborative.fits == [9]
    assert study.collaborative.online_updates == 0
    carried = [  # each answer and the virtual comparisons it carried
        3 + sum(len(t.virtual) for t in study.history(n) if t.virtual is not None)
        for n in people
    ]
    assert study.model.answers.counts().tolist() == carried
    after_undo = study.ask("p1")
    study.close()
    again = PopulationStudy.resume(tmp_path)
    assert again.config == study.config and again.config["model"] == "collaborative"
    assert again.collaborative.fits == [9]
    assert torch.equal(again.ask("p1"), after_undo)
    again.tell("p1", 0)  # online
    assert again.collaborative.online_updates == 1
    assert again.best("p1")[0].shape == (2,)
    again.close()


def test_a_fit_on_uneven_answer_counts():
    study, people = _small(), _people(2)
    _round(study, people)
    study.ask("p0"), study.tell("p0", 0)  # 3 answers: 2 and 1
    assert torch.isfinite(study.model.latent_mean).all()
    study.ask("p1")


def test_an_unknown_kind_is_refused_with_the_three_kinds():
    with pytest.raises(
        InputDataError,
        match=r"model must be one of \['ep', 'laplace', 'collaborative'\]; got 'skew'",
    ):
        PopulationStudy(BOUNDS, model="skew")


def test_no_model_before_the_first_answer():
    study = _small()
    assert study.model is None
    X = study.ask("p0")  # uniform
    assert X.shape == (2, 2) and study.collaborative.model is None
    with pytest.raises(InputDataError, match=r"needs at least one answer"):
        study.participant_model("p0")


def test_a_question_is_the_best_eubo_pair_of_the_candidates(ran):
    from prefbo.models.collaborative.questions import pair_eubo

    study, _, _, _, model, _, _ = ran
    state = study.collaborative
    # without virtual comparisons at the faces (their rounds:
    # tests/loop/test_people_questions.py)
    maker = QuestionMaker(study.box, "eubo", 2, SMALL, inset=None)
    question, virtual = state.question(maker, 2, 8)
    seed = state.question_seed(2, 8) % sc.SEED_MOD
    X = maker.candidates(seed)
    assert X.shape == (128, 2) and virtual is None
    with torch.no_grad():
        post = model.posterior(X, person=2)
        table = pair_eubo(post.mean.reshape(1, -1), post.mvn.covariance_matrix[None])
    rows = (X.unsqueeze(0) == question.unsqueeze(1)).all(-1).long().argmax(-1)
    best = float(table[0].triu(1).max())
    assert float(table[0, rows[0], rows[1]]) == pytest.approx(best)


def test_the_study_asks_what_its_question_maker_makes_for_people():
    r"""A participant's question is the study's ``question_maker.for_people``
    at their id and question seed, mapped to the box; on a box in other
    units than the cube, and for a newcomer."""
    bounds = torch.tensor([[0.0, -2.0], [1.0, 3.0]], dtype=torch.float64)
    study = PopulationStudy(bounds, model="collaborative", seed=4, initial_random=3)
    people = _people(3, seed=2)
    for _ in range(3):
        _round(study, people)
    maker, state = study.question_maker, study.collaborative
    for name, own in (("p1", 3), ("new", 0)):
        asked = study.ask(name)
        pid = study.participants.index(name)
        seed = state.question_seed(pid, own) % sc.SEED_MOD
        Z = maker.for_people(study.model, torch.tensor([pid]), [None], seed).questions
        assert Z.shape == (1, 2, 2) and torch.equal(asked, study.box.from_model(Z[0]))


def test_refits_try_reviving_where_the_answers_pass_a_power_of_two():
    pairs = [(-1, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 7), (7, 9), (50, 62)]
    assert [sc.revive_due(a, b) for a, b in pairs] == [
        True,
        True,
        False,
        True,
        False,
        False,
        True,
        False,
    ]


def test_small_studies_refit_on_every_answer_large_ones_by_a_quarter(
    monkeypatch,
):
    r"""While a study is small each answer refits the shared part (so the
    participants' answers reach it), then fits come as the answers grow by
    a quarter."""
    monkeypatch.setattr(sc, "REFIT_EVERY_BELOW", OWN["REFIT_EVERY_BELOW"])
    answers = (1, 2, 5, 8, 40, 63, 64, 65, 80, 1000)
    due = (2, 3, 6, 9, 41, 64, 80, 82, 100, 1250)
    assert [sc.next_fit(a) for a in answers] == list(due)


def test_a_small_study_of_two_groups_tells_them_apart(monkeypatch):
    r"""Six people in two planted groups (favourites ``(0.15, 0.5)`` and
    ``(0.85, 0.5)``), ten noiseless answers each, in turn. Every one prefers
    their own group's end, and each one's best told design lies within 0.15
    of their favourite. Without virtual comparisons at the faces in the
    batched step, EUBO at the broad early posteriors asked pairs of the
    candidates' corners, and the best told designs stayed 0.2-0.5 away."""
    for k, v in OWN.items():
        monkeypatch.setattr(sc, k, v)
    study = PopulationStudy(BOUNDS, None, model="collaborative", seed=0)
    favourites = {f"low{i}": 0.15 for i in range(3)}
    favourites |= {f"high{i}": 0.85 for i in range(3)}

    def prefers_second(X, favourite):
        u = -((X[:, 0] - favourite) ** 2) - (X[:, 1] - 0.5) ** 2
        return int(u[1] > u[0])

    for _ in range(10):
        for name, favourite in favourites.items():
            study.tell(name, prefers_second(study.ask(name), favourite))
    ends = torch.tensor([[[0.15, 0.5]], [[0.85, 0.5]]], dtype=torch.float64)
    for name, favourite in favourites.items():
        view = study.participant_model(name)
        with torch.no_grad():
            low, high = view.posterior(ends).mean.reshape(-1).tolist()
        assert (low > high) == (favourite < 0.5), name
        best = study.best(name)[0]
        target = torch.tensor([favourite, 0.5], dtype=torch.float64)
        assert float((best - target).norm()) < 0.15, (name, best)


def test_thompson_questions_are_two_draws_maxima(tmp_path):
    r"""``strategy="ts"``: a participant's question is the batched Thompson
    step's (two draws of their utility over the candidates, each draw's
    maximum), not EUBO's; the study resumed asks Thompson's too, the same
    each time it is resumed (its model rebuilt on the logged answers)."""
    study = _small(strategy="ts", log_dir=tmp_path, boundary_step=None)
    people = _people(3, seed=2)
    for _ in range(3):
        _round(study, people)
    state = study.collaborative
    asked = study.ask("p1")
    seed = state.question_seed(1, 3) % sc.SEED_MOD
    X = study.question_maker.candidates(seed)
    rows = (X.unsqueeze(0) == asked.unsqueeze(1)).all(-1).long().argmax(-1)
    assert torch.equal(X[rows], asked)  # both options are candidates
    with torch.no_grad():
        post = study.model.posterior(X, person=1)
    draws = post.rsample(torch.Size([4000])).reshape(4000, -1)  # 4000 x C
    wins = torch.bincount(draws.argmax(-1), minlength=X.shape[0]) / 4000.0
    assert bool((wins[rows] > 0).all())  # each a maximum some draws reach
    eubo = QuestionMaker(study.box, "eubo", 2, SMALL, inset=None)
    assert not torch.equal(
        asked,
        eubo.for_people(study.model, torch.tensor([1]), [None], seed).questions[0],
    )
    study.close()
    again = PopulationStudy.resume(tmp_path)
    assert again.config["strategy"] == "ts"
    resumed = again.ask("p1")
    again.close()
    assert torch.equal(PopulationStudy.resume(tmp_path).ask("p1"), resumed)


def test_thompson_needs_the_collaborative_kind():
    for kind in ("ep", "laplace"):
        with pytest.raises(
            UnsupportedError,
            match=r"strategy 'ts' \(Thompson sampling\) needs model='collaborative'",
        ):
            PopulationStudy(BOUNDS, model=kind, strategy="ts")
    with pytest.raises(
        InputDataError,
        match=r"one of \['eubo', 'random'\], or with model='collaborative' also "
        r"'ts' \(Thompson sampling\); got 'thompson'",
    ):
        PopulationStudy(BOUNDS, model="collaborative", strategy="thompson")


def test_a_small_study_asks_with_virtual_comparisons_its_answers_keep(
    tmp_path, monkeypatch
):
    r"""A participant alone in the study is asked as the loop asks
    (:func:`~prefbo.loop.person_question.ask_person`): a person whose
    utility rises to the face x = 1 is asked with virtual comparisons
    there, which their answers carry to the log, the model and a resume."""
    monkeypatch.setattr(sc, "ASK_ONE_STRATEGIES", ("eubo",))
    study = _small(log_dir=tmp_path)  # the first 3 questions random
    for _ in range(6):
        X = study.ask("ann")
        study.tell("ann", int(X[:, 0].argmax()))
    history = study.history("ann")
    virtual = [len(t.virtual) for t in history if t.virtual is not None]
    assert virtual and history[0].virtual is None  # none for a random question
    for t in history:
        if t.virtual is not None:  # [inner, face]: a step inside one face
            step = (t.virtual[:, 0] - t.virtual[:, 1]).abs().max(-1).values
            assert torch.allclose(step, torch.full_like(step, DEFAULT_STEP))
    counts = study.model.answers.counts().tolist()
    assert counts == [6 + sum(virtual)]
    # the pending question told with its options (up to rounding) carries
    # them too, as the loop's; other options carry none
    for _ in range(6):
        X = study.ask("ann")
        study.tell("ann", int(X[:, 0].argmax()), options=X + 1e-12)
        last = study.history("ann")[-1].virtual
        virtual.append(0 if last is None else len(last))
        if last is not None:
            break
    assert last is not None
    study.ask("ann")
    other = torch.tensor([[0.2, 0.3], [0.6, 0.1]], dtype=torch.float64)
    study.tell("ann", 0, options=other)
    assert study.history("ann")[-1].virtual is None
    told = len(study.history("ann"))
    assert study.model.answers.counts().tolist() == [told + sum(virtual)]
    study.close()
    again = PopulationStudy.resume(tmp_path)
    assert again.model.answers.counts().tolist() == [told + sum(virtual)]
    again.close()


def test_thompson_and_people_not_alone_are_asked_from_the_batched_step(
    monkeypatch,
):
    monkeypatch.setattr(sc, "ASK_ONE_STRATEGIES", ("eubo",))
    calls = _spy(monkeypatch)
    study = _small(strategy="ts")  # the first 3 questions random
    for _ in range(5):
        X = study.ask("ann")
        study.tell("ann", int(X[:, 0].argmax()))
    assert len(calls) == 2  # the batched step's, not the loop's
    study = _small()
    for _ in range(4):  # ann alone: asked as the loop from her 4th question
        X = study.ask("ann")
        study.tell("ann", int(X[:, 0].argmax()))
    assert len(calls) == 2 and study.history("ann")[-1].virtual is not None
    study.ask("bob"), study.tell("bob", 0)  # a newcomer: the batched step
    study.ask("ann")  # no longer alone
    assert calls[2:] == [[1], [0]]


def test_a_small_pool_asks_a_pair_again_only_as_the_repeat_rule_allows():
    r"""On a pool of 6 items (15 pairs), EUBO at a participant's posterior is
    drawn back to the pairs they answered; the study asks one again only
    when no unasked pair carries at least ``max(MIN_INFORMATION, I(repeat) -
    MIN_INFORMATION)`` nats at that posterior (the loop's rule 3), checked
    with BALD on the participant's view over every pair."""
    from prefbo.acquisition import PairwiseBALD
    from prefbo.loop.repeats import MIN_INFORMATION
    from prefbo.space import ItemPool, Space

    g = torch.Generator().manual_seed(4)
    features = torch.rand(6, 2, generator=g, dtype=torch.float64)
    space = Space([ItemPool("item", list(range(6)), features.tolist())])
    study = PopulationStudy(space, seed=0)
    people = _people(3, seed=1)
    grid = study.box.to_model(space.grid().double())  # 6 items, model points
    i, j = torch.triu_indices(6, 6, offset=1)
    asked: dict[str, list[frozenset]] = {name: [] for name in people}
    repeats = 0
    for _ in range(8):
        for name, u in people.items():
            X = study.ask(name)
            pair = frozenset(d["item"] for d in space.decode(X))
            if pair in asked[name] and study.model is not None:
                repeats += 1
                with torch.no_grad():
                    bald = PairwiseBALD(study.participant_model(name))
                    info = bald(torch.stack([grid[i], grid[j]], 1))
                keys = [frozenset((a, b)) for a, b in zip(i.tolist(), j.tolist())]
                own = info[keys.index(pair)]
                floor = max(MIN_INFORMATION, float(own) - MIN_INFORMATION)
                fresh = torch.tensor([k not in asked[name] for k in keys])
                assert float(info[fresh].max()) < floor, (name, sorted(pair))
            asked[name].append(pair)
            study.tell(
                name,
                int(
                    u(
                        study.box.to_model(X) @ torch.eye(2, dtype=torch.float64)
                    ).argmax()
                ),
            )
    assert sum(len(a) for a in asked.values()) == 24
