r"""The loop's option defaults and checks.

:class:`~prefbo.loop.PreferentialOptimizer` takes three dictionaries of
options: ``acqf_options`` (the acquisition maximiser's, defaults
:data:`DEFAULT_ACQF_OPTIONS`), ``fit_options`` (scipy L-BFGS-B options of the
hyperparameter refits, defaults :data:`DEFAULT_FIT_OPTIONS`) and
``model_options`` (keyword arguments of the model kind's constructor). Each
is checked here before a session log is written, so a misspelt key fails at
once and not at the first model built.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.checks import check_float, check_int, check_nonneg_float, describe

# the seeds handed to BoTorch, torch generators and Sobol engines lie in
# [0, SEED_MOD)
SEED_MOD = 2**31 - 1
EUBO_OPTIMIZERS = ("torch", "scipy")
DEFAULT_ACQF_OPTIONS = {
    "optimizer": "scipy",
    "num_restarts": 4,
    "raw_samples": 128,
    "maxiter": 100,
    "mc_samples": 128,
    # L-BFGS-B's relative tolerance on the acquisition value (BoTorch's
    # default 2.2e-9 refines EUBO far below anything that changes a question)
    "ftol": 1e-6,
}
# L-BFGS-B options of the Laplace/EP refits: with nearly separable answers the
# evidence creeps towards the outputscale prior's cap for hundreds of
# evaluations; a cap of 30 stops there. ftol: relative change of the evidence
# at which a refit stops
DEFAULT_FIT_OPTIONS = {"maxfun": 30, "ftol": 1e-6}
SCIPY_FTOL = 2.220446049250313e-09  # scipy's L-BFGS-B default (older log headers)
# scipy's L-BFGS-B options (what fit_options are passed as)
LBFGSB_OPTIONS = (
    "maxcor",
    "ftol",
    "gtol",
    "eps",
    "maxfun",
    "maxiter",
    "maxls",
    "finite_diff_rel_step",
    "disp",
    "iprint",
)
# the options of both dictionaries whose values are checked here: counts
# (ints >= 1) and tolerances (finite floats >= 0)
ACQF_COUNTS = ("num_restarts", "raw_samples", "maxiter", "mc_samples")
FIT_COUNTS = ("maxcor", "maxfun", "maxiter", "maxls")
FIT_TOLERANCES = ("ftol", "gtol")


def as_bounds(bounds: Any) -> Tensor:
    r"""``bounds`` as a float64 tensor (checked by
    :func:`~prefbo.data.validation.check_bounds` afterwards).

    Raises:
        InputTypeError: ``bounds`` are not numbers (e.g. strings).
    """
    try:
        if isinstance(bounds, (str, bytes)):
            raise TypeError
        return torch.as_tensor(bounds, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise InputTypeError(
            "bounds must be a 2 x d tensor (or nested list) of numbers [lower, "
            f"upper]; got {describe(bounds)}."
        ) from None


def check_setting_types(
    log_path: Any, flags: dict[str, Any], dicts: dict[str, Any]
) -> None:
    r"""Raise unless ``log_path`` is ``None`` or a path, each of ``flags`` a
    ``bool`` and each of ``dicts`` ``None`` or a dict.

    Raises:
        InputTypeError: Naming the first setting of the wrong type.
    """
    if log_path is not None and not isinstance(log_path, (str, os.PathLike)):
        raise InputTypeError(
            f"log_path must be None, a str or an os.PathLike; got {describe(log_path)}."
        )
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InputTypeError(f"{name} must be a bool; got {describe(value)}.")
    for name, value in dicts.items():
        if value is not None and not isinstance(value, dict):
            raise InputTypeError(
                f"{name} must be None or a dict; got {describe(value)}."
            )


def check_keys(name: str, given: dict[str, Any], known: Any) -> None:
    r"""Raise if the dictionary ``name`` has keys outside ``known``.

    Raises:
        InputDataError: Naming the unknown keys and the known ones.
    """
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise InputDataError(
            f"{name} has unknown key(s) {unknown}; expected some of {sorted(known)}."
        )


def acqf_options(given: dict[str, Any] | None) -> dict[str, Any]:
    r"""The acquisition options: :data:`DEFAULT_ACQF_OPTIONS` updated by ``given``.

    Raises:
        InputTypeError: A count (``num_restarts``, ``raw_samples``,
            ``maxiter``, ``mc_samples``) that is not an int, or an ``ftol``
            that is not a float or ``None``.
        InputDataError: ``given`` is not a dict, has an unknown key, an
            ``optimizer`` other than ``"scipy"`` and ``"torch"``, a count
            below 1 or an ``ftol`` that is negative or not finite.
    """
    if given is not None and not isinstance(given, dict):
        raise InputDataError(
            f"acqf_options must be a dict; got {type(given).__name__}."
        )
    check_keys("acqf_options", given or {}, DEFAULT_ACQF_OPTIONS)
    options = {**DEFAULT_ACQF_OPTIONS, **(given or {})}
    if not isinstance(options["optimizer"], str) or (
        options["optimizer"] not in EUBO_OPTIMIZERS
    ):
        raise InputDataError(
            f"acqf_options['optimizer'] must be one of {EUBO_OPTIMIZERS}; got "
            f"{options['optimizer']!r}."
        )
    for key in ACQF_COUNTS:
        options[key] = check_int(f"acqf_options[{key!r}]", options[key], 1)
    options["ftol"] = check_nonneg_float(
        "acqf_options['ftol']", options["ftol"], allow_none=True
    )
    return options


def fit_options(given: dict[str, Any] | None) -> dict[str, Any]:
    r"""The refits' L-BFGS-B options: :data:`DEFAULT_FIT_OPTIONS` updated by
    ``given``.

    Raises:
        InputTypeError: A count (``maxcor``, ``maxfun``, ``maxiter``,
            ``maxls``) that is not an int, or a tolerance (``ftol``, ``gtol``,
            ``eps``) that is not a float.
        InputDataError: ``given`` is not a dict, has a key scipy's L-BFGS-B
            does not take, a count below 1, a negative or non-finite
            tolerance, or an ``eps`` that is not positive.
    """
    if given is not None and not isinstance(given, dict):
        raise InputDataError(
            f"fit_options must be a dict of L-BFGS-B options; got {given!r}."
        )
    check_keys("fit_options", given or {}, LBFGSB_OPTIONS)
    options = {**DEFAULT_FIT_OPTIONS, **(given or {})}
    for key in FIT_COUNTS:
        if key in options:
            options[key] = check_int(f"fit_options[{key!r}]", options[key], 1)
    for key in FIT_TOLERANCES:
        if key in options:
            options[key] = check_nonneg_float(f"fit_options[{key!r}]", options[key])
    if "eps" in options:
        options["eps"] = check_float(
            "fit_options['eps']", options["eps"], minimum=0, open_minimum=True
        )
    return options


def _constructor_keywords(cls: type) -> set[str] | None:
    r"""Keyword arguments ``cls(...)`` accepts, following ``**options`` passed
    on to base classes; ``None`` if some ``__init__`` takes arbitrary ones."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {
            p.name
            for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
        }
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return names
        if klass.__module__.split(".")[0] != "prefbo":
            return None  # a library's **kwargs: not checked here
    return None


