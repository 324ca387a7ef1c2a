"""Virtual comparisons at the box's faces (prefbo.loop.boundary)."""

import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.loop.boundary import (
    DEFAULT_STEP,
    ROUNDS,
    ask_off_faces,
    face_columns,
    face_comparisons,
    off_faces,
)
from prefbo.loop.box import DesignBox
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.space import Categorical, Continuous, Integer, Space
from prefbo.test_functions import Branin, SimulatedPerson

SMALL = {"num_restarts": 2, "raw_samples": 32, "maxiter": 20}
T = dict(dtype=torch.float64)


def test_one_comparison_per_face_an_option_lies_on():
    Z = torch.tensor([[0.0, 0.3, 1.0], [0.5, 0.5, 0.5], [1.0, 1e-9, 0.4]], **T)
    pairs = face_comparisons(Z, torch.ones(3, dtype=torch.bool), step=0.1)
    inner = torch.stack([p[0] for p in pairs])
    face = torch.stack([p[1] for p in pairs])
    # option 0 on x0 = 0 and x2 = 1, option 2 on x0 = 1 and x1 = 0
    expected_inner = torch.tensor(
        [[0.1, 0.3, 1.0], [0.0, 0.3, 0.9], [0.9, 1e-9, 0.4], [1.0, 0.1, 0.4]], **T
    )
    torch.testing.assert_close(inner, expected_inner, atol=0, rtol=0)
    torch.testing.assert_close(face, Z[[0, 0, 2, 2]], atol=0, rtol=0)
    # columns that are not faces (e.g. one-hot categories) get none
    (only,) = face_comparisons(Z, torch.tensor([False, True, False]), step=0.1)
    torch.testing.assert_close(torch.stack(only), torch.stack(pairs[3]))
    assert face_comparisons(Z[1:2], torch.ones(3, dtype=torch.bool), 0.1) == []


def test_face_columns_of_a_box_and_of_a_space():
    assert face_columns(None, 3).tolist() == [True, True, True]
    space = Space(
        [
            Continuous("a", 0.0, 2.0),
            Categorical("c", ["x", "y", "z"]),
            Continuous("b", -1.0, 1.0),
        ]
    )
    # only the continuous variables' columns have faces; one-hot columns do not
    assert face_columns(space, space.dim).tolist() == [True, False, False, False, True]
    # nor integers (a step inside is no design of theirs)
    assert face_columns(Space([Integer("n", 0, 1)]), 1).tolist() == [False]


def _run(boundary_step=0.1, answers=8, seed=3, **kw):
    p = Branin()
    opt = PreferentialOptimizer(
        p.bounds, acqf_options=SMALL, seed=seed, boundary_step=boundary_step, **kw
    )
    person = SimulatedPerson(p, noise_std=0.1, seed=0)
    for _ in range(answers):
        X = opt.ask()
        opt.tell(person.compare(X[0], X[1]))
    return opt


def test_asked_options_on_faces_enter_the_model_with_the_answer():
    opt = _run()
    made = [(k, h.virtual) for k, h in enumerate(opt.history) if h.virtual is not None]
    assert made and all(k >= opt.initial_random for k, _ in made)
    for _, v in made:
        inner, face = v[:, 0], v[:, 1]
        on_face = (face == 0) | (face == 1)
        moved = inner != face
        # each moved one column of a face option a tenth of the box inside
        assert (moved.sum(-1) == 1).all() and on_face[moved].all()
        torch.testing.assert_close(
            (inner - face)[moved].abs(), torch.full((len(v),), 0.1, **T)
        )
    designs, comps = opt.data()
    assert len(designs) == 2 * len(opt.history)  # the told designs only
    assert any(torch.equal(opt.best()[0], x) for x in designs)
    k = sum(len(v) for _, v in made)
    assert opt.model.comparisons.shape[0] == comps.shape[0] + k
    # the same options told without asking them carry none
    other = PreferentialOptimizer(Branin().bounds, seed=3)
    for h in opt.history:
        other.tell(h.answer, options=h.options)
    assert all(h.virtual is None for h in other.history)
    assert other.model.comparisons.shape[0] == comps.shape[0]


