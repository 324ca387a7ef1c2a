import math

import numpy as np
import pytest

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.space import (
    Circular,
    Continuous,
    Integer,
    variable_from_dict,
)


def test_a_circular_variable_is_a_point_on_a_circle_in_two_columns():
    hue = Circular("hue", 0.0, 360.0)
    assert hue.width == 2 and hue.levels is None
    assert hue.encode(0.0) == [1.0, 0.5] == hue.encode(360.0)  # upper wraps to lower
    np.testing.assert_allclose(hue.encode(90.0), [0.5, 1.0], atol=1e-15)
    np.testing.assert_allclose(hue.encode(180.0), [0.0, 0.5], atol=1e-15)
    np.testing.assert_allclose(hue.encode(270.0), [0.5, 0.0], atol=1e-15)
    for v in (0.0, 1.0, 45.0, 179.5, 300.0, 359.0):
        assert hue.decode(hue.encode(v)) == pytest.approx(v, abs=1e-12)
    # decoding takes the direction from the centre: any point of the square
    assert hue.decode([1.0, 1.0]) == pytest.approx(45.0)
    assert hue.decode([0.9, 0.5 - 1e-13]) == pytest.approx(360.0, abs=1e-9)
    # a direction a rounding below 2π: the lower bound, never the upper one
    assert hue.decode([0.9, 0.5 - 2**-54]) == 0.0
    assert hue.decode([0.5, 0.5]) == 0.0  # the centre: the lower bound
    # 359 and 1 are as close in the columns as 1 and 3
    a, b, c = (np.array(hue.encode(v)) for v in (359.0, 1.0, 3.0))
    assert np.linalg.norm(a - b) == pytest.approx(np.linalg.norm(b - c), rel=1e-12)
    # the chord: |x - x'| = sin(Δθ / 2), a diameter 1 like a continuous column
    assert np.linalg.norm(a - b) == pytest.approx(math.sin(math.radians(1.0)))


def test_a_circular_variable_spreads_its_values_around_the_circle():
    assert Circular("h", -180.0, 180.0).spread(4) == [-180.0, -90.0, 0.0, 90.0]
    assert Continuous("x", 0.0, 1.0).spread(3) == [0.0, 0.5, 1.0]
    assert Integer("k", 0, 10**7).spread(3) == [0, 5 * 10**6, 10**7]
    assert Integer("k", 0, 2).spread(21) == [0, 1, 2]  # distinct values only


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: Circular("h", 360.0, 0.0), InputDataError, r"h: lower < upper"),
        (lambda: Circular("h", 0.0, math.inf), InputDataError, r"h: upper must be"),
        (lambda: Circular("h", "0", 1.0), InputTypeError, r"h: lower must be a"),
        (
            lambda: Circular("h", 0, 360).encode(361.0),
            InputDataError,
            r"h: the value must lie in \[0, 360\]",
        ),
        (
            lambda: Circular("h", 0, 360).encode("red"),
            InputTypeError,
            r"h: the value must be a finite number",
        ),
        (
            lambda: Circular("h", 0, 360).decode([0.5]),
            InputDataError,
            r"h: 2 model columns are needed; got 1",
        ),
        (
            lambda: Circular("h", 0, 360).decode([0.5, 1.5]),
            InputDataError,
            r"h: a model column must lie in \[0, 1\]",
        ),
    ],
)
def test_bad_circular_definitions_and_values_are_named(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_a_circular_json_form_round_trips():
    hue = Circular("hue", 0.0, 360.0)
    assert hue.to_dict() == {
        "type": "circular",
        "name": "hue",
        "lower": 0.0,
        "upper": 360.0,
    }
    assert variable_from_dict(hue.to_dict()) == hue
    assert (
        variable_from_dict(
            {"type": "circular", "name": "hue", "lower": 0, "upper": 360}
        )
        == hue
    )
