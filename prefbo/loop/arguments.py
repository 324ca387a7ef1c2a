r"""The checks of :class:`~prefbo.loop.PreferentialOptimizer`'s arguments.

The constructor checks its arguments in four steps, in this order, before
it keeps any setting: the designs (:func:`design_box`), the types of its
settings (:func:`~prefbo.loop.options.check_setting_types`), the model kind
and the strategy (:func:`model_and_strategy`) and the schedule of questions
and refits (:func:`check_schedule`). The option dictionaries are checked by
:mod:`prefbo.loop.options` as they are kept.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from prefbo.data.validation import check_bounds
from prefbo.loop.boundary import MAX_STEP, MIN_STEP
from prefbo.loop.model_kinds import ModelKind, get_model_kind
from prefbo.loop.options import as_bounds
from prefbo.loop.spaces import as_space, check_space_size, unit_box
from prefbo.loop.strategies import Strategy, get_strategy
from prefbo.space import Space
from prefbo.utils.checks import check_float, check_int, check_seed


def design_box(bounds: Any) -> tuple[Space | None, Tensor]:
    r"""The space of the designs and the box the models see.

    Args:
        bounds: The constructor's ``bounds``: a ``2 x d`` box, a
            :class:`~prefbo.space.Space` or its JSON form.

    Returns:
        ``(space, box)``: ``None`` and the ``2 x d`` float64 box, or the
        space and the unit box of its ``space.dim`` model columns.

    Raises:
        InputTypeError: ``bounds`` are not numbers.
        InputDataError: A box that is not finite or whose width overflows,
            or an invalid space.
    """
    space = as_space(bounds)
    if space is None:
        box = as_bounds(bounds)
        check_bounds(box)
    else:
        box = unit_box(space)
    return space, box


def model_and_strategy(
    model: Any, strategy: Any, q: Any, space: Space | None
) -> tuple[type[ModelKind], Strategy]:
    r"""The registered model kind and strategy, checked to serve ``q``
    options per question (and, with a space, that it has ``q`` designs).

    Returns:
        ``(kind, strategy)``: the model kind's class and the strategy.

    Raises:
        InputTypeError: ``model`` or ``strategy`` is not a str, or ``q`` not
            an int.
        InputDataError: An unknown model kind or strategy, ``q < 2``, or a
            space with fewer than ``q`` designs.
        UnsupportedError: The strategy cannot serve ``q`` or the model kind.
    """
    kind = get_model_kind(model)
    found = get_strategy(strategy)
    check_int("q", q, 2)
    found.check(strategy, q, model, kind)
    if space is not None:
        check_space_size(space, q)
    return kind, found


def check_schedule(
    refit_every: Any,
    boundary_step: Any,
    seed: Any,
    initial_random: Any,
    uses_model: bool,
) -> float | None:
    r"""Check the refits' period, the boundary step, the seed and the
    number of random questions first.

    Args:
        refit_every: Answers between refits, ``>= 1``.
        boundary_step: ``None`` or a float in ``[MIN_STEP, MAX_STEP]``
            (:mod:`prefbo.loop.boundary`).
        seed: An int in ``[-2**63, 2**64 - 1]``.
        initial_random: Random questions first, ``>= 1`` when the strategy
            uses the model (the first question comes before any answer).
        uses_model: Whether the strategy uses the model.

    Returns:
        ``boundary_step`` as a float (or ``None``).

    Raises:
        InputTypeError: A setting of the wrong type (named).
        InputDataError: A setting out of its range (named).
    """
    check_int("refit_every", refit_every, 1)
    step = check_float(
        "boundary_step",
        boundary_step,
        minimum=MIN_STEP,
        maximum=MAX_STEP,
        allow_none=True,
    )
    check_seed("seed", seed)
    # the first question comes before any answer: no model to acquire with
    check_int("initial_random", initial_random, int(uses_model))
    return step
