import itertools
import json
import tracemalloc

import pytest
import torch

from prefbo.cli import read_space
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.loop.boundary import face_columns, face_comparisons
from prefbo.models import PairwiseLaplaceGP
from prefbo.serve.config import StudyFileError, load_study
from prefbo.space import (
    Categorical,
    Circular,
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


# ------------------------------------------------------------ wide integers
def test_a_wide_integer_is_sampled_without_listing_its_levels(monkeypatch):
    def listing(self):
        raise AssertionError(f"{self.name}: values() listed {self.levels} levels")

    monkeypatch.setattr(Integer, "values", listing)
    space = Space([Integer("count", 0, 10**7), Continuous("x", 0.0, 1.0)])
    tracemalloc.start()
    try:
        X = space.sample(1000, seed=0)
        designs = space.decode(X)
        again = space.encode(designs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20  # listing 10**7 ints takes ~400 MB
    counts = [d["count"] for d in designs]
    assert all(isinstance(c, int) and 0 <= c <= 10**7 for c in counts)
    assert abs(sum(counts) / 1000 - 5e6) < 5 * 10**7 / (12 * 1000) ** 0.5
    torch.testing.assert_close(again, X, rtol=0, atol=0)


def test_an_integer_as_wide_as_the_limit_is_sampled_exactly():
    space = Space([Integer("k", -(2**52), 2**52)])
    X = space.sample(500, seed=1)
    values = [d["k"] for d in space.decode(X)]
    assert all(isinstance(v, int) and -(2**52) <= v <= 2**52 for v in values)
    assert len(set(values)) == 500  # 2**53 levels: repeats are ~1e-11 likely
    torch.testing.assert_close(space.encode([{"k": v} for v in values]), X)
    assert space.size == 2**53 + 1
    with pytest.raises(InputDataError, match=r"holds 9007199254740993 designs"):
        space.grid()


def test_a_study_file_with_a_too_wide_integer_stops_at_start_up(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(
        '[[space]]\nname = "seed"\ntype = "integer"\nlower = 0\n'
        "upper = 9223372036854775807\n"
    )
    with pytest.raises(
        StudyFileError,
        match=r"space\[0\] is not a variable: seed: upper - lower must be at most "
        r"2\*\*53",
    ):
        load_study(path)


def test_a_study_file_with_a_wide_integer_starts_and_samples(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(
        '[[space]]\nname = "count"\ntype = "integer"\nlower = 0\nupper = 10000000\n'
        '[[space]]\nname = "hue"\ntype = "circular"\nlower = 0\nupper = 360\n'
    )
    config = load_study(path)
    assert config.space.variables == [
        Integer("count", 0, 10**7),
        Circular("hue", 0.0, 360.0),
    ]
    X = config.space.sample(3, seed=0)
    assert X.shape == (3, 3) and config.space.decode(X)[0]["count"] <= 10**7


# ---------------------------------------------------------------- circular
def test_a_circular_variable_is_sampled_uniformly_in_its_angle():
    space = Space([Circular("hue", 0.0, 360.0), Continuous("x", 0.0, 1.0)])
    assert space.dim == 3 and space.size is None
    X = space.sample(4000, seed=0)
    # every sample lies on the circle of radius 1/2 about (1/2, 1/2)
    radius = (X[:, :2] - 0.5).norm(dim=-1)
    torch.testing.assert_close(radius, torch.full_like(radius, 0.5))
    hues = torch.tensor([d["hue"] for d in space.decode(X)])
    assert bool(((hues >= 0) & (hues < 360)).all())
    quarters = torch.bincount((hues // 90).long(), minlength=4)
    assert bool(((quarters - 1000).abs() < 5 * 1000**0.5).all())


def test_snap_puts_a_circular_variable_back_on_its_circle():
    space = Space([Circular("hue", 0.0, 360.0)])
    X = torch.tensor([[1.0, 1.0], [0.5, 0.2], [0.8, 0.5]], dtype=torch.float64)
    snapped = space.snap(X)
    r = 0.5 / 2**0.5
    expected = torch.tensor(
        [[0.5 + r, 0.5 + r], [0.5, 0.0], [1.0, 0.5]], dtype=torch.float64
    )
    torch.testing.assert_close(snapped, expected, rtol=0, atol=1e-15)
    torch.testing.assert_close(space.snap(snapped), snapped, rtol=0, atol=1e-15)


def test_a_circular_variable_has_no_faces_for_the_loops_virtual_comparisons():
    space = Space(
        [
            Continuous("x", 0.0, 1.0),
            Circular("hue", 0.0, 360.0),
            Integer("k", 0, 3),
        ]
    )
    assert face_columns(space, space.dim).tolist() == [True, False, False, False]
    # a hue of 0 encodes on the square's faces (1, 0.5) yet gets no comparison
    Z = space.encode([{"x": 0.5, "hue": 0.0, "k": 0}])
    assert face_comparisons(Z, face_columns(space, space.dim), 0.1) == []


def test_the_model_carries_a_preference_across_the_wrap():
    # a person whose best hue is 5: 358 and 12 are 7 degrees either side
    space = Space([Circular("hue", 0.0, 360.0)])
    hues = torch.linspace(0, 345, 24, dtype=torch.float64).tolist()
    X = space.encode([{"hue": h} for h in hues])
    utility = torch.cos(torch.deg2rad(torch.tensor(hues) - 5.0))
    pairs = torch.combinations(torch.arange(len(hues)), 2)
    win = utility[pairs[:, 0]] > utility[pairs[:, 1]]
    comparisons = torch.where(win.unsqueeze(-1), pairs, pairs.flip(-1))
    model = PairwiseLaplaceGP(X, comparisons)
    grid = torch.arange(0.0, 360.0, 1.0, dtype=torch.float64)
    with torch.no_grad():
        mean = model.posterior(space.encode([{"hue": h} for h in grid.tolist()]))
        mean = mean.mean.reshape(-1)
    assert abs(mean[358] - mean[12]) < 0.02 * (mean.max() - mean.min())
    best = float(grid[mean.argmax()])
    assert min(abs(best - 5.0), 360 - abs(best - 5.0)) <= 3.0
