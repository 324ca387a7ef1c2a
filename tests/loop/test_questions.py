"""The loop's questions: seeded, the kept winner, the EUBO maximisers."""

import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption

from prefbo.acquisition import PairMoments
from prefbo.acquisition.pair_moments import pair_moments
from prefbo.exceptions import InputDataError
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.test_functions import Branin

SMALL = {"num_restarts": 2, "raw_samples": 32, "maxiter": 20, "mc_samples": 32}
BOUNDS = Branin().bounds


@pytest.mark.parametrize(
    "model, strategy, q, keep",
    [
        ("laplace", "eubo", 2, False),
        ("laplace", "qeubo", 3, True),
        ("ep", "ts", 2, True),
        ("ep", "mes", 2, False),
        ("laplace", "mes", 2, True),
    ],
)
def test_same_seed_same_questions(model, strategy, q, keep, ask_and_tell):
    kw = dict(model=model, strategy=strategy, q=q, keep_winner=keep, seed=3)
    p = Branin()
    a = ask_and_tell(
        PreferentialOptimizer(BOUNDS, acqf_options=SMALL, **kw), range(4), p
    )
    b = ask_and_tell(
        PreferentialOptimizer(BOUNDS, acqf_options=SMALL, **kw), range(4), p
    )
    for x, y in zip(a, b):
        assert x.shape == (q, 2)
        assert torch.equal(x, y)
        assert ((x >= BOUNDS[0]) & (x <= BOUNDS[1])).all()
    c = ask_and_tell(
        PreferentialOptimizer(BOUNDS, acqf_options=SMALL, **{**kw, "seed": 4}), [0]
    )
    assert not torch.equal(a[0], c[0])


def test_keep_winner_reuses_the_winning_design():
    opt = PreferentialOptimizer(
        BOUNDS, strategy="eubo", keep_winner=True, acqf_options=SMALL
    )
    X0 = opt.ask()
    opt.tell(1)
    X1 = opt.ask()
    assert torch.equal(X1[0], X0[1])
    opt.tell(0)
    X2 = opt.ask()
    assert torch.equal(X2[0], X0[1])
    designs, comps = opt.data()
    assert designs.shape == (3, 2)  # the kept winner is one design
    assert comps.tolist() == [[1, 0], [1, 2]]


@pytest.mark.parametrize("keep", [False, True])
def test_eubo_optimizer_option(keep, ask_and_tell):
    # same answers, so the same model at the first acquired question
    kw = dict(strategy="eubo", keep_winner=keep, seed=2)
    fast = PreferentialOptimizer(
        BOUNDS, acqf_options={**SMALL, "optimizer": "torch"}, **kw
    )
    slow = PreferentialOptimizer(BOUNDS, acqf_options=SMALL, **kw)
    assert slow.config["acqf_options"]["optimizer"] == "scipy"  # the default
    ask_and_tell(fast, [0, 1])
    ask_and_tell(slow, [0, 1])
    X, Y = fast.ask(), slow.ask()
    assert X.shape == Y.shape == (2, 2)
    assert ((X >= BOUNDS[0]) & (X <= BOUNDS[1])).all()
    winner = fast.history[-1].options[1] if keep else None
    if keep:
        assert torch.equal(X[0], winner) and torch.equal(Y[0], winner)
    acqf = AnalyticExpectedUtilityOfBestOption(
        pref_model=fast.model,
        previous_winner=None if winner is None else winner.unsqueeze(0),
    )
    with torch.no_grad():
        if keep:
            v_fast, v_slow = acqf(X[1:].unsqueeze(0)), acqf(Y[1:].unsqueeze(0))
        else:
            v_fast, v_slow = acqf(X.unsqueeze(0)), acqf(Y.unsqueeze(0))
    assert v_fast >= v_slow - 1e-6
    with pytest.raises(InputDataError, match=r"acqf_options\['optimizer'\]"):
        PreferentialOptimizer(BOUNDS, acqf_options={"optimizer": "lbfgs"})


@pytest.mark.parametrize("model", ["laplace", "ep", "skew", "variational"])
def test_eubo_torch_optimizer_with_every_model(model, ask_and_tell):
    opts = {"num_samples": 64, "burnin": 20} if model == "skew" else None
    opt = PreferentialOptimizer(
        BOUNDS,
        model=model,
        acqf_options={**SMALL, "optimizer": "torch"},
        model_options=opts,
        seed=1,
    )
    asked = ask_and_tell(opt, [0, 1, 0], Branin())
    X = opt.ask()
    assert X.shape == (2, 2) and ((X >= BOUNDS[0]) & (X <= BOUNDS[1])).all()
    assert not torch.equal(X, asked[-1])
    # every loop model has the fast moments (not the model.posterior fallback)
    assert type(pair_moments(opt.model)) is not PairMoments


def test_the_questions_are_made_by_a_part_of_their_own(ask_and_tell):
    from prefbo.loop.fitted import FittedModels
    from prefbo.loop.question_maker import QuestionMaker
    from prefbo.loop.questions import Questions

    # EUBO on Branin proposes options on the faces: virtual comparisons
    opt = PreferentialOptimizer(BOUNDS, seed=3, acqf_options=SMALL)
    ask_and_tell(opt, [0, 1], problem=Branin())
    models = FittedModels(opt.settings, opt.box)
    for answer in opt.history:
        models.add(answer)
    maker = QuestionMaker(opt.box, opt.strategy, opt.q, opt.acqf_options)
    question, virtual, fallback = Questions(opt.settings, maker, models).make()
    assert torch.equal(question, opt.ask()) and not fallback
    assert virtual is not None and torch.equal(virtual, opt.pending_virtual)
    assert models.proposed == []  # the model of the answers alone again