def _face_share(boundary_step, answers=16):
    p = Branin()
    opt = PreferentialOptimizer(
        p.bounds, acqf_options=SMALL, seed=3, boundary_step=boundary_step
    )
    person = SimulatedPerson(p, noise_std=0.1, seed=0)
    on_face = asked = 0
    for k in range(answers):
        X = opt.ask()
        if k >= opt.initial_random:
            Z = opt.to_unit(X)
            on_face += int(((Z <= 1e-4) | (Z >= 1 - 1e-4)).any(-1).sum())
            asked += X.shape[0]
        opt.tell(person.compare(X[0], X[1]))
    return on_face / asked


def test_questions_leave_the_faces():
    # EUBO under a stationary kernel puts most options on the box's faces
    # (posterior variance is largest there); the virtual comparisons send
    # them inside
    assert _face_share(None) >= 0.5
    assert _face_share(0.1) <= 0.2


def test_the_same_answers_give_the_same_questions_after_resume(tmp_path):
    path = tmp_path / "s.jsonl"
    opt = _run(answers=6, seed=1, log_path=path)
    assert any(h.virtual is not None for h in opt.history)
    following = opt.ask()
    opt.close()
    resumed = PreferentialOptimizer.resume(path)
    for a, b in zip(resumed.history, opt.history):
        assert (a.virtual is None) == (b.virtual is None)
        if a.virtual is not None:
            torch.testing.assert_close(a.virtual, b.virtual, atol=0, rtol=0)
    torch.testing.assert_close(resumed.ask(), following, atol=0, rtol=0)
    assert resumed.boundary_step == 0.1
    resumed.close()


def test_a_log_with_bad_virtual_comparisons_is_refused(tmp_path):
    from prefbo.exceptions import SessionLogError
    from prefbo.loop.session import encode_record, read_session_log

    path = tmp_path / "s.jsonl"
    opt = _run(answers=6, seed=1, log_path=path)
    opt.close()
    header, records = read_session_log(path)
    k = next(i for i, r in enumerate(records) if "virtual" in r)
    bad = {
        "virtual must lie in the box": [[[2.0, 0.5], [1.0, 0.5]]],
        "distinct designs; comparison 0": [[[1.0, 0.5], [1.0, 0.5]]],
        r"k x 2 x 2 list \(k >= 1\)": [],
    }
    for match, virtual in bad.items():
        records[k]["virtual"] = virtual
        path.write_text("".join(encode_record(r) for r in [header, *records]))
        with pytest.raises(SessionLogError, match=rf"line \d+.*{match}"):
            PreferentialOptimizer.resume(path)
    # and none where the header has no boundary_step
    records[k]["virtual"] = [[[0.9, 0.5], [1.0, 0.5]]]
    header["config"]["boundary_step"] = None
    path.write_text("".join(encode_record(r) for r in [header, *records]))
    with pytest.raises(SessionLogError, match=r"need a boundary_step"):
        PreferentialOptimizer.resume(path)


@pytest.mark.parametrize(
    "value, error, match",
    [
        (
            "0.1",
            InputTypeError,
            r"boundary_step must be None or a float in \[0.001, 0.5\]",
        ),
        (True, InputTypeError, r"boundary_step must be"),
        (0.0, InputDataError, r"boundary_step must be .*got boundary_step=0.0"),
        (5e-5, InputDataError, r"boundary_step must be .*got boundary_step=5e-05"),
        (0.6, InputDataError, r"boundary_step must be .*got boundary_step=0.6"),
        (float("nan"), InputDataError, r"boundary_step must be"),
    ],
)
def test_boundary_step_is_checked(value, error, match):
    with pytest.raises(error, match=match):
        PreferentialOptimizer(Branin().bounds, boundary_step=value)


