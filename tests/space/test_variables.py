import math

import numpy as np
import pytest

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.space import (
    Categorical,
    Continuous,
    Integer,
    Ordinal,
    variable_from_dict,
)


def test_continuous_linear_and_log_scales_against_numpy():
    lin = Continuous("sweetness", -2.0, 6.0)
    assert lin.encode(0.0) == [0.25]
    assert lin.decode([0.25]) == 0.0
    log = Continuous("rate", 1e-4, 1e-1, log=True)
    # equal steps of the column are equal ratios: numpy's geomspace
    grid = np.geomspace(1e-4, 1e-1, 7)
    cols = [log.encode(float(v))[0] for v in grid]
    np.testing.assert_allclose(cols, np.linspace(0, 1, 7), atol=1e-12)
    np.testing.assert_allclose([log.decode([c]) for c in cols], grid, rtol=1e-12)
    # the bounds map to the cube's ends exactly, and back
    assert log.encode(1e-4) == [0.0] and log.encode(1e-1) == [1.0]
    assert log.decode([0.0]) == 1e-4 and log.decode([1.0]) == 1e-1


def test_integer_decodes_to_the_nearest_in_the_columns():
    k = Integer("servings", 1, 5)
    assert k.levels == 5 and k.values() == [1, 2, 3, 4, 5]
    assert [k.encode(v)[0] for v in k.values()] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert k.decode([0.37]) == 2 and k.decode([0.38]) == 3
    assert k.decode([0.375]) == 2  # a tie goes to the smaller
    # on a log scale "nearest" is nearest in the column, i.e. in ratio
    g = Integer("batch", 1, 100, log=True)
    u = math.log(10.4) / math.log(100)  # between 10 and 11, nearer 10 in ratio
    assert g.decode([u]) == 10
    for v in (1, 7, 10, 99, 100):
        assert g.decode(g.encode(v)) == v


def test_ordinal_is_evenly_spaced_whatever_its_values():
    o = Ordinal("spice", ["none", "mild", "hot", "very hot"])
    assert [o.encode(v)[0] for v in o.values()] == [0.0, 1 / 3, 2 / 3, 1.0]
    assert o.decode([0.5]) == "hot" and o.decode([0.49]) == "mild"
    n = Ordinal("size", [1, 2, 10])
    assert n.encode(10) == [1.0] and n.decode([0.5]) == 2


