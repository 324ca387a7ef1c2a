import pytest
from botorch.generation.gen import get_reasons_against_fast_path

from prefbo.exceptions import InputDataError
from prefbo.loop.options import (
    DEFAULT_ACQF_OPTIONS,
    DEFAULT_FIT_OPTIONS,
    acqf_options,
    acqf_scipy_options,
    check_model_options,
    fit_options,
)
from prefbo.models import PairwiseEPGP
from prefbo.models.variational import VariationalPreferenceGP


def test_acquisition_tolerance_reaches_botorchs_lbfgsb_in_the_form_it_takes():
    assert acqf_scipy_options({"maxiter": 5, "ftol": None}, 3) == {
        "seed": 3,
        "maxiter": 5,
    }
    options = acqf_scipy_options({"maxiter": 5, "ftol": 1e-6}, 3)
    # BoTorch's batched L-BFGS-B asserts factr is None beside ftol
    assert options == {"seed": 3, "maxiter": 5, "ftol": 1e-6, "factr": None}
    assert not get_reasons_against_fast_path(
        method="L-BFGS-B",
        with_grad=True,
        minimize_options={k: v for k, v in options.items() if k != "seed"},
        timeout_sec=None,
    )
    assert acqf_options(None)["ftol"] == 1e-6


def test_defaults_are_updated_by_the_given_options():
    assert acqf_options({"maxiter": 7}) == {**DEFAULT_ACQF_OPTIONS, "maxiter": 7}
    assert fit_options(None) == DEFAULT_FIT_OPTIONS == {"maxfun": 30, "ftol": 1e-6}
    assert fit_options({"maxfun": 3})["maxfun"] == 3
    with pytest.raises(InputDataError, match=r"acqf_options must be a dict; got int"):
        acqf_options(3)
    with pytest.raises(InputDataError, match=r"fit_options must be a dict of L-BFGS"):
        fit_options(30)
    with pytest.raises(InputDataError, match=r"unknown key\(s\) \['maxfunn'\]"):
        fit_options({"maxfunn": 3})


def test_model_options_are_checked_against_the_constructor():
    check_model_options("ep", PairwiseEPGP, {"damping": 0.5, "tol": 1e-6})
    with pytest.raises(InputDataError, match=r"model='ep' has unknown key\(s\) \['x'"):
        check_model_options("ep", PairwiseEPGP, {"x": 1})
    with pytest.raises(InputDataError, match=r"unknown key\(s\) \['datapoints'\]"):
        check_model_options("ep", PairwiseEPGP, {"datapoints": None})  # the loop's
    check_model_options(
        "variational", VariationalPreferenceGP, {"fit": {}}, extra=("fit",)
    )
