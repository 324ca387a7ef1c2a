r"""The warnings that fitting and acquisition in the loop trigger by design.

:func:`expected_fit_warnings` silences them (and only them) around the loop's
fits, posteriors and acquisition maximisers, and around the same calls in the
demo, the tutorials and the benchmarks; :func:`accept_optimizer_stops` is the
``warning_handler`` of the loop's ``fit_gpytorch_mll`` refits.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from botorch.exceptions.warnings import InputDataWarning, OptimizationWarning
from linear_operator.utils.warnings import NumericalWarning as LONumericalWarning

from prefbo.exceptions import ConvergenceWarning, NumericalWarning


@contextmanager
def expected_fit_warnings() -> Iterator[None]:
    r"""Silence the warnings fitting and acquisition trigger by design.

    - prefbo's ``NumericalWarning`` from the Cholesky of ``K``: once questions
      concentrate near the optimum (or repeat a design), ``K`` becomes
      numerically singular and a little announced jitter is added;
      linear_operator's jitter when qEUBO's options nearly coincide.
    - prefbo's ``NumericalWarning`` that some inputs have residual variance
      above the threshold: ``model="variational"`` asks for all ``n`` designs
      as inducing points and gets the well-conditioned subset.
    - prefbo's ``ConvergenceWarning`` from Newton's mode search or EP's
      sweeps at hyperparameters visited by L-BFGS-B (a near-singular ``K``, or
      the outputscale near its cap with nearly separable answers): the
      approximation is then accurate to about what ``K`` allows.
    - BoTorch's ``OptimizationWarning`` from L-BFGS-B (hyperparameters or
      acquisition) stopping on its iteration or line-search limits; the point
      reached is used, as BoTorch does.
    - BoTorch's ``InputDataWarning`` that the designs are not in the unit
      cube: the loop builds its models on the designs of its box with the
      default kernel, whose priors assume the unit cube; the person using the
      loop has no input transform to pass, so the warning would only repeat
      at every answer. (The loop does not rescale its box to the unit cube
      yet: with a box far from it the default priors fit a worse model.)
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r".*not numerically positive definite",
            category=NumericalWarning,
        )
        warnings.filterwarnings(
            "ignore", message=r"A not p\.d\., added jitter", category=LONumericalWarning
        )
        warnings.filterwarnings(
            "ignore",
            message=r".*inputs have residual variance above",
            category=NumericalWarning,
        )
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        warnings.filterwarnings("ignore", category=OptimizationWarning)
        warnings.filterwarnings(
            "ignore",
            message=r"Data \(input features\) is not contained to the unit cube",
            category=InputDataWarning,
        )
        yield


def accept_optimizer_stops(w: warnings.WarningMessage) -> bool:
    r"""``fit_gpytorch_mll``'s ``warning_handler`` for the loop's refits.

    L-BFGS-B stopping on its line search (``ABNORMAL``) is what happens when
    nearly separable answers push the outputscale towards its prior's cap
    and the evidence flattens: the point reached is the fit. BoTorch's
    default treats it as a failure, refits from 4 random draws of the priors
    and, when they stop the same way, raises — and the loop would then keep
    the *default* hyperparameters. Here every optimiser warning is accepted
    (first attempt kept); any other warning is re-emitted as BoTorch does.

    Args:
        w: A warning caught during one fitting attempt.

    Returns:
        ``True`` (the attempt is kept).
    """
    if issubclass(w.category, OptimizationWarning):
        return True
    warnings.warn_explicit(str(w.message), w.category, w.filename, w.lineno)
    return True
