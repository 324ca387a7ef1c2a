import io
import json

import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption

from prefbo import cli
from prefbo.exceptions import InputDataError, SessionLogError
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.repeats import MIN_INFORMATION, answer_information
from prefbo.loop.session import encode_record
from prefbo.loop.spaces import EXACT_MAX, random_designs, takes_exact
from prefbo.space import Categorical, Continuous, Integer, ItemPool, Ordinal, Space

SMALL = {"num_restarts": 2, "raw_samples": 32, "maxiter": 20, "mc_samples": 32}


def _mixed():
    return Space(
        [
            Categorical("font", ["serif", "sans", "mono"]),
            Integer("size", 8, 24),
            Continuous("contrast", 0.5, 2.0, log=True),
            Ordinal("weight", ["light", "regular", "bold"]),
        ]
    )


def _mixed_utility(design):
    font = {"serif": 0.0, "sans": 0.5, "mono": -0.3}[design["font"]]
    return font - ((design["size"] - 14) / 8) ** 2 - abs(design["contrast"] - 1.2)


def _pool(n=15, seed=0):
    g = torch.Generator().manual_seed(seed)
    features = torch.rand(n, 3, generator=g, dtype=torch.float64)
    ids = [f"dish{i}" for i in range(n)]
    return Space([ItemPool("dish", ids, features.tolist())]), features


def _assert_valid(space, X):
    # every option a design of the space: its encoding, values in their sets,
    # integers integral, no two options the same design
    designs = space.decode(X)
    torch.testing.assert_close(space.encode(designs), X, rtol=0, atol=1e-12)
    for d in designs:
        for v in space.variables:
            value = d[v.name]
            if v.levels is not None:
                assert value in v.values()
            if isinstance(v, Integer):
                assert isinstance(value, int)
    keys = [json.dumps(d, sort_keys=True) for d in designs]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize(
    "strategy, q, keep",
    [
        ("eubo", 2, False),
        ("ts", 2, True),
        ("qeubo", 3, False),
        ("bald", 2, False),
        ("mes", 2, True),
    ],
)
def test_a_mixed_space_loop_asks_only_valid_designs(strategy, q, keep):
    space = _mixed()
    opt = PreferentialOptimizer(
        space, strategy=strategy, q=q, keep_winner=keep, seed=1, acqf_options=SMALL
    )
    for _ in range(6):
        X = opt.ask()
        assert X.shape == (q, space.dim)
        _assert_valid(space, X)
        utilities = [_mixed_utility(d) for d in space.decode(X)]
        opt.tell(max(range(q), key=utilities.__getitem__))
    _assert_valid(space, opt.best()[0].unsqueeze(0))


def test_an_item_pool_question_is_botorchs_best_eubo_pair():
    space, features = _pool()
    utility = -((features - 0.4) ** 2).sum(-1)
    opt = PreferentialOptimizer(space, seed=2)
    assert takes_exact(opt.space, opt.strategy, opt.q, opt.keep_winner)
    for _ in range(4):
        X = opt.ask()
        a, b = (space.variables[0].index(d["dish"]) for d in space.decode(X))
        opt.tell(int(utility[b] > utility[a]))
    X = opt.ask()
    _assert_valid(space, X)
    # brute force: BoTorch's own EUBO on every pair of the pool's designs
    grid = space.grid()
    acqf = AnalyticExpectedUtilityOfBestOption(pref_model=opt.model)
    with torch.no_grad():
        values = {
            (i, j): acqf(grid[[i, j]].unsqueeze(0)).item()
            for i in range(len(grid))
            for j in range(i + 1, len(grid))
        }
    i, j = max(values, key=values.get)
    asked = sorted(space.variables[0].index(d["dish"]) for d in space.decode(X))
    assert asked == [i, j] or values[tuple(asked)] == pytest.approx(values[i, j])


def test_an_item_pool_loop_repeats_a_pair_only_while_its_answer_informs():
    # 4 items, 6 pairs, 10 answers: pairs come back, but never resolved ones
    # (an answer carrying under MIN_INFORMATION nats about the utility)
    space, features = _pool(n=4, seed=3)
    utility = features.sum(-1)
    likelihood = PairwiseProbitLikelihood(noise_std=0.05)
    opt = PreferentialOptimizer(space, seed=0, model_options={"likelihood": likelihood})
    seen = set()
    repeats = 0
    for _ in range(10):
        X = opt.ask()
        _assert_valid(space, X)
        a, b = (space.variables[0].index(d["dish"]) for d in space.decode(X))
        if (min(a, b), max(a, b)) in seen:
            repeats += 1
            assert answer_information(opt.model, X) >= MIN_INFORMATION
        seen.add((min(a, b), max(a, b)))
        opt.tell(int(utility[b] > utility[a]))
    assert repeats >= 4


