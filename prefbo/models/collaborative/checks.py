r"""Checks of a collaborative model's data, each naming the argument, what it
expects and what came."""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.checks import check_int, describe


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
    P = check_int("num_people", num_people, 1)
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
            f"person_features must be {num_people} x e (one row per person, e >= 1); "
            f"got shape {tuple(features.shape)}."
        )
    if not bool(torch.isfinite(features).all()):
        raise InputDataError("person_features must be finite; got NaN or inf.")
    return features.to(like)
