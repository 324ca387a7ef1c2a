"""``prefbo.loop.people_questions``: many people's questions in one step."""

import copy

import pytest
import torch

from prefbo.loop import people_questions as pq
from prefbo.loop.boundary import DEFAULT_STEP, ROUNDS
from prefbo.loop.box import DesignBox
from prefbo.models.collaborative.questions import (
    imagined_posteriors,
    next_questions,
    pair_eubo,
)
from prefbo.space import Categorical, Continuous, Space


def test_candidates_list_a_small_space_and_draw_from_a_large_one():
    small = Space([Categorical("c", ["a", "b", "c"]), Categorical("d", ["x", "y"])])
    assert torch.equal(pq.candidates(small, small.dim, 0), small.grid().double())
    large = Space([Continuous("x", 0.0, 1.0), Categorical("c", ["a", "b"])])
    X = pq.candidates(large, large.dim, 5)
    # at most CANDIDATES: designs moved onto the same face are one
    assert 100 < X.shape[0] <= pq.CANDIDATES and X.shape[1] == 3
    assert torch.equal(X, pq.candidates(large, 3, 5))
    assert len(small.decode(pq.candidates(small, small.dim, 0))) == 6
    assert large.decode(X[:1])[0]["c"] in ("a", "b")


def test_candidates_within_a_step_of_a_face_lie_on_it():
    r"""The uniform draw's band of width ``step`` along each face of a
    continuous column is moved onto the face (a uniform draw of the whole
    box otherwise): a fraction ``1 - (1 - 2 step)^d`` of the candidates
    touches a face, the rest lie inside the inset box."""
    box = pq.candidates(None, 3, 0)
    assert box.shape == (pq.CANDIDATES, 3) and box.dtype == torch.float64
    on = (box == 0) | (box == 1)
    inside = (box >= DEFAULT_STEP) & (box <= 1 - DEFAULT_STEP)
    assert bool((on | inside).all())
    expected = 1 - (1 - 2 * DEFAULT_STEP) ** 3  # 0.488
    assert abs(float(on.any(-1).double().mean()) - expected) < 0.1
    raw = pq.candidates(None, 3, 0, step=None)  # the same draw, rows sorted
    moved = torch.where(raw < DEFAULT_STEP, 0.0, raw)
    moved = torch.where(raw > 1 - DEFAULT_STEP, 1.0, moved)
    assert torch.equal(box, moved.unique(dim=0))
    space = Space([Continuous("x", 0.0, 2.0), Categorical("c", ["a", "b", "c"])])
    X = pq.candidates(space, space.dim, 1)
    x = X[:, 0]
    assert bool(((x == 0) | (x == 1) | ((x >= 0.1) & (x <= 0.9))).all())
    assert bool((x == 0).any()) and bool((x == 1).any())
    assert set(X[:, 1:].sum(-1).tolist()) == {1.0}  # one-hot columns kept
    assert all(d["x"] in (0.0, 2.0) or 0.2 <= d["x"] <= 1.8 for d in space.decode(X))


def test_each_person_is_asked_the_best_eubo_pair_at_their_posterior(collaborative):
    X = pq.candidates(None, 2, 3, count=32)
    people = torch.tensor([0, 3, 1])
    asked = pq.ask_people(collaborative, people, X, [None] * 3).questions
    assert asked.shape == (3, 2, 2)
    for b, p in enumerate(people.tolist()):
        with torch.no_grad():
            post = collaborative.posterior(X, person=p)
        table = pair_eubo(post.mean.reshape(1, -1), post.mvn.covariance_matrix[None])
        rows = (X.unsqueeze(0) == asked[b].unsqueeze(1)).all(-1).long().argmax(-1)
        best = float(table[0].triu(1).max())
        assert float(table[0, rows[0], rows[1]]) == pytest.approx(best)
    ts = pq.ask_people(collaborative, people, X, [None] * 3, "thompson", seed=4)
    ts = ts.questions
    pairs = next_questions(collaborative, people, X, strategy="thompson", seed=4)
    assert torch.equal(ts, X[pairs])


