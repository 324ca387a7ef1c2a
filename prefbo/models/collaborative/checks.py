r"""Checks of a collaborative model's data, each naming the argument, what it
expects and what came; designs outside the unit cube, which the kernel's
priors assume, are not refused but warned of, as BoTorch's models do."""

from __future__ import annotations

import warnings

import torch
from botorch.exceptions import InputDataWarning
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.models.collaborative.design_index import design_keys
from prefbo.models.training_data import warn_outside_unit_cube
from prefbo.utils.checks import check_int, describe

#: What the warning of designs outside the unit cube tells to do.
UNIT_CUBE_REMEDY = (
    "map them into [0, 1]^d yourself, e.g. (X - lower) / (upper - lower) with "
    "the space's bounds (the collaborative model takes no input transform)"
)


def check_answers(
    answers: object, num_designs: int, num_people: int | None, name: str = "answers"
) -> tuple[Tensor, int]:
    r"""Check ``m x 3`` ``(person, winner, loser)`` rows.

    Returns:
        ``(answers as long, number of people)``.

    Raises:
        InputTypeError: Not an integer tensor.
        InputDataError: Wrong shape, a design row out of ``[0, num_designs)``,
            a winner equal to its loser, or a person id out of range.
    """
    if (
        not isinstance(answers, Tensor)
        or answers.is_floating_point()
        or answers.is_complex()
        or answers.dtype == torch.bool
    ):
        raise InputTypeError(
            f"{name} must be an m x 3 integer tensor of (person, winner, loser) "
            f"rows; got {describe(answers)}."
        )
    if answers.ndim != 2 or answers.shape[-1] != 3:
        raise InputDataError(
            f"{name} must be an m x 3 tensor of (person, winner, loser) rows; got "
            f"shape {tuple(answers.shape)}."
        )
    answers = answers.long()
    if answers.numel():
        designs = answers[:, 1:]
        lo, hi = int(designs.min()), int(designs.max())
        if lo < 0 or hi >= num_designs:
            raise InputDataError(
                f"{name}' winner and loser must be rows of the {num_designs} "
                f"designs; got values from {lo} to {hi}."
            )
        same = (answers[:, 1] == answers[:, 2]).nonzero()
        if len(same):
            i = int(same[0])
            raise InputDataError(
                f"{name} row {i} compares design {int(answers[i, 1])} with itself."
            )
        if int(answers[:, 0].min()) < 0:
            raise InputDataError(
                f"{name}' person ids must be >= 0; got {int(answers[:, 0].min())}."
            )
    seen = int(answers[:, 0].max()) + 1 if answers.numel() else 0
    if num_people is None:
        if seen == 0:
            raise InputDataError(
                f"num_people must be given when {name} is empty (m = 0)."
            )
        return answers, seen
    P = check_int("num_people", num_people, 0)
    if seen > P:
        raise InputDataError(
            f"{name}' person ids must be below num_people={P}; got {seen - 1}."
        )
    return answers, P


def check_person_features(
    features: object, num_people: int, like: Tensor
) -> Tensor | None:
    r"""Check ``P x e`` person features (or ``None``); returns them in
    ``like``'s dtype and device.

    Raises:
        InputTypeError: Not a floating tensor.
        InputDataError: Not ``num_people x e`` with ``e ≥ 1``, or not finite.
    """
    if features is None:
        return None
    if not isinstance(features, Tensor) or not features.is_floating_point():
        raise InputTypeError(
            "person_features must be a P x e floating tensor or None; got "
            f"{describe(features)}."
        )
    if features.ndim != 2 or features.shape[0] != num_people or features.shape[1] < 1:
        raise InputDataError(
            f"person_features must be {num_people} x e (one row per person, e >= 1: "
            f"the people are ids 0 to {num_people - 1}, from num_people or the "
            f"answers' largest person id + 1); got shape {tuple(features.shape)}. "
            "Number the people 0 to P - 1, or give a row for every id."
        )
    if not bool(torch.isfinite(features).all()):
        raise InputDataError("person_features must be finite; got NaN or inf.")
    return features.to(like)


