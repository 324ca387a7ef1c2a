"""``prefbo.utils.checks``: one rule, wrong type -> InputTypeError, wrong value ->
InputDataError, messages naming the argument, what was expected and what came."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.checks import (
    check_float,
    check_int,
    check_nonneg_float,
    check_positive_float,
    check_seed,
    describe,
)


def test_check_int_accepts_python_and_numpy_integers():
    assert check_int("n", 3) == 3
    assert check_int("n", 0, 0) == 0
    out = check_int("n", np.int64(5), 1)
    assert out == 5 and type(out) is int
    assert check_int("n", None, allow_none=True) is None
    assert check_int("n", -7) == -7


@pytest.mark.parametrize(
    "value, got",
    [
        (2.5, "float 2.5"),
        (2.0, "float 2.0"),
        (True, "bool True"),
        ("3", "str '3'"),
        (None, "None"),
        (torch.tensor(3), r"a torch.int64 tensor of shape \(\)"),
    ],
)
def test_check_int_wrong_types_are_type_errors(value, got):
    with pytest.raises(InputTypeError, match=rf"^n must be an int >= 1; got {got}\.$"):
        check_int("n", value, 1)


def test_check_int_values_below_the_minimum_are_data_errors():
    with pytest.raises(InputDataError, match=r"^n must be an int >= 1; got n=0\.$"):
        check_int("n", 0, 1)
    with pytest.raises(InputDataError, match=r"^k must be an int >= -2; got k=-3\.$"):
        check_int("k", np.int32(-3), -2)
    with pytest.raises(
        InputTypeError, match=r"^seed must be None or an int; got str 'a'\.$"
    ):
        check_int("seed", "a", allow_none=True)
    with pytest.raises(InputTypeError, match=r"^q must be an int; got float 1\.5\.$"):
        check_int("q", 1.5)


def test_check_seed_range():
    assert check_seed("seed", 2**64 - 1) == 2**64 - 1
    assert check_seed("seed", -(2**63)) == -(2**63)
    assert check_seed("seed", None, allow_none=True) is None
    for bad in (2**64, -(2**63) - 1):
        with pytest.raises(
            InputDataError, match=r"seed must be in \[-2\*\*63, 2\*\*64 - 1\] \(a torch"
        ):
            check_seed("seed", bad)
    with pytest.raises(InputTypeError, match=r"^seed must be an int; got None\.$"):
        check_seed("seed", None)
    # every seed that passes is one torch.Generator takes
    torch.Generator().manual_seed(check_seed("seed", 2**64 - 1))
    torch.Generator().manual_seed(check_seed("seed", -(2**63)))


def test_check_float_accepts_reals_and_zero_dim_tensors():
    assert check_float("x", 1) == 1.0 and type(check_float("x", 1)) is float
    assert check_float("x", np.float32(0.5)) == 0.5
    assert check_float("x", torch.tensor(0.25, dtype=torch.float64)) == 0.25
    assert check_float("x", torch.tensor(2)) == 2.0
    assert check_float("x", -1e300) == -1e300
    assert check_float("x", None, allow_none=True) is None


@pytest.mark.parametrize(
    "value, got",
    [
        (True, "bool True"),
        (np.True_, "bool .*True.*"),
        ("0.1", "str '0.1'"),
        (1j, "complex 1j"),
        (torch.ones(2), r"a torch.float32 tensor of shape \(2,\)"),
        (torch.tensor(True), r"a torch.bool tensor of shape \(\)"),
        (None, "None"),
    ],
)
def test_check_float_wrong_types_are_type_errors(value, got):
    with pytest.raises(
        InputTypeError, match=rf"^x must be a finite float >= 0; got {got}\.$"
    ):
        check_nonneg_float("x", value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -0.5])
def test_check_float_non_finite_or_out_of_range_are_data_errors(value):
    with pytest.raises(
        InputDataError, match=rf"^x must be a finite float >= 0; got x={value!r}\.$"
    ):
        check_nonneg_float("x", value)


def test_check_float_interval_wording():
    cases = [
        ({}, 1.5, "a finite float", math.nan),
        ({"minimum": 0, "open_minimum": True}, 0.5, "a finite float > 0", 0.0),
        ({"maximum": 1}, 1.0, "a finite float <= 1", 1.5),
        ({"maximum": 1, "open_maximum": True}, 0.5, "a finite float < 1", 1.0),
        (
            {"minimum": 0, "maximum": 1, "open_maximum": True},
            0.0,
            r"a float in \[0, 1\)",
            1.0,
        ),
        (
            {"minimum": 0, "maximum": 1, "open_minimum": True},
            1.0,
            r"a float in \(0, 1\]",
            0.0,
        ),
        ({"minimum": 0.5, "maximum": 2.5}, 2.5, r"a float in \[0\.5, 2\.5\]", 3.0),
    ]
    for kwargs, good, expected, bad in cases:
        assert check_float("x", good, **kwargs) == good
        with pytest.raises(InputDataError, match=rf"^x must be {expected}; got x="):
            check_float("x", bad, **kwargs)
    with pytest.raises(
        InputTypeError, match=r"^x must be None or a float in \[0, 1\); got str"
    ):
        check_float("x", "a", minimum=0, maximum=1, open_maximum=True, allow_none=True)


def test_positive_and_nonneg_floats():
    assert check_positive_float("s", 0.1) == 0.1
    assert check_nonneg_float("s", 0) == 0.0
    assert check_positive_float("s", None, allow_none=True) is None
    with pytest.raises(
        InputDataError, match=r"^s must be a finite float > 0; got s=0\.0\.$"
    ):
        check_positive_float("s", 0)
    with pytest.raises(
        InputDataError, match=r"^s must be None or a finite float >= 0; got s=-1\.0\.$"
    ):
        check_nonneg_float("s", -1.0, allow_none=True)


def test_describe():
    assert describe("a") == "str 'a'"
    assert describe(None) == "None"
    assert describe(torch.zeros(2, 3)) == "a torch.float32 tensor of shape (2, 3)"
