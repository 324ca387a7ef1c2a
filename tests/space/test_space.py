import itertools
import json

import pytest
import torch

from prefbo.cli import read_space
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.space import (
    Categorical,
    Continuous,
    Integer,
    Ordinal,
    Space,
    variable_from_dict,
)


@pytest.fixture
def space():
    return Space(
        [
            Categorical("font", ["serif", "sans", "mono"]),
            Integer("size", 8, 12),
            Continuous("contrast", 0.5, 2.0, log=True),
            Ordinal("weight", ["light", "regular", "bold"]),
        ]
    )


def test_encode_lays_the_columns_side_by_side_and_decode_inverts(space):
    assert space.dim == 3 + 1 + 1 + 1
    assert [(s.start, s.stop) for s in space.slices] == [(0, 3), (3, 4), (4, 5), (5, 6)]
    designs = [
        {"font": "sans", "size": 10, "contrast": 1.0, "weight": "bold"},
        {"font": "mono", "size": 8, "contrast": 2.0, "weight": "light"},
    ]
    X = space.encode(designs)
    expected = torch.tensor(
        [[0, 1, 0, 0.5, 0.5, 1.0], [0, 0, 1, 0.0, 1.0, 0.0]], dtype=torch.float64
    )
    torch.testing.assert_close(X, expected, rtol=0, atol=1e-15)
    assert space.decode(X) == designs
    assert space.encode(designs[0]).shape == (1, 6)  # a single dict


def test_snap_moves_discrete_columns_to_their_values_only(space):
    X = torch.tensor([[0.1, 0.7, 0.3, 0.6, 0.42, 0.4]], dtype=torch.float64)
    snapped = space.snap(X)
    expected = torch.tensor([[0, 1, 0, 0.5, 0.42, 0.5]], dtype=torch.float64)
    torch.testing.assert_close(snapped, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(space.snap(snapped), snapped)  # idempotent


def test_grid_enumerates_every_design_once(space):
    finite = Space([v for v in space.variables if v.levels is not None])
    assert finite.size == 3 * 5 * 3
    grid = finite.grid()
    assert grid.shape == (45, 5)
    designs = finite.decode(grid)
    expected = [
        dict(zip(finite.names, combo))
        for combo in itertools.product(*(v.values() for v in finite.variables))
    ]
    assert designs == expected
    with pytest.raises(InputDataError, match=r"45 designs, more than max_size=44"):
        finite.grid(max_size=44)
    assert space.size is None
    with pytest.raises(InputDataError, match=r"continuous variables: \['contrast'\]"):
        space.grid()


def test_sample_is_uniform_in_the_persons_view(space):
    X = space.sample(6000, seed=3)
    assert X.shape == (6000, 6) and bool(((X >= 0) & (X <= 1)).all())
    designs = space.decode(X)
    for v in space.variables:
        if v.levels is None:
            continue
        counts = [sum(d[v.name] == value for d in designs) for value in v.values()]
        expected = 6000 / v.levels
        assert all(abs(c - expected) < 5 * expected**0.5 for c in counts), v.name
    # log scale: the median of the contrast is the geometric mean of 0.5 and 2
    contrast = torch.tensor([d["contrast"] for d in designs])
    assert abs(contrast.median().item() - 1.0) < 0.05
    torch.testing.assert_close(space.sample(6000, seed=3), X, rtol=0, atol=0)


def test_json_round_trip_and_older_space_files(space, tmp_path):
    path = tmp_path / "space.json"
    path.write_text(json.dumps(space.to_dict()))
    assert Space.read(path) == space
    old = tmp_path / "old.json"
    old.write_text(
        json.dumps(
            {
                "variables": [
                    {"name": "a", "lower": 0, "upper": 1},
                    {"name": "b", "lower": -2, "upper": 5},
                ]
            }
        )
    )
    read = Space.read(old)
    names, bounds = read_space(old)  # the CLI's reader of the same file
    assert read.names == names
    assert [[v.lower for v in read.variables], [v.upper for v in read.variables]] == (
        bounds
    )


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda s: s.encode([{"font": "sans"}]), InputDataError, r"design 0 must name"),
        (
            lambda s: s.encode(
                [{"font": "sans", "size": 9, "contrast": 1.0, "weight": "bold", "x": 1}]
            ),
            InputDataError,
            r"unknown \['x'\]",
        ),
        (lambda s: s.encode("font"), InputTypeError, r"designs must be a dict"),
        (lambda s: s.encode([3]), InputTypeError, r"design 0 must be a dict"),
        (lambda s: s.decode(torch.zeros(2, 5)), InputDataError, r"must be n x 6"),
        (
            lambda s: s.decode(torch.full((1, 6), 1.5)),
            InputDataError,
            r"unit cube .* 1.5 at row 0, column 0",
        ),
        (lambda s: s.decode([0.0] * 6), InputTypeError, r"X must be a real tensor"),
        (lambda s: s.sample(0), InputDataError, r"n must be an int >= 1"),
    ],
)
def test_bad_input_raises_typed_errors(space, call, error, message):
    with pytest.raises(error, match=message):
        call(space)


def test_bad_spaces_are_refused(tmp_path):
    with pytest.raises(InputDataError, match=r"repeated: \['x'\]"):
        Space([Continuous("x", 0.0, 1.0), Integer("x", 0, 2)])
    with pytest.raises(InputDataError, match=r"at least one variable"):
        Space([])
    with pytest.raises(InputTypeError, match=r"must be Variable objects"):
        Space([{"name": "x"}])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputDataError, match=r"could not be read as JSON"):
        Space.read(bad)
    with pytest.raises(InputDataError, match=r'\{"variables": \[...\]\}'):
        Space.from_dict({"vars": []})


def test_a_log_scale_integer_is_sampled_uniformly_in_its_logarithm():
    # 1..1024 on a log scale: half the draws at most 32 (uniform in value
    # gave 3 %), every draw an integer of the range
    space = Space([Integer("batch", 1, 1024, log=True)])
    values = [d["batch"] for d in space.decode(space.sample(4000, seed=0))]
    assert all(isinstance(v, int) and 1 <= v <= 1024 for v in values)
    assert 0.45 < sum(v <= 32 for v in values) / len(values) < 0.55


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"type": ["a"], "name": "x"}, r"type must be one of .*got \['a'\]"),
        ({"type": "integer", "name": "x", "lo": 1}, r"an integer variable's fields"),
    ],
)
def test_bad_json_entries_name_what_is_wrong(entry, message):
    with pytest.raises(InputDataError, match=message):
        variable_from_dict(entry)