#: The integer dtypes taken for ids and rows (torch's wider unsigned ones
#: lack the reductions the checks use).
INTEGER_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def _integer_vector(value: object) -> bool:
    r"""Whether ``value`` is a 1-d tensor of one of :data:`INTEGER_DTYPES`."""
    return (
        isinstance(value, Tensor) and value.ndim == 1 and value.dtype in INTEGER_DTYPES
    )


def check_person_ids(people: object, num_people: int) -> Tensor:
    r"""Check ``B`` person ids of a model of ``num_people`` people.

    Returns:
        ``people`` as long.

    Raises:
        InputTypeError: Not a 1-d integer tensor.
        InputDataError: An id out of ``[0, num_people)``.
    """
    if not _integer_vector(people):
        raise InputTypeError(
            "people must be a 1-d integer tensor of the model's person ids; got "
            f"{describe(people)}."
        )
    if len(people) and (int(people.min()) < 0 or int(people.max()) >= num_people):
        raise InputDataError(
            f"people must be the model's person ids, in [0, {num_people}); got "
            f"values from {int(people.min())} to {int(people.max())} (add a "
            "newcomer with model.add_person() first)."
        )
    return people.long()


def check_answer_sides(winners: object, losers: object, d: int) -> None:
    r"""Check an answer batch's ``winners`` and ``losers``: ``k`` long design
    rows or ``k x d`` finite designs each, one row per answer.

    Raises:
        InputTypeError: Not an integer or floating tensor.
        InputDataError: Wrong shape, NaN or inf, or unequal counts.
    """
    for name, t in (("winners", winners), ("losers", losers)):
        if not isinstance(t, Tensor) or t.is_complex() or t.dtype == torch.bool:
            raise InputTypeError(
                f"{name} must be k long design rows or k x d designs; got "
                f"{describe(t)}."
            )
        if t.is_floating_point():
            if t.ndim != 2 or t.shape[-1] != d:
                raise InputDataError(
                    f"{name} must be k x {d} designs or k "
                    f"design rows; got shape {tuple(t.shape)}."
                )
            if not bool(torch.isfinite(t).all()):
                raise InputDataError(f"{name} must be finite; got NaN or inf.")
    if winners.shape[0] != losers.shape[0]:
        raise InputDataError(
            f"winners and losers must have one row per answer; got "
            f"{winners.shape[0]} and {losers.shape[0]}."
        )
    sides = [t for t in (winners, losers) if t.is_floating_point()]
    if sides:
        warn_outside_unit_cube(torch.cat(sides), None, UNIT_CUBE_REMEDY)


def check_designs(designs: object) -> None:
    r"""Check ``n x d`` finite floating designs with ``n ≥ 1``; warn where
    they leave the unit cube
    (:func:`~prefbo.models.training_data.warn_outside_unit_cube`).

    Raises:
        InputTypeError: Not a floating tensor.
        InputDataError: Wrong shape, or NaN or inf.
    """
    if not isinstance(designs, Tensor) or not designs.is_floating_point():
        raise InputTypeError(
            f"designs must be an n x d floating tensor; got {describe(designs)}."
        )
    if designs.ndim != 2 or designs.shape[0] == 0:
        raise InputDataError(
            f"designs must be n x d with n >= 1; got shape {tuple(designs.shape)}."
        )
    if not bool(torch.isfinite(designs).all()):
        raise InputDataError("designs must be finite; got NaN or inf.")
    warn_outside_unit_cube(designs, None, UNIT_CUBE_REMEDY)


def check_inducing(inducing_points: object, designs: Tensor) -> Tensor | None:
    r"""Check ``M x d`` finite floating inducing points (``None`` passes).

    Returns:
        The points detached, in ``designs``' dtype and device, or ``None``.

    Raises:
        InputDataError: Not a finite ``M x d`` floating tensor with ``M ≥ 1``.
    """
    if inducing_points is None:
        return None
    if (
        not isinstance(inducing_points, Tensor)
        or not inducing_points.is_floating_point()
        or inducing_points.ndim != 2
        or inducing_points.shape[0] == 0
        or inducing_points.shape[-1] != designs.shape[-1]
        or not bool(torch.isfinite(inducing_points).all())
    ):
        raise InputDataError(
            f"inducing_points must be a finite M x {designs.shape[-1]} floating "
            f"tensor with M >= 1; got {describe(inducing_points)}."
        )
    return inducing_points.detach().to(designs)