def test_the_person_s_view_and_a_resumed_session(tmp_path):
    space = _mixed()
    log = tmp_path / "s.jsonl"
    opt = PreferentialOptimizer(space, seed=4, log_path=log, acqf_options=SMALL)
    for _ in range(3):
        designs = space.decode(opt.ask())
        opt.tell(0, options=designs)  # the person's view: dicts by name
    expected = opt.ask()
    opt.close()
    header = json.loads(log.read_text().splitlines()[0])
    assert header["config"]["bounds"] == space.to_dict()
    again = PreferentialOptimizer.resume(log, bounds=space)  # checked as stored
    assert again.space == space
    assert torch.equal(again.ask(), expected)


def test_options_that_are_not_designs_are_refused(tmp_path):
    space = _mixed()
    opt = PreferentialOptimizer(space, strategy="random", seed=0)
    X = opt.ask().clone()
    X[0, 3] = 0.37  # the integer's column between two sizes
    with pytest.raises(InputDataError, match=r"options row 0 is not a design"):
        opt.tell(0, options=X)
    with pytest.raises(InputDataError, match=r"'size'|size"):
        opt.tell(
            0,
            options=[
                {"font": "serif", "size": 30, "contrast": 1.0, "weight": "bold"},
                space.decode(X[1])[0],
            ],
        )
    log = tmp_path / "s.jsonl"
    with PreferentialOptimizer(space, strategy="random", log_path=log) as w:
        w.tell(1, options=w.ask())
    lines = log.read_text().splitlines()
    record = json.loads(lines[1])
    record["options"][0][3] = 0.37
    lines[1] = encode_record(record).rstrip("\n")
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionLogError, match=r"line 2 .*not a design"):
        PreferentialOptimizer.resume(log)


def test_a_space_with_fewer_designs_than_options_is_refused():
    tiny = Space([Categorical("colour", ["red", "blue"])])
    with pytest.raises(InputDataError, match=r"q=3 distinct designs.*only 2"):
        PreferentialOptimizer(tiny, strategy="random", q=3)
    X = random_designs(tiny, 2, seed=0)
    assert sorted(d["colour"] for d in tiny.decode(X)) == ["blue", "red"]


def test_exact_enumeration_is_used_up_to_its_measured_size():
    big = Space([Integer("a", 0, 99), Integer("b", 0, 99)])  # 10,000 designs
    small = Space([Integer("a", 0, 9), Categorical("c", ["x", "y"])])
    assert small.size <= EXACT_MAX < big.size
    assert takes_exact(small, "eubo", 2, False)
    assert not takes_exact(big, "eubo", 2, False)
    assert not takes_exact(small, "bald", 2, False)
    assert not takes_exact(small, "eubo", 2, True)
    assert not takes_exact(None, "eubo", 2, False)


def test_prefbo_session_runs_on_a_typed_space(tmp_path):
    path = tmp_path / "space.json"
    path.write_text(json.dumps(_mixed().to_dict()))
    log = tmp_path / "s.jsonl"
    out = io.StringIO()
    argv = ["session", "new", str(log), "--space", str(path), "--strategy", "random"]
    assert cli.main(argv, stdin=io.StringIO("1\n2\nq\n"), stdout=out) == 0
    text = out.getvalue()
    assert "font=" in text and "weight=" in text and "size=" in text
    assert "current best: font=" in text
    out = io.StringIO()
    rc = cli.main(["session", "resume", str(log)], stdin=io.StringIO("q\n"), stdout=out)
    assert rc == 0 and "2 answer(s) so far" in out.getvalue()


@pytest.mark.parametrize("strategy", ["random", "eubo", "ts"])
def test_a_kept_winner_is_never_asked_against_itself(strategy):
    # two designs: every question after the first must pair the kept
    # winner with the other one (random draws used to repeat the winner)
    space = Space([Categorical("c", ["a", "b"])])
    opt = PreferentialOptimizer(space, strategy=strategy, keep_winner=True, seed=0)
    for _ in range(6):
        X = opt.ask()
        _assert_valid(space, X)
        opt.tell(1)
