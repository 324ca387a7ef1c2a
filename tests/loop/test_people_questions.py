"""``prefbo.loop.people_questions``: many people's questions in one step."""

import copy

import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.loop import people_questions as pq
from prefbo.loop.boundary import DEFAULT_STEP
from prefbo.models.collaborative.questions import next_questions, pair_eubo
from prefbo.space import Categorical, Continuous, Space


def test_candidates_list_a_small_space_and_draw_from_a_large_one():
    small = Space([Categorical("c", ["a", "b", "c"]), Categorical("d", ["x", "y"])])
    assert torch.equal(pq.candidates(small, small.dim, 0), small.grid().double())
    large = Space([Continuous("x", 0.0, 1.0), Categorical("c", ["a", "b"])])
    X = pq.candidates(large, large.dim, 5)
    assert X.shape == (pq.CANDIDATES, 3) and torch.equal(X, pq.candidates(large, 3, 5))
    assert len(small.decode(pq.candidates(small, small.dim, 0))) == 6
    assert large.decode(X[:1])[0]["c"] in ("a", "b")


def test_candidates_keep_a_step_inside_the_faces_of_continuous_variables():
    box = pq.candidates(None, 3, 0)
    assert box.shape == (pq.CANDIDATES, 3) and box.dtype == torch.float64
    assert bool((box >= DEFAULT_STEP).all()) and bool((box <= 1 - DEFAULT_STEP).all())
    space = Space([Continuous("x", 0.0, 2.0), Categorical("c", ["a", "b", "c"])])
    X = pq.candidates(space, space.dim, 1)
    assert X[:, 0].min() >= DEFAULT_STEP and X[:, 0].max() <= 1 - DEFAULT_STEP
    assert set(X[:, 1:].sum(-1).tolist()) == {1.0}  # one-hot columns kept
    assert all(0.2 <= d["x"] <= 1.8 for d in space.decode(X))


def test_each_person_is_asked_the_best_eubo_pair_at_their_posterior(collaborative):
    X = pq.candidates(None, 2, 3, count=32)
    people = torch.tensor([0, 3, 1])
    asked = pq.ask_people(collaborative, people, X, [None] * 3)
    assert asked.shape == (3, 2, 2)
    for b, p in enumerate(people.tolist()):
        with torch.no_grad():
            post = collaborative.posterior(X, person=p)
        table = pair_eubo(post.mean.reshape(1, -1), post.mvn.covariance_matrix[None])
        rows = (X.unsqueeze(0) == asked[b].unsqueeze(1)).all(-1).long().argmax(-1)
        best = float(table[0].triu(1).max())
        assert float(table[0, rows[0], rows[1]]) == pytest.approx(best)
    ts = pq.ask_people(collaborative, people, X, [None] * 3, "thompson", seed=4)
    pairs = next_questions(collaborative, people, X, strategy="thompson", seed=4)
    assert torch.equal(ts, X[pairs])


def test_a_person_looking_at_a_question_is_asked_after_the_likelier_answer(
    collaborative,
):
    X = pq.candidates(None, 2, 3, count=32)
    people = torch.tensor([2, 1])
    first = pq.ask_people(collaborative, people, X, [None, None])
    asked = pq.ask_people(collaborative, people, X, [first[0], None])
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


def test_bad_people_and_shown_are_named(collaborative):
    X = pq.candidates(None, 2, 0, count=8)
    people = torch.tensor([0, 1])
    with pytest.raises(
        InputDataError,
        match=r"shown must hold one entry per person \(2\): the options on their "
        r"screen, or None; got 1 entries\.",
    ):
        pq.ask_people(collaborative, people, X, [None])
    with pytest.raises(InputDataError, match=r"shown must hold .*; got None\."):
        pq.check_people(collaborative, people, None)
    with pytest.raises(
        InputDataError,
        match=r"shown\[1\] must be the 2 x 2 options on person 1's screen \(model "
        r"points\), or None; got a torch.float64 tensor of shape \(3, 2\)\.",
    ):
        pq.ask_people(collaborative, people, X, [None, X[:3]])
    with pytest.raises(
        InputDataError,
        match=r"people must be the model's person ids, in \[0, 4\); got values "
        r"from 0 to 4 \(add a newcomer with model.add_person\(\) first\)\.",
    ):
        pq.ask_people(collaborative, torch.tensor([0, 4]), X, [None, None])
    with pytest.raises(
        InputTypeError, match=r"people must be a 1-d integer tensor .*; got list"
    ):
        pq.ask_people(collaborative, [0, 1], X, [None, None])
    with pytest.raises(
        InputTypeError, match=r"model must be a CollaborativePreferenceGP .*; got str"
    ):
        pq.check_people("model", people, [None, None])


def test_candidates_without_a_step_cover_the_whole_box():
    box = pq.candidates(None, 2, 0, step=None)
    assert float(box.min()) < 0.01 and float(box.max()) > 0.99
    wider = pq.candidates(None, 2, 0, step=0.2)
    assert bool((wider >= 0.2).all()) and bool((wider <= 0.8).all())