def check_newcomer_features(
    features: object, person_features: Tensor | None
) -> Tensor | None:
    r"""Check a newcomer's ``features`` against the model's ``P x e``
    ``person_features`` (``None``: the model has none, and so must they).

    Returns:
        The ``1 x e`` row to append, or ``None``.

    Raises:
        InputDataError: Not ``e`` finite features, or features given to a
            model without them.
    """
    if person_features is None:
        if features is not None:
            raise InputDataError(
                "features given but the model has no person features; got "
                f"{describe(features)}."
            )
        return None
    e = person_features.shape[1]
    if not isinstance(features, Tensor) or features.shape != (e,):
        raise InputDataError(
            f"features must be a tensor of the {e} person features; got "
            f"{describe(features)}."
        )
    if not bool(torch.isfinite(features).all()):
        raise InputDataError("features must be finite; got NaN or inf.")
    return features.to(person_features).unsqueeze(0)


def check_rows(rows: object, num_designs: int) -> Tensor:
    r"""Check a 1-d integer tensor of rows of the model's ``num_designs``
    designs (the table as it is now, designs observed since included).

    Returns:
        The rows as long.

    Raises:
        InputTypeError: Not a 1-d integer tensor.
        InputDataError: A row out of ``[0, num_designs)``.
    """
    if not _integer_vector(rows):
        raise InputTypeError(
            f"rows must be a 1-d integer tensor of design rows; got {describe(rows)}."
        )
    if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= num_designs):
        raise InputDataError(
            f"rows must be rows of the {num_designs} designs, in [0, {num_designs}); "
            f"got values from {int(rows.min())} to {int(rows.max())}."
        )
    return rows.long()


def check_item_effects(item_effects: object) -> bool | None:
    r"""``item_effects`` as given: ``True``, ``False`` or ``None`` (the
    model's rule, :func:`pool_item_effects`).

    Raises:
        InputTypeError: Anything else.
    """
    if item_effects is None or isinstance(item_effects, bool):
        return item_effects
    raise InputTypeError(
        f"item_effects must be True, False or None; got {describe(item_effects)}."
    )


def pool_item_effects(num_designs: int, num_answers: int, num_inducing: int) -> bool:
    r"""Whether a model's designs get item effects by default: where they are
    a pool whose items the shared functions cannot each give a value of
    their own.

    - The answers revisit the designs, each design in two answers on
      average (``num_answers >= num_designs``): an item's own effect is told
      apart from the answers' noise only by answers that compare it again,
      and a pool's items are compared over and over, while the designs of a
      continuous study are each compared about once.
    - The designs outnumber the inducing points (``num_designs >
      num_inducing``; the inducing points are every distinct design where
      there are at most ``num_inducing`` of them): where every item is an
      inducing point the smooth functions already take any values at the
      items, and an item effect adds no freedom, only more variance to the
      prior. Items with equal designs are told apart by their effects alone.

    Returns:
        Both conditions together.
    """
    return num_answers >= num_designs > num_inducing


def warn_equal_items(designs: Tensor) -> None:
    r"""Warn (``botorch.exceptions.InputDataWarning``) where two items of a
    model with item effects have equal features.

    Each row is an item of its own, with an effect of its own, and answers
    name items by row; but a design passed to the model (``posterior``,
    ``next_questions``, BoTorch's acquisition functions) is found by its
    features, so it is read as the first of the equal rows, with that row's
    effect.
    """
    first: dict[bytes, int] = {}
    equal = []
    for row, key in enumerate(design_keys(designs)):
        if key in first:
            equal.append((first[key], row))
        else:
            first[key] = row
    if equal:
        shown = ", ".join(f"{a} and {b}" for a, b in equal[:5])
        more = f" (and {len(equal) - 5} more pairs)" if len(equal) > 5 else ""
        warnings.warn(
            f"rows {shown}{more} of designs have equal features. With item "
            "effects each row is an item of its own, and answers given as rows "
            "and utility_mean() tell them apart, but a design passed by its "
            "features (to posterior(), observe(), next_questions() or an "
            "acquisition function) is read as the first equal row, with its "
            "effect. Give the items distinct features (e.g. an id column), or "
            "pass item_effects=False.",
            InputDataWarning,
            stacklevel=3,
        )
