r"""Checks of a batched step's people and the questions on their screens.

:func:`~prefbo.loop.people_questions.ask_people` and
:meth:`QuestionMaker.for_people <prefbo.loop.QuestionMaker.for_people>`
take the people to ask, the question on each one's screen and the virtual
comparisons it carries; these functions refuse what they cannot use, with
the argument, what was expected and what came.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.loop.box import DesignBox
from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.models.collaborative.checks import check_person_ids
from prefbo.utils.checks import describe


def check_people(
    model: CollaborativePreferenceGP,
    people: Tensor,
    shown: Sequence[Tensor | None],
) -> None:
    r"""Check the people of a batched step and the questions they look at.

    Args:
        model: The collaborative model.
        people: ``B`` person ids of ``model``.
        shown: ``B`` entries, each the ``2 x d`` options of the question on
            that person's screen, or ``None``.

    Raises:
        InputTypeError: ``model`` is not a collaborative model, or
            ``people`` not a 1-d integer tensor.
        InputDataError: An id out of range, or ``shown`` not a sequence of
            one entry per person, each ``None`` or a ``2 x d`` tensor.
    """
    if not isinstance(model, CollaborativePreferenceGP):
        raise InputTypeError(
            "model must be a CollaborativePreferenceGP (one posterior per "
            f"person); got {describe(model)}."
        )
    check_person_ids(people, model.num_people)
    try:
        entries = len(shown)
    except TypeError:
        entries = None
    if entries != len(people):
        got = describe(shown) if entries is None else f"{entries} entries"
        raise InputDataError(
            f"shown must hold one entry per person ({len(people)}): the options "
            f"on their screen, or None; got {got}."
        )
    d = model.designs.shape[-1]
    for b, options in enumerate(shown):
        if options is not None and (
            not isinstance(options, Tensor)
            or options.shape != (2, d)
            or not bool(torch.isfinite(options).all())
        ):
            raise InputDataError(
                f"shown[{b}] must be the 2 x {d} finite options on person "
                f"{int(people[b])}'s screen (model points), or None; got "
                f"{_described(options)}."
            )


def _described(X: object) -> str:
    r"""``describe(X)``, naming non-finite entries of a tensor."""
    if isinstance(X, Tensor) and not bool(torch.isfinite(X).all()):
        return f"{describe(X)} with NaN or inf entries"
    return describe(X)


def check_in_box(
    box: DesignBox, shown: Sequence[Tensor | None], carried: Sequence[Tensor | None]
) -> None:
    r"""Check that the questions on screen and the comparisons they carry
    lie in the box's model coordinates (:attr:`DesignBox.model_bounds
    <prefbo.loop.box.DesignBox.model_bounds>`): a question given in the
    box's own units instead is refused, not asked about.

    Args:
        box: The designs' :class:`~prefbo.loop.box.DesignBox`.
        shown: ``B`` entries, ``2 x d`` options (model points) or ``None``
            (:func:`check_people`).
        carried: ``B`` entries, ``k x 2 x d`` comparisons (model points) or
            ``None`` (:func:`check_virtual`).

    Raises:
        InputDataError: An entry with a point outside, within ``1e-9`` of
            the box's width.
    """
    lo, hi = box.model_bounds
    tol = 1e-9 * (hi - lo)
    for name, entries in (("shown", shown), ("shown_virtual", carried)):
        for b, X in enumerate(entries):
            if X is None:
                continue
            X = X.to(lo)
            if bool(((X < lo - tol) | (X > hi + tol)).any()):
                raise InputDataError(
                    f"{name}[{b}] must lie in the box's model coordinates, "
                    f"{lo.tolist()} to {hi.tolist()}; got values from "
                    f"{X.reshape(-1, X.shape[-1]).min(0).values.tolist()} to "
                    f"{X.reshape(-1, X.shape[-1]).max(0).values.tolist()} (designs "
                    "in the box's own units? map them with box.to_model)."
                )


def check_virtual(
    shown_virtual: Sequence[Tensor | None] | None,
    shown: Sequence[Tensor | None],
    d: int,
) -> list[Tensor | None]:
    r"""Check the virtual comparisons the questions on screen carry.

    Args:
        shown_virtual: One entry per person: the ``k x 2 x d`` comparisons
            ``[inner, face]`` (model points) the question on their screen
            carries, or ``None``; or ``None`` for everyone.
        shown: The questions on screen (:func:`check_people`).
        d: The model's columns.

    Returns:
        One entry per person.

    Raises:
        InputDataError: Not one entry per person, an entry that is not a
            ``k x 2 x d`` tensor, or one for a person with no question on
            screen.
    """
    if shown_virtual is None:
        return [None] * len(shown)
    entries = len(shown_virtual) if isinstance(shown_virtual, Sequence) else None
    if entries != len(shown):
        got = describe(shown_virtual) if entries is None else f"{entries} entries"
        raise InputDataError(
            f"shown_virtual must hold one entry per person ({len(shown)}): the "
            f"virtual comparisons their question on screen carries, or None; got {got}."
        )
    for b, (virtual, options) in enumerate(zip(shown_virtual, shown, strict=True)):
        if virtual is None:
            continue
        if (
            not isinstance(virtual, Tensor)
            or virtual.ndim != 3
            or virtual.shape[1:] != (2, d)
            or not bool(torch.isfinite(virtual).all())
            or options is None
        ):
            raise InputDataError(
                f"shown_virtual[{b}] must be the k x 2 x {d} finite virtual "
                "comparisons [inner, face] of the question on that person's "
                f"screen (model points), or None; got {_described(virtual)}"
                + (
                    " for a person with no question on screen."
                    if options is None
                    else "."
                )
            )
    return list(shown_virtual)