def test_a_person_looking_at_a_question_is_asked_after_the_likelier_answer(
    collaborative,
):
    X = pq.candidates(None, 2, 3, count=32)
    people = torch.tensor([2, 1])
    first = pq.ask_people(collaborative, people, X, [None, None]).questions
    asked = pq.ask_people(collaborative, people, X, [first[0], None]).questions
    # person 1, not looking, is asked as before
    assert torch.equal(asked[1], first[1])
    # person 2's question: a copy of the model told the believed answer to
    # the question on screen, that question excluded
    model = copy.deepcopy(collaborative)
    with torch.no_grad():
        mean = model.posterior(first[0], person=2).mean.reshape(-1)
    win = int(mean.argmax())
    model.observe(2, first[0][win : win + 1], first[0][1 - win : 2 - win])
    on_screen = (first[0].unsqueeze(1) == X.unsqueeze(0)).all(-1).long().argmax(-1)
    pair = next_questions(model, people[:1], X, exclude=on_screen[None])[0]
    assert torch.equal(asked[0], X[pair])
    assert not torch.equal(asked[0], first[0])
    assert int(collaborative.answers.counts()[2]) == 6  # nothing told to it


def test_candidates_without_a_step_cover_the_whole_box():
    box = pq.candidates(None, 2, 0, step=None)
    assert float(box.min()) < 0.01 and float(box.max()) > 0.99
    assert not bool(((box == 0) | (box == 1)).any())
    wider = pq.candidates(None, 2, 0, step=0.2)
    on = (wider == 0) | (wider == 1)
    assert bool((on | ((wider >= 0.2) & (wider <= 0.8))).all())


UNIT = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)


def _on_faces(Z):
    return ((Z == 0) | (Z == 1)).any(-1)


def _on_face(Z):
    return bool(_on_faces(Z).any())


def test_options_on_faces_are_asked_again_with_virtual_comparisons(collaborative):
    r"""With a box and a step, an option proposed on a face gets the
    comparison "a step inside is preferred" (once per question), and the
    question is computed again at the posterior with it. The question
    returned is either the step's at the posterior with every comparison
    it carries, off the faces, or a pair of candidates on faces whose
    comparisons it carries, moved a step inside (after the last round, or
    where the recomputed question proposed the same faces again). A
    newcomer's broad posterior proposes faces."""
    model = copy.deepcopy(collaborative)
    newcomer = model.add_person()
    people = torch.tensor([newcomer, 1])
    box = DesignBox(UNIT)
    carried = moved = 0
    for seed in range(6):
        X = pq.candidates(None, 2, seed, count=64)
        plain = pq.ask_people(model, people, X, [None, None], seed=seed)
        assert plain.virtual == [None, None]
        asked = pq.ask_people(
            model, people, X, [None, None], seed=seed, box=box, step=DEFAULT_STEP
        )
        for b, virtual in enumerate(asked.virtual):
            question = asked.questions[b]
            assert not _on_face(question)
            if virtual is None:  # no face proposed: the plain step's question
                assert torch.equal(question, plain.questions[b])
                continue
            carried += 1
            inner, face = virtual[:, 0], virtual[:, 1]
            assert _on_face(face) and len(virtual) <= 4 * (ROUNDS + 1)  # corners: 2
            assert len(virtual.reshape(len(virtual), -1).unique(dim=0)) == len(virtual)
            step = (inner - face).abs().sum(-1)
            assert torch.allclose(step, torch.full_like(step, DEFAULT_STEP))
            # a step inside a face: a coordinate at the step from a bound
            inside = (question == DEFAULT_STEP) | (question == 1 - DEFAULT_STEP)
            if bool(inside.any()):
                moved += 1
                back = torch.where(inside & (question < 0.5), 0.0, question)
                back = torch.where(inside & (question > 0.5), 1.0, back)
                rows = (back.unsqueeze(1) == X.unsqueeze(0)).all(-1).any(-1)
                assert bool(rows.all())  # both options candidates before the move
                for option in back[_on_faces(back)]:  # its comparisons are carried
                    assert bool((face == option).all(-1).any())
                continue
            rows = model.design_rows(virtual.reshape(-1, 2))
            post = imagined_posteriors(model, people[b : b + 1], rows[0::2], rows[1::2])
            pair = next_questions(model, people[b : b + 1], X, seed=seed, latent=post)
            assert torch.equal(question, X[pair[0]])
    assert carried >= 4 and moved >= 1