def check_model_options(
    model: str, model_class: type, options: dict[str, Any], extra: Any = ()
) -> None:
    r"""Raise if ``options`` has a key ``model_class``'s constructor does not take.

    Args:
        model: The model kind's name (for the message).
        model_class: The class the kind builds; a constructor that passes
            ``**kwargs`` on to a non-prefbo class is not checked.
        options: The ``model_options``.
        extra: Further keys the kind itself takes (e.g. ``"fit"``).

    Raises:
        InputDataError: Naming the unknown keys and the known ones.
    """
    known = _constructor_keywords(model_class)
    if known is None:
        return
    known -= {"datapoints", "comparisons", "data"}  # the loop passes these
    known |= set(extra)
    check_keys(f"model_options for model={model!r}", options, known)


def acqf_scipy_options(o: dict[str, Any], seed: int) -> dict[str, Any]:
    r"""``optimize_acqf`` options from the loop's ``acqf_options`` ``o``.

    ``ftol`` (``None``: BoTorch's default) is passed the way BoTorch's
    L-BFGS-B path of this call takes it: its batched fast path needs
    ``factr=None`` beside ``ftol``, scipy's ``minimize`` only ``ftol``.
    """
    options: dict[str, Any] = {"seed": seed % SEED_MOD, "maxiter": o["maxiter"]}
    ftol = o.get("ftol")
    if ftol is None:
        return options
    tol: dict[str, Any] = {"ftol": float(ftol)}
    try:
        from botorch.generation.gen import get_reasons_against_fast_path
    except ImportError:  # no batched fast path in this BoTorch
        return {**options, **tol}
    fast = {"maxiter": o["maxiter"], **tol, "factr": None}
    if not get_reasons_against_fast_path(
        method="L-BFGS-B", with_grad=True, minimize_options=fast, timeout_sec=None
    ):
        tol["factr"] = None
    return {**options, **tol}
