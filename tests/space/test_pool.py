import json

import numpy as np
import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.space import Continuous, ItemPool, Space, variable_from_dict


@pytest.fixture
def wines():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(40, 3)) * [1.0, 10.0, 0.1] + [12.0, 50.0, 3.3]
    return ItemPool("wine", [f"w{i}" for i in range(40)], features, ["a", "b", "c"])


def test_features_are_min_max_scaled_over_the_pool(wines):
    F = wines.features.numpy()
    scaled = (F - F.min(0)) / (F.max(0) - F.min(0))
    np.testing.assert_allclose(wines.encoded().numpy(), scaled, rtol=0, atol=1e-15)
    assert wines.encode("w7") == pytest.approx(scaled[7].tolist(), abs=1e-15)
    assert wines.width == 3 and wines.levels == 40


def test_decode_is_the_nearest_item_by_brute_force(wines):
    rng = np.random.default_rng(1)
    scaled = wines.encoded().numpy()
    for u in rng.uniform(size=(50, 3)):
        nearest = int(np.argmin(((scaled - u) ** 2).sum(1)))
        assert wines.decode(u.tolist()) == f"w{nearest}"
    for i in (0, 13, 39):  # every item decodes to itself
        assert wines.decode(wines.encode(f"w{i}")) == f"w{i}"


def test_a_pool_in_a_space_with_another_variable(wines):
    space = Space([wines, Continuous("chill", 4.0, 12.0)])
    assert space.dim == 4 and space.size is None
    X = space.encode([{"wine": "w3", "chill": 8.0}])
    assert space.decode(X) == [{"wine": "w3", "chill": 8.0}]
    alone = Space([wines])
    grid = alone.grid()
    assert grid.shape == (40, 3)
    assert [d["wine"] for d in alone.decode(grid)] == wines.values()
    torch.testing.assert_close(grid, wines.encoded())


def test_json_round_trip(wines, tmp_path):
    again = variable_from_dict(json.loads(json.dumps(wines.to_dict())))
    assert again == wines
    space = Space([wines])
    path = tmp_path / "space.json"
    path.write_text(json.dumps(space.to_dict()))
    assert Space.read(path) == space


def test_a_constant_feature_is_kept_at_zero():
    pool = ItemPool("dish", [1, 2, 3], [[1.0, 5.0], [2.0, 5.0], [4.0, 5.0]])
    assert pool.encoded()[:, 1].tolist() == [0.0, 0.0, 0.0]
    assert pool.encode(2) == pytest.approx([1 / 3, 0.0])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"ids": ["a", "a"], "features": [[0.0], [1.0]]}, InputDataError, "distinct"),
        ({"ids": ["a"], "features": [[0.0]]}, InputDataError, "at least two items"),
        ({"ids": "ab", "features": [[0.0], [1.0]]}, InputTypeError, "ids must be"),
        (
            {"ids": [1.5, 2], "features": [[0.0], [1.0]]},
            InputTypeError,
            "str or an int",
        ),
        ({"ids": ["a", "b"], "features": [[0.0, 1.0]]}, InputDataError, r"2 x k"),
        ({"ids": ["a", "b"], "features": [[0.0], [np.nan]]}, InputDataError, "finite"),
        ({"ids": ["a", "b"], "features": "xy"}, InputTypeError, "table of numbers"),
        (
            {"ids": ["a", "b", "c"], "features": [[0.0, 1.0], [2.0, 3.0], [0.0, 1.0]]},
            InputDataError,
            r"items 'a' and 'c' have the same features",
        ),
        (
            {"ids": ["a", "b"], "features": [[0.0], [1.0]], "feature_names": ["x", 2]},
            InputDataError,
            "feature_names must be 1 strings",
        ),
    ],
)
def test_bad_pools_raise_typed_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        ItemPool("pool", **kwargs)


def test_bad_values_raise_typed_errors(wines):
    with pytest.raises(InputDataError, match=r"no item has the id 'w40' \(40 items\)"):
        wines.encode("w40")
    with pytest.raises(InputTypeError, match=r"must be an item id"):
        wines.encode(3.0)
    with pytest.raises(InputDataError, match=r"3 model columns are needed; got 2"):
        wines.decode([0.5, 0.5])


def test_a_large_pool_is_checked_for_twins_in_linear_memory():
    # the duplicate check sorts the rows (an n x n distance table made a
    # 10,000-item pool take 1.2 GB, and ids were counted in O(n^2) time)
    g = torch.Generator().manual_seed(0)
    big = torch.rand(20_000, 3, dtype=torch.float64, generator=g)
    assert ItemPool("song", list(range(20_000)), big.tolist()).levels == 20_000
    big[12_345] = big[7]
    with pytest.raises(InputDataError, match=r"items 7 and 12345 have the same"):
        ItemPool("song", list(range(20_000)), big.tolist())
