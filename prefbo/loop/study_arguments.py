r"""The checks of :class:`~prefbo.loop.PopulationStudy`'s model settings.

:func:`check_study` checks the model kind, the strategy and the
``boundary_step`` together, since each kind takes its own: Thompson
sampling and a ``boundary_step`` other than the default are the
collaborative kind's alone. The designs and the other settings are checked
as :class:`~prefbo.loop.PreferentialOptimizer` checks them.
"""

from __future__ import annotations

from typing import Any

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.loop.boundary import DEFAULT_STEP, MAX_STEP, MIN_STEP
from prefbo.loop.study_collaborative import COLLABORATIVE
from prefbo.utils.checks import check_float

#: The strategies of every kind ...
STRATEGIES = ("eubo", "random")
#: ... and those of the collaborative kind alone: Thompson sampling needs
#: draws of a participant's utility over the candidates, which the
#: collaborative model's batched step makes and the exact population
#: model's participant views (no sample paths) do not.
COLLABORATIVE_ONLY = ("ts",)
#: The exact population model's inferences.
EXACT = ("ep", "laplace")
#: Every model kind.
KINDS = (*EXACT, COLLABORATIVE)


def check_study(model: Any, strategy: Any, boundary_step: Any) -> float | None:
    r"""Check a study's model kind, strategy and boundary step.

    Args:
        model: One of :data:`KINDS`.
        strategy: One of :data:`STRATEGIES`, or with the collaborative kind
            also :data:`COLLABORATIVE_ONLY`.
        boundary_step: The collaborative kind's step off the faces: ``None``
            or a float in ``[MIN_STEP, MAX_STEP)`` (at half the range every
            candidate would lie on a face); the exact kinds take
            only the default, :data:`~prefbo.loop.boundary.DEFAULT_STEP`
            (they search the whole box and make no virtual comparisons).

    Returns:
        ``boundary_step`` as a float, or ``None``.

    Raises:
        InputDataError: An unknown kind or strategy, or a step out of range.
        InputTypeError: A step that is not a number.
        UnsupportedError: Thompson sampling, or a step other than the
            default, with an exact kind.
    """
    if model not in KINDS:
        raise InputDataError(f"model must be one of {list(KINDS)}; got {model!r}.")
    if strategy not in STRATEGIES + COLLABORATIVE_ONLY:
        raise InputDataError(
            f"strategy must be one of {list(STRATEGIES)}, or with "
            f"model={COLLABORATIVE!r} also 'ts' (Thompson sampling); got "
            f"{strategy!r}."
        )
    if strategy in COLLABORATIVE_ONLY and model != COLLABORATIVE:
        raise UnsupportedError(
            f"strategy {strategy!r} (Thompson sampling) needs "
            f"model={COLLABORATIVE!r}: the exact population model's "
            f"participants have no sample paths to draw; got model={model!r}."
        )
    if model != COLLABORATIVE and boundary_step != DEFAULT_STEP:
        raise UnsupportedError(
            f"boundary_step applies to model={COLLABORATIVE!r} (the virtual "
            "comparisons its questions carry); the exact kinds "
            "search the whole box without virtual comparisons. Leave it at "
            f"{DEFAULT_STEP}; got boundary_step={boundary_step!r} with "
            f"model={model!r}."
        )
    # below half the range: at half of it every candidate lies on a face
    return check_float(
        "boundary_step",
        boundary_step,
        minimum=MIN_STEP,
        maximum=MAX_STEP,
        open_maximum=True,
        allow_none=True,
    )
