import warnings

import pytest

import prefbo.exceptions as exceptions
from prefbo.exceptions import (
    ComparisonGraphWarning,
    ConvergenceWarning,
    InfeasibleConstraintsError,
    InputDataError,
    InputTypeError,
    NumericalError,
    NumericalWarning,
    PrefboError,
    PrefboWarning,
    SessionLogError,
    SessionLogLockedError,
    SessionLogWarning,
    SettingsVersionError,
    UnsupportedError,
)


@pytest.mark.parametrize(
    "error, builtin",
    [
        (InputDataError, ValueError),
        (InfeasibleConstraintsError, ValueError),
        (SessionLogError, ValueError),
        (SettingsVersionError, ValueError),
        (InputTypeError, TypeError),
        (UnsupportedError, ValueError),
        (NumericalError, RuntimeError),
    ],
)
def test_each_error_is_a_prefbo_error_and_the_builtin_a_caller_catches(error, builtin):
    assert issubclass(error, PrefboError) and issubclass(error, builtin)
    with pytest.raises(builtin, match="x must be"):
        raise error("x must be an int; got str 'a'.")


def test_the_data_errors_are_input_data_errors_and_types_are_not_values():
    assert issubclass(InfeasibleConstraintsError, InputDataError)
    assert issubclass(SessionLogError, InputDataError)
    assert issubclass(SessionLogLockedError, SessionLogError)
    assert issubclass(SettingsVersionError, InputDataError)
    assert not issubclass(InputTypeError, ValueError)
    assert not issubclass(InputDataError, TypeError)
    assert not issubclass(UnsupportedError, InputDataError)
    assert not issubclass(NumericalError, ValueError)


def test_every_warning_is_a_prefbo_user_warning():
    for warning in (
        NumericalWarning,
        ConvergenceWarning,
        ComparisonGraphWarning,
        SessionLogWarning,
    ):
        assert issubclass(warning, PrefboWarning) and issubclass(warning, UserWarning)
        assert not issubclass(warning, PrefboError)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.warn("jitter 1e-8 added", warning, stacklevel=1)
        assert caught[0].category is warning


def test_every_public_class_is_an_error_or_a_warning():
    public = {
        name: value
        for name, value in vars(exceptions).items()
        if isinstance(value, type) and value.__module__ == exceptions.__name__
    }
    assert len(public) == 14
    for cls in public.values():
        assert issubclass(cls, (PrefboError, PrefboWarning))
