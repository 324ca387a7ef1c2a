import warnings

from botorch.exceptions.warnings import OptimizationWarning

from prefbo.exceptions import ConvergenceWarning, NumericalWarning
from prefbo.loop.fit_warnings import accept_optimizer_stops, expected_fit_warnings


def test_refits_accept_optimizer_stops_and_reemit_other_warnings():
    def message(category):
        return warnings.WarningMessage("m", category, "f.py", 1)

    # an L-BFGS-B line-search stop is the fit (no retry from random priors)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert accept_optimizer_stops(message(OptimizationWarning))
        assert accept_optimizer_stops(message(NumericalWarning))
    assert [w.category for w in seen] == [NumericalWarning]


def test_expected_fit_warnings_silence_those_and_only_those():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with expected_fit_warnings():
            for text, category in (
                ("K is not numerically positive definite", NumericalWarning),
                ("EP stopped after 200 sweeps", ConvergenceWarning),
                ("L-BFGS-B stopped", OptimizationWarning),
                ("something else", NumericalWarning),
                ("unrelated", UserWarning),
            ):
                warnings.warn(text, category, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something else", "unrelated"]