def test_logs_from_before_the_boundary_comparisons_resume_without_them(tmp_path):
    from prefbo.loop.session import encode_record, read_session_log

    path = tmp_path / "old.jsonl"
    box = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], **T)
    opt = PreferentialOptimizer(box, strategy="random", log_path=path)
    opt.tell(1, options=torch.tensor([[10.0, 7.5], [2.5, 7.5]], **T))
    header, _ = read_session_log(path)
    del header["config"]["version"]  # an older layout has none
    del header["config"]["boundary_step"]
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(encode_record(header) + "".join(lines[1:]))
    opt.close()
    resumed = PreferentialOptimizer.resume(path, read_only=True)
    assert resumed.boundary_step is None
    assert resumed.model.comparisons.tolist() == [[1, 0]]


def test_answers_given_as_a_space_s_dicts_keep_the_virtual_comparisons():
    # a space's dicts round-trip to within rounding of the asked options
    space = Space([Continuous("a", 0.1, 0.7), Continuous("b", 1e-3, 10.0, log=True)])
    opt = PreferentialOptimizer(space, acqf_options=SMALL, seed=0)
    person = SimulatedPerson(lambda X: -((X - 0.3) ** 2).sum(-1), noise_std=0.0)
    made = 0
    for _ in range(10):
        X = opt.ask()
        pending = opt.pending_virtual
        opt.tell(person.compare(X[0], X[1]), options=space.decode(X))
        if pending is not None:
            made += 1
            torch.testing.assert_close(opt.history[-1].virtual, pending)
    assert made > 0


def test_a_failing_round_leaves_no_virtual_comparison_behind(monkeypatch):
    import prefbo.loop.question_maker as question_maker

    opt = _run(answers=2)
    calls = []
    real = question_maker.choose_options

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the second computation of the question
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    before = opt.best()[1:]
    monkeypatch.setattr(question_maker, "choose_options", failing)
    with pytest.raises(KeyboardInterrupt):
        opt.ask()
    assert len(calls) == 2  # the first proposal had an option on a face
    assert opt.models.proposed == [] and opt.best()[1:] == pytest.approx(before)
    assert opt.model.comparisons.shape[0] == 2


def test_random_fallbacks_count_questions_not_rounds(monkeypatch):
    import prefbo.loop.question_maker as question_maker

    opt = _run(answers=2)
    monkeypatch.setattr(question_maker, "choose_options", lambda *a, **k: None)
    opt.ask()
    assert opt.random_fallbacks == 1 and opt.pending_virtual is None


def test_an_optimiser_rebuilt_from_answers_and_their_comparisons_asks_the_same():
    # prefbo serve rebuilds a participant's optimiser from stored answers:
    # told with the virtual comparisons their questions carried
    # (pending_virtual when asked), it asks what the original asks next
    p = Branin()
    opt = PreferentialOptimizer(p.bounds, acqf_options=SMALL, seed=3)
    person = SimulatedPerson(p, noise_std=0.1, seed=0)
    stored = []
    for _ in range(7):
        X = opt.ask()
        carried = opt.pending_virtual
        stored.append((X, person.compare(X[0], X[1]), carried))
        opt.tell(stored[-1][1])
    assert any(v is not None for _, _, v in stored)
    rebuilt = PreferentialOptimizer(p.bounds, acqf_options=SMALL, seed=3)
    for X, answer, carried in stored:
        rebuilt.tell(answer, options=X, virtual=carried)
    for a, b in zip(rebuilt.history, opt.history):
        assert (a.virtual is None) == (b.virtual is None)
    torch.testing.assert_close(rebuilt.ask(), opt.ask(), atol=0, rtol=0)
    # a list (as a store keeps it) is taken as well; the caller's is copied
    last = next(v for _, _, v in reversed(stored) if v is not None)
    other = PreferentialOptimizer(p.bounds, seed=3)
    other.tell(0, options=stored[0][0], virtual=last.tolist())
    torch.testing.assert_close(other.history[0].virtual, last, atol=0, rtol=0)


