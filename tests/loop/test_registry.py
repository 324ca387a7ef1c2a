import pytest

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.loop.registry import Registry


def _registry():
    return Registry(
        "colour", "paint", "an int", lambda e: isinstance(e, int), {"red": 1}
    )


def test_entries_by_name_in_order_of_registration():
    r = _registry()
    r.register("blue", 2)
    assert r.names() == ("red", "blue") and r.get("blue") == 2
    assert _registry().names() == ("red",)  # the built-ins are copied, not shared


def test_bad_registrations_and_lookups_are_named():
    r = _registry()
    with pytest.raises(InputTypeError, match=r"^paint must be an int; got 'x'\.$"):
        r.register("green", "x")
    with pytest.raises(InputTypeError, match=r"^name must be a str; got int\.$"):
        r.register(3, 3)
    with pytest.raises(InputDataError, match=r"^colour 'red' is already registered\.$"):
        r.register("red", 5)
    with pytest.raises(
        InputDataError,
        match=r"^colour must be one of \('red',\); got 'green' \(one of your own "
        r"must be registered first, also before resuming a log that names it\)\.$",
    ):
        r.get("green")
    with pytest.raises(InputTypeError, match=r"colour must be a str .*got list"):
        r.get(["red"])
