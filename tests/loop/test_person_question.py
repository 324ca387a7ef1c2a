import copy

import pytest
import torch

from prefbo.loop.boundary import DEFAULT_STEP, FACE_TOL, off_faces
from prefbo.loop.box import DesignBox
from prefbo.loop.options import acqf_options
from prefbo.loop.person_question import ask_person, imagined
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.repeats import RepeatRule
from prefbo.models.collaborative import CollaborativePreferenceGP

FAST = acqf_options({"num_restarts": 2, "raw_samples": 32, "maxiter": 20})


@pytest.fixture(scope="module")
def rising():
    r"""A fitted collaborative model whose person 0 prefers the larger
    first coordinate in all 10 answers: EUBO asks on the face x = 1."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(20, 2, generator=g, dtype=torch.float64)
    rows = []
    for _ in range(10):
        i, j = torch.randperm(20, generator=g)[:2].tolist()
        rows.append((0, i, j) if X[i, 0] > X[j, 0] else (0, j, i))
    model = CollaborativePreferenceGP(
        X, torch.tensor(rows), num_tastes=1, num_inducing=16, num_residual=4
    )
    model.fit(steps=50, seed=0)
    return model


def _best(model):
    return lambda: model.designs[int(model.utility_mean(0).argmax())]


def _on_face(Z):
    return ((Z <= FACE_TOL) | (Z >= 1 - FACE_TOL)).any(-1)


def test_the_question_carries_virtual_comparisons_at_the_faces(rising):
    model = copy.deepcopy(rising)
    maker = QuestionMaker(
        DesignBox(torch.tensor([[0.0, 0.0], [1.0, 1.0]])), "eubo", 2, FAST
    )
    # without them, EUBO asks on the face the person's answers rise to
    plain, _ = maker.from_model(RepeatRule(model.person_model(0), []), 5, _best(model))
    assert bool(_on_face(plain).any())
    mean, chol = model.latent_mean.clone(), model.latent_precision_chol.clone()
    question, virtual, fallback = ask_person(maker, model, 0, [], 5, _best(model))
    assert not fallback and virtual is not None and virtual.shape[1:] == (2, 2)
    inner, face = virtual[:, 0], virtual[:, 1]
    moved = (inner - face).abs()  # one column each, moved a step inside
    assert torch.allclose(
        moved.sort(-1).values[:, 1], torch.full_like(moved[:, 1], DEFAULT_STEP)
    )
    assert torch.equal(
        moved.sort(-1).values[:, 0], torch.zeros(len(moved), dtype=moved.dtype)
    )
    assert bool(_on_face(face).all()) and not bool(_on_face(question).any())
    # the stored posterior and answers are unchanged
    assert torch.equal(model.latent_mean, mean)
    assert torch.equal(model.latent_precision_chol, chol)
    assert int(model.answers.counts()[0]) == 10


def test_the_question_is_the_one_asked_after_observing_its_comparisons(rising):
    # cross-check: the strategy's question on a copy that observed the
    # virtual comparisons, at the same seed
    model = copy.deepcopy(rising)
    maker = QuestionMaker(
        DesignBox(torch.tensor([[0.0, 0.0], [1.0, 1.0]])), "eubo", 2, FAST
    )
    question, virtual, _ = ask_person(maker, model, 0, [], 5, _best(model))
    # the last round's options were still on a face: their comparisons
    # (whose inner designs are the options asked) were made after the last
    # computation, which the others were imagined in
    last = (virtual[:, 0].unsqueeze(1) == question.unsqueeze(0)).all(-1).any(-1)
    assert bool(last.any()) and not bool(last.all())
    twin = copy.deepcopy(rising)
    twin.observe(0, virtual[~last, 0], virtual[~last, 1])
    again, _ = maker.from_model(RepeatRule(twin.person_model(0), []), 5, _best(model))
    columns = torch.ones(2, dtype=torch.bool)
    torch.testing.assert_close(
        question, off_faces(again, columns, DEFAULT_STEP), atol=1e-6, rtol=0
    )


def test_virtual_comparisons_are_in_the_box_s_units():
    g = torch.Generator().manual_seed(1)
    X = torch.rand(20, 2, generator=g, dtype=torch.float64)
    rows = [
        (0, i, j) if X[i, 0] > X[j, 0] else (0, j, i)
        for i, j in [torch.randperm(20, generator=g)[:2].tolist() for _ in range(10)]
    ]
    model = CollaborativePreferenceGP(
        X, torch.tensor(rows), num_tastes=1, num_inducing=16, num_residual=4
    )
    model.fit(steps=50, seed=0)
    box = DesignBox(torch.tensor([[0.0, -1.0], [10.0, 1.0]], dtype=torch.float64))
    maker = QuestionMaker(box, "eubo", 2, FAST)
    question, virtual, _ = ask_person(maker, model, 0, [], 5, _best(model))
    assert virtual is not None
    width = torch.tensor([10.0, 2.0], dtype=torch.float64)
    moved = (virtual[:, 0] - virtual[:, 1]).abs() / width
    assert torch.allclose(
        moved.max(-1).values, torch.full((len(moved),), DEFAULT_STEP, dtype=moved.dtype)
    )
    assert bool(((question >= box.bounds[0]) & (question <= box.bounds[1])).all())


def test_imagined_is_the_posterior_after_observing(rising):
    model = copy.deepcopy(rising)
    pairs = [torch.tensor([[0.9, 0.5], [1.0, 0.5]], dtype=torch.float64)]
    post = imagined(model, 0, pairs)
    twin = copy.deepcopy(model)
    want = twin.observe(0, pairs[0][:1], pairs[0][1:])
    torch.testing.assert_close(post.mean, want.mean, atol=1e-6, rtol=0)
    torch.testing.assert_close(
        post.precision_chol, want.precision_chol, atol=1e-6, rtol=0
    )


def test_without_a_step_the_question_is_the_strategy_s_own(rising):
    model = copy.deepcopy(rising)
    maker = QuestionMaker(
        DesignBox(torch.tensor([[0.0, 0.0], [1.0, 1.0]])), "eubo", 2, FAST, inset=None
    )
    question, virtual, fallback = ask_person(maker, model, 0, [], 5, _best(model))
    plain, _ = maker.from_model(RepeatRule(model.person_model(0), []), 5, _best(model))
    assert virtual is None and not fallback
    torch.testing.assert_close(question, plain, atol=0, rtol=0)
    assert bool(_on_face(question).any())  # where EUBO asks without them