def test_a_person_looking_is_asked_after_what_their_question_carries(
    collaborative, monkeypatch
):
    r"""The believed answer to the question on screen is imagined with the
    virtual comparisons that question carries: the person is asked at the
    posterior of a copy of the model told both (not at the one told the
    answer alone)."""
    model = copy.deepcopy(collaborative)
    X = pq.candidates(None, 2, 5, count=32)
    people = torch.tensor([2])
    shown = torch.tensor([[0.3, 0.4], [0.8, 0.6]], dtype=torch.float64)
    virtual = torch.tensor([[[0.9, 0.6], [1.0, 0.6]], [[0.5, 0.9], [0.5, 1.0]]])
    virtual = virtual.double()
    used = []

    def spy(*args, latent=None, **kwargs):
        used.append(latent.mean.clone())
        return next_questions(*args, latent=latent, **kwargs)

    monkeypatch.setattr(pq, "next_questions", spy)
    pq.ask_people(model, people, X, [shown], shown_virtual=[virtual])
    pq.ask_people(model, people, X, [shown])
    with torch.no_grad():
        win = int(model.posterior(shown, person=2).mean.reshape(-1).argmax())
    means = []
    for carried in (virtual, virtual[:0]):
        told = copy.deepcopy(model)
        told.observe(
            2,
            torch.cat([carried[:, 0], shown[win : win + 1]]),
            torch.cat([carried[:, 1], shown[1 - win : 2 - win]]),
        )
        means.append(told.latent_mean[2])
    torch.testing.assert_close(used[0][0], means[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(used[1][0], means[1], atol=1e-6, rtol=0)
    assert float((means[0] - means[1]).abs().max()) > 1e-3


def test_a_pair_asked_before_gives_way_to_an_unasked_one_nearly_as_informative(
    collaborative,
):
    r"""The loop's repeat rule (:mod:`prefbo.loop.repeats`) in the batched
    step, checked against BoTorch's EUBO and prefbo's BALD on the person's
    view: told that its EUBO-best pair was asked, the step asks the unasked
    pair of highest EUBO among those carrying at least ``max(MIN_INFORMATION,
    I(repeat) - MIN_INFORMATION)`` nats."""
    from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption

    from prefbo.acquisition import PairwiseBALD
    from prefbo.loop.repeats import MIN_INFORMATION, REPEAT_TOL

    X = torch.rand(
        8, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64
    )
    people = torch.tensor([1])
    first = pq.ask_people(collaborative, people, X, [None]).questions[0]
    again = pq.ask_people(
        collaborative, people, X, [None], asked=[first.unsqueeze(0)]
    ).questions[0]
    view = collaborative.person_model(1)
    i, j = torch.triu_indices(8, 8, offset=1)
    pairs = torch.stack([X[i], X[j]], 1)  # 28 x 2 x 2
    with torch.no_grad():
        info = PairwiseBALD(view)(pairs)
        value = AnalyticExpectedUtilityOfBestOption(pref_model=view)(pairs)
    # a repeat: each option within REPEAT_TOL (max-norm) of one asked, in
    # either order (two of the candidates are that close)
    near = lambda a, b: (a - b).abs().amax(-1) <= REPEAT_TOL  # noqa: E731
    same = (near(pairs[:, 0], first[0]) & near(pairs[:, 1], first[1])) | (
        near(pairs[:, 0], first[1]) & near(pairs[:, 1], first[0])
    )
    exact = (pairs == first).all(-1).all(-1) | (pairs == first.flip(0)).all(-1).all(-1)
    assert int(exact.sum()) == 1 and int(same.sum()) == 2
    floor = max(MIN_INFORMATION, float(info[exact]) - MIN_INFORMATION)
    eligible = ~same & (info >= floor)
    assert bool(eligible.any())  # the rule has an unasked pair to ask instead
    best = pairs[value.masked_fill(~eligible, float("-inf")).argmax()]
    assert torch.equal(again, best) or torch.equal(again, best.flip(0))
    # told of another pair only, the step asks its EUBO-best pair as before
    other = pairs[~same & (info > 0)][-1].unsqueeze(0)
    kept = pq.ask_people(collaborative, people, X, [None], asked=[other]).questions[0]
    assert torch.equal(kept, first)


def test_a_thompson_draw_that_repeats_an_answered_pair_is_drawn_again(collaborative):
    r"""As the loop's Thompson strategy: a draw whose pair the person answered
    is drawn again (seeds ``seed + 1``, ...), and the first draw that is no
    repeat is asked."""
    X = torch.rand(
        8, 2, generator=torch.Generator().manual_seed(6), dtype=torch.float64
    )
    people = torch.tensor([1])
    first = pq.ask_people(collaborative, people, X, [None], "thompson", seed=4)
    first = first.questions[0]
    again = pq.ask_people(
        collaborative, people, X, [None], "thompson", seed=4, asked=[first[None]]
    ).questions[0]

    def repeats(pair):
        same = (pair - first).abs().amax(-1) <= 0.02
        swapped = (pair - first.flip(0)).abs().amax(-1) <= 0.02
        return bool(same.all() or swapped.all())

    redraws = [
        X[next_questions(collaborative, people, X, "thompson", seed=4 + k)[0]]
        for k in (1, 2, 3)
    ]
    fresh = [pair for pair in redraws if not repeats(pair)]
    assert fresh and not repeats(again)
    assert torch.equal(again, fresh[0])