def test_virtual_comparisons_given_to_tell_are_checked():
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], **T)
    X = torch.tensor([[0.2, 0.3], [0.6, 0.7]], **T)
    opt = PreferentialOptimizer(bounds, seed=0)
    with pytest.raises(InputTypeError, match="virtual must be"):
        opt.tell(0, options=X, virtual="inner beats face")
    with pytest.raises(InputDataError, match=r"virtual must be a k x 2 x 2"):
        opt.tell(0, options=X, virtual=[[0.9, 0.5], [1.0, 0.5]])
    with pytest.raises(InputDataError, match="virtual must lie in the box"):
        opt.tell(0, options=X, virtual=[[[0.9, 0.5], [1.5, 0.5]]])
    assert opt.history == []  # nothing told
    off = PreferentialOptimizer(bounds, seed=0, boundary_step=None)
    with pytest.raises(InputDataError, match="boundary_step"):
        off.tell(0, options=X, virtual=[[[0.9, 0.5], [1.0, 0.5]]])
    assert off.pending_virtual is None


@pytest.mark.parametrize("strategy, q, seed", [("qeubo", 3, 0), ("eubo", 2, 0)])
def test_no_question_is_asked_on_a_face_after_the_rounds(strategy, q, seed):
    # early questions, under a model close to its prior, can still propose
    # options on faces after every round (qEUBO, seed 0: three corners at
    # the first model question); those are asked a step inside, with the
    # virtual comparisons of the faces they were proposed on
    box = torch.tensor([[0.0, 0.0], [1.0, 1.0]], **T)
    opt = PreferentialOptimizer(
        box, strategy=strategy, q=q, seed=seed, acqf_options={**SMALL, "mc_samples": 64}
    )
    for k in range(4):
        X = opt.ask()
        if k >= opt.initial_random:
            assert not ((X <= 1e-4) | (X >= 1 - 1e-4)).any()
        if k == opt.initial_random:  # the proposals' comparisons are kept
            assert opt.pending_virtual is not None
        opt.tell(int((-((X - 0.3) ** 2).sum(-1)).argmax()))


def test_options_on_faces_move_a_step_inside_every_face_they_lie_on():
    Z = torch.tensor([[0.0, 0.3, 1.0], [0.5, 0.5, 0.5], [1.0, 1e-9, 0.4]], **T)
    moved = off_faces(Z, torch.tensor([True, True, False]), step=0.1)
    expected = torch.tensor([[0.1, 0.3, 1.0], [0.5, 0.5, 0.5], [0.9, 0.1, 0.4]], **T)
    torch.testing.assert_close(moved, expected, atol=0, rtol=0)
    assert moved is not Z and Z[0, 0] == 0.0  # a copy


def test_ask_off_faces_recomputes_then_moves_a_step_inside():
    # a strategy that keeps proposing a corner: asked ROUNDS + 1 times, a
    # round's comparisons each time, then moved a step inside (unless the
    # rule refuses the move)
    box = DesignBox(torch.tensor([[0.0, 0.0], [10.0, 1.0]], dtype=torch.float64))
    corner = torch.tensor([[10.0, 0.5], [5.0, 0.5]], dtype=torch.float64)
    asks, proposed = [], []

    def ask():
        asks.append(1)
        return corner.clone(), False

    for allow, want in ((True, 9.0), (False, 10.0)):
        asks.clear(), proposed.clear()
        question, fallback = ask_off_faces(
            ask, proposed.extend, lambda new, a=allow: a, box, DEFAULT_STEP
        )
        assert len(asks) == ROUNDS + 1 and len(proposed) == ROUNDS + 1
        assert not fallback and question[0, 0].item() == pytest.approx(want)
        inner, face = proposed[0]
        assert inner.tolist() == pytest.approx([9.0, 0.5])
        assert face.tolist() == [10.0, 0.5]
    # a random fallback ends the rounds at once
    question, fallback = ask_off_faces(
        lambda: (corner.clone(), True), proposed.extend, lambda n: True, box, 0.1
    )
    assert fallback and torch.equal(question, corner)
