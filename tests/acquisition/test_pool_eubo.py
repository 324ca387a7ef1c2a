import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption

from prefbo.acquisition import PairwiseBALD
from prefbo.acquisition.pool_eubo import best_pool_pair
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.models import PairwiseLaplaceGP
from prefbo.utils.testing import make_pairwise_data


@pytest.fixture(scope="module")
def model_and_pool():
    X, comp, _ = make_pairwise_data(12, 30, d=2, seed=1)
    model = PairwiseLaplaceGP(X, comp).eval()
    g = torch.Generator().manual_seed(2)
    pool = torch.rand(23, 2, generator=g, dtype=torch.float64)
    return model, pool


def _brute_force(model, pool, banned=()):
    # BoTorch's own EUBO on every pair, one by one
    acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    best, value = None, -float("inf")
    for a in range(len(pool)):
        for b in range(a + 1, len(pool)):
            if (a, b) in banned or bool((pool[a] == pool[b]).all()):
                continue
            v = acqf(pool[[a, b]].unsqueeze(0)).item()
            if v > value:
                best, value = (a, b), v
    return best, value


@pytest.mark.parametrize("block_size", [1024, 7, 1])
def test_the_best_pair_is_botorchs_best_of_all_pairs(model_and_pool, block_size):
    model, pool = model_and_pool
    (a, b), value = _brute_force(model, pool)
    pair, got = best_pool_pair(model, pool, block_size=block_size)
    assert pair.tolist() == [a, b]
    assert got.item() == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_excluded_and_identical_pairs_are_never_proposed(model_and_pool):
    model, pool = model_and_pool
    (a, b), _ = _brute_force(model, pool)
    pool = torch.cat([pool, pool[a : a + 1]])  # a copy of design a: never paired
    exclude = torch.tensor([[b, a]])  # either order
    expected, value = _brute_force(model, pool, banned={(a, b)})
    pair, got = best_pool_pair(model, pool, exclude=exclude, block_size=5)
    assert tuple(pair.tolist()) == expected and expected != (a, b)
    assert got.item() == pytest.approx(value, rel=1e-9)
    assert pair.tolist() != [a, len(pool) - 1]


def test_no_pair_left_is_a_clear_error(model_and_pool):
    model, pool = model_and_pool
    twins = torch.cat([pool[:1], pool[:1], pool[1:2]])
    with pytest.raises(InputDataError, match=r"no pair of the pool is left"):
        best_pool_pair(model, twins, exclude=torch.tensor([[0, 2], [1, 2]]))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"X": torch.rand(1, 2, dtype=torch.float64)}, InputDataError, r"N >= 2"),
        ({"X": [[0.0, 1.0]]}, InputTypeError, r"X must be a real N x d tensor"),
        (
            {"X": torch.tensor([[0.0, 1.0], [float("nan"), 0.0]])},
            InputDataError,
            r"finite",
        ),
        ({"exclude": torch.tensor([[0.0, 1.0]])}, InputTypeError, r"integer tensor"),
        ({"exclude": torch.tensor([0, 1])}, InputDataError, r"k x 2"),
        ({"exclude": torch.tensor([[0, 99]])}, InputDataError, r"indices in \[0, 22\]"),
        ({"block_size": 0}, InputDataError, r"block_size must be an int >= 1"),
        ({"min_information": "0.1"}, InputTypeError, r"min_information must be"),
        ({"min_information": -0.1}, InputDataError, r"min_information must be"),
    ],
)
def test_bad_input_raises_typed_errors(model_and_pool, kwargs, error, message):
    model, pool = model_and_pool
    kwargs = {"X": pool, **kwargs}
    with pytest.raises(error, match=message):
        best_pool_pair(model, **kwargs)


@pytest.mark.parametrize("block_size", [1024, 5])
def test_min_information_keeps_the_best_pair_whose_answer_informs(
    model_and_pool, block_size
):
    model, pool = model_and_pool
    i, j = torch.triu_indices(len(pool), len(pool), offset=1)
    pairs = torch.stack([pool[i], pool[j]], dim=-2)  # p x 2 x d
    acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    with torch.no_grad():
        values, info = acqf(pairs), PairwiseBALD(model)(pairs)
    best = int(values.argmax())
    floor = float(info[best]) + 1e-3  # the best pair informs too little
    enough = info >= floor
    assert 0 < int(enough.sum()) < len(pairs)
    k = int(torch.where(enough, values, -torch.inf).argmax())
    pair, got = best_pool_pair(
        model, pool, block_size=block_size, min_information=floor
    )
    assert pair.tolist() == [int(i[k]), int(j[k])]
    assert got.item() == pytest.approx(values[k].item(), rel=1e-9)
    with pytest.raises(InputDataError, match=r"or carries under 10.0 nats"):
        best_pool_pair(model, pool, min_information=10.0)