def test_categorical_is_one_hot_and_decodes_the_largest_column():
    c = Categorical("font", ["serif", "sans", "mono"])
    assert c.width == 3 and c.levels == 3
    assert c.encode("sans") == [0.0, 1.0, 0.0]
    assert c.decode([0.2, 0.1, 0.7]) == "mono"
    assert c.decode([0.5, 0.5, 0.1]) == "serif"  # the first of equal ones
    with pytest.raises(InputDataError, match=r"font: 3 model columns are needed"):
        c.decode([1.0, 0.0])


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: Continuous("x", 1.0, 1.0), InputDataError, r"x: lower < upper"),
        (lambda: Continuous("x", 0.0, 1.0, log=True), InputDataError, r"lower > 0"),
        (lambda: Continuous("x", "0", 1.0), InputTypeError, r"x: lower must be a"),
        (lambda: Continuous("x", 0.0, math.inf), InputDataError, r"x: upper must"),
        (lambda: Continuous("x", 0.0, 1.0, log=1), InputTypeError, r"log must be"),
        (lambda: Continuous("", 0.0, 1.0), InputTypeError, r"non-empty str"),
        (lambda: Integer("k", 0.0, 3), InputTypeError, r"k: lower must be an int"),
        (lambda: Ordinal("o", ["a"]), InputDataError, r"two distinct values"),
        (lambda: Ordinal("o", ["a", "a"]), InputDataError, r"two distinct values"),
        (lambda: Ordinal("o", "ab"), InputTypeError, r"values must be a list"),
        (lambda: Categorical("c", ["a", None]), InputTypeError, r"str or a number"),
        (lambda: Categorical("c", [1.0, math.nan]), InputDataError, r"finite"),
    ],
)
def test_bad_definitions_raise_typed_errors_naming_the_variable(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(
    "variable, value, error, message",
    [
        (Continuous("x", 0.0, 1.0), 1.5, InputDataError, r"x: the value must lie in"),
        (Continuous("x", 0.0, 1.0), math.nan, InputDataError, r"x: the value must"),
        (Continuous("x", 0.0, 1.0), "0.5", InputTypeError, r"x: the value must be a"),
        (Integer("k", 0, 3), 1.0, InputTypeError, r"k: the value must be an int"),
        (Integer("k", 0, 3), True, InputTypeError, r"k: the value must be an int"),
        (Integer("k", 0, 3), 4, InputDataError, r"k: the value must lie in"),
        (Ordinal("o", ["a", "b"]), "c", InputDataError, r"must be one of"),
        (Categorical("c", ["a", "b"]), ["a"], InputTypeError, r"must be one of"),
    ],
)
def test_bad_values_raise_typed_errors_naming_the_variable(
    variable, value, error, message
):
    with pytest.raises(error, match=message):
        variable.encode(value)


@pytest.mark.parametrize("column", [-0.1, 1.2, math.nan])
def test_columns_outside_the_unit_interval_are_refused(column):
    with pytest.raises(InputDataError, match=r"x: a model column must"):
        Continuous("x", 0.0, 1.0).decode([column])


@pytest.mark.parametrize(
    "variable",
    [
        Continuous("x", -1.0, 2.5),
        Continuous("r", 1e-3, 10.0, log=True),
        Integer("k", -3, 7),
        Integer("b", 2, 512, log=True),
        Ordinal("o", ["low", "mid", "high"]),
        Categorical("c", ["red", 3, "blue"]),
    ],
)
def test_json_form_round_trips(variable):
    again = variable_from_dict(variable.to_dict())
    assert again == variable and again.to_dict() == variable.to_dict()


def test_json_form_without_a_type_is_continuous_and_bad_forms_are_named():
    v = variable_from_dict({"name": "x", "lower": 0, "upper": 2})
    assert v == Continuous("x", 0.0, 2.0)
    with pytest.raises(InputDataError, match=r"type must be one of .*'spline'"):
        variable_from_dict({"type": "spline", "name": "x"})
    with pytest.raises(InputDataError, match=r"integer variable's fields do not fit"):
        variable_from_dict({"type": "integer", "name": "k", "lower": 0})
    with pytest.raises(InputTypeError, match=r"a variable must be a JSON object"):
        variable_from_dict(["x", 0, 1])


# ------------------------------------------------------------ wide integers
def test_an_integer_wider_than_float64s_exact_range_is_refused_by_name():
    with pytest.raises(
        InputDataError,
        match=r"id: upper - lower must be at most 2\*\*53 = 9007199254740992 .*got "
        r"upper - lower = 9223372036854775807",
    ):
        Integer("id", 0, 2**63 - 1)
    with pytest.raises(InputDataError, match=r"seed: upper - lower must be at most"):
        variable_from_dict(
            {"type": "integer", "name": "seed", "lower": -(2**62), "upper": 2**62}
        )


def test_an_integer_as_wide_as_the_limit_round_trips_exactly():
    k = Integer("k", -(2**52), 2**52)  # 2**53 + 1 levels
    assert k.levels == 2**53 + 1
    for v in (-(2**52), -(2**52) + 1, -1, 0, 1, 3**32, 2**52 - 1, 2**52):
        assert k.decode(k.encode(v)) == v, v
    # the neighbours of the top level are one float apart in the column
    assert k.encode(2**52 - 1) < k.encode(2**52) == [1.0]


def test_an_integer_far_from_zero_is_exact():
    # bounds beyond 2**53 with a small span: integer arithmetic, not floats
    k = Integer("ticket", 10**18, 10**18 + 4)
    assert k.encode(10**18 + 1) == [0.25] and k.decode([0.26]) == 10**18 + 1
    assert [k.decode(k.encode(v)) for v in k.values()] == k.values()
    with pytest.raises(InputDataError, match=r"ticket: the value must lie in"):
        k.encode(10**18 + 5)


def test_a_log_scale_integer_with_levels_closer_than_the_column_resolves_is_refused():
    with pytest.raises(
        InputDataError,
        match=r"big: a log-scale integer's upper must be at most 2\*\*40",
    ):
        Integer("big", 1, 2**41, log=True)
    k = Integer("ok", 1, 2**40, log=True)
    for v in (1, 2, 3, 2**40 - 2, 2**40 - 1, 2**40):
        assert k.decode(k.encode(v)) == v, v
