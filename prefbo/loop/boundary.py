r"""Virtual comparisons at the box's faces: the utility rises into the box.

With a stationary kernel and a constant prior mean the posterior variance is
largest on the faces and corners of the box, and EUBO, which rewards
variance, puts most of its options there (on Branin at σ = 0.1, 40-50 of
52; ``benchmarks/decisions.md``), where a
person's optimum rarely is. Siivola et al. (2018, "Correcting boundary
over-exploration deficiencies in Bayesian optimization with virtual
derivative sign observations") correct this with virtual observations, at
the boundary points the acquisition function proposes, that the objective's
derivative points into the box. The loop uses their finite-difference form,
which every pairwise model takes as it takes an answer: for an option on a
face, the virtual answer "the design ``step`` further inside is preferred to
it" (``step`` in units of the box's width, one comparison per face the
option lies on).

While a question is computed, every option the strategy proposes on a face
gets its virtual comparison and the question is computed again (at most
:data:`ROUNDS` times). An option still on a face after the last round gets
its comparisons as well and is asked ``step`` inside every face it lies on
(:func:`off_faces`: the design its comparisons prefer), unless the moved
question is one the loop must not ask (:mod:`prefbo.loop.repeats`). So a
question of any ``q`` keeps off the faces; early on, with the model close to
its prior, a question of three options could otherwise keep three corners
through every round (qEUBO on a square).

The comparisons made are kept with the question's answer (and written with
it to the session log), so every later model and fit has them and a resumed
session asks what the original would have asked; an answer told with
options other than the asked question's has none unless
given (``tell(..., virtual=...)``, the asked question's ``pending_virtual``,
as ``prefbo serve`` gives them back from its store).

Only strategies that use the model make them, after the ``initial_random``
questions, and never for a kept winner (it was told already). A question can
take up to ``ROUNDS + 1`` computations.

The price: the comparisons say the utility falls towards every face a
proposal touched, so a person whose best design lies on a face (or in a
corner, "more is better up to the limit") is only brought to within about
``step`` of it: once the face's proposals have lost their comparisons, later
questions stay inside, and the model keeps ranking the face below the design
``step`` inside it. Pass ``boundary_step=None`` where such an optimum is
expected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from prefbo.space import Space
from prefbo.space.variables import Continuous

# an option this close to a face of the unit cube lies on it (L-BFGS-B
# returns its bounds exactly)
FACE_TOL = 1e-4
# questions recomputed with the proposals' virtual comparisons, at most
ROUNDS = 3
# the loop's default step: a tenth of the box's width
DEFAULT_STEP = 0.1
# the smallest step: the inner design then lies well off the face
MIN_STEP = 1e-3
# the largest: half the box's width (the inner design at most at its middle)
MAX_STEP = 0.5


def face_columns(space: Space | None, dim: int) -> Tensor:
    r"""Which model columns have faces (continuous ranges).

    Args:
        space: The optimiser's space, or ``None`` for a box.
        dim: The number of model columns.

    Returns:
        A ``dim`` bool tensor: every column of a box; the columns of a
        space's :class:`~prefbo.space.Continuous` variables (not integers,
        whose designs a step inside may not hold, nor one-hot categories,
        ordinal levels or item features).
    """
    if space is None:
        return torch.ones(dim, dtype=torch.bool)
    mask = torch.zeros(dim, dtype=torch.bool)
    for variable, columns in zip(space.variables, space.slices):
        if isinstance(variable, Continuous):
            mask[columns] = True
    return mask


def face_comparisons(
    Z: Tensor, columns: Tensor, step: float
) -> list[tuple[Tensor, Tensor]]:
    r"""The virtual comparisons of options on faces of the unit cube.

    Args:
        Z: ``q x d`` options, points of the unit cube.
        columns: ``d`` bool tensor of the columns that have faces
            (:func:`face_columns`).
        step: How far inside the preferred design lies, in ``(0, 0.5]``.

    Returns:
        ``[(inner, option), ...]``, "``inner`` ≻ ``option``": for each option
        and each column in ``columns`` where it lies within
        :data:`FACE_TOL` of 0 (1), ``inner`` is the option with that column
        set to ``step`` (``1 - step``). Options in order, then columns.
    """
    pairs = []
    for z in Z:
        for d in columns.nonzero().reshape(-1).tolist():
            if z[d] <= FACE_TOL:
                value = step
            elif z[d] >= 1 - FACE_TOL:
                value = 1 - step
            else:
                continue
            inner = z.clone()
            inner[d] = value
            pairs.append((inner, z.clone()))
    return pairs


def off_faces(Z: Tensor, columns: Tensor, step: float) -> Tensor:
    r"""The options moved ``step`` inside every face of the unit cube they
    lie on: the inner designs of their virtual comparisons, combined.

    Args:
        Z: ``q x d`` options, points of the unit cube.
        columns: ``d`` bool tensor of the columns that have faces
            (:func:`face_columns`).
        step: How far inside, in ``(0, 0.5]``.

    Returns:
        A ``q x d`` copy of ``Z`` with each column in ``columns`` within
        :data:`FACE_TOL` of 0 (1) set to ``step`` (``1 - step``).
    """
    columns = columns.to(Z.device)
    low = (Z <= FACE_TOL) & columns  # q x d
    high = (Z >= 1 - FACE_TOL) & columns & ~low
    moved = torch.where(low, torch.full_like(Z, step), Z)
    return torch.where(high, torch.full_like(Z, 1 - step), moved)


def ask_off_faces(
    ask: Callable[[], tuple[Tensor, bool]],
    propose: Callable[[list[Tensor]], None],
    allowed: Callable[[Tensor], bool],
    box: Any,
    step: float,
    kept: int = 0,
) -> tuple[Tensor, bool]:
    r"""A question computed again while it proposes options on faces, each
    round with those options' virtual comparisons (see the module
    docstring): what the loop and a study's lone participant ask with.

    Args:
        ask: Computes the strategy's ``q x d`` question (box coordinates)
            at the current model, and whether it is a random fallback.
        propose: Takes a round's virtual comparisons (``2 x d`` ``[inner,
            face]`` designs each, box coordinates); the next ``ask`` sees
            them.
        allowed: Whether the rule of :mod:`prefbo.loop.repeats` allows the
            new options (model inputs) of the question moved off the faces,
            under the model with the comparisons.
        box: The designs' :class:`~prefbo.loop.box.DesignBox`.
        step: The comparisons' step, in ``(0, 0.5]``.
        kept: Options the question starts with that are told already (a
            kept winner): never moved, and given no comparisons.

    Returns:
        ``(question, fallback)``: the question of the last round, moved
        ``step`` inside the faces it still lies on after
        :data:`ROUNDS` recomputations (unless ``allowed`` refuses the
        move), and whether it is a random fallback (which ends the rounds).
    """
    columns = face_columns(box.space, box.dim)
    question, fallback = ask()
    for rounds in range(ROUNDS + 1):
        pairs = face_comparisons(box.to_unit(question[kept:]), columns, step)
        if fallback or not pairs:
            break
        propose([box.from_unit(torch.stack(p)) for p in pairs])
        if rounds < ROUNDS:
            question, fallback = ask()
            continue
        Z = off_faces(box.to_unit(question[kept:]), columns, step)
        moved = torch.cat([question[:kept], box.from_unit(Z)])  # q x d
        if box.space is not None:
            moved = box.space.snap(moved)
        if allowed(box.to_model(moved[kept:])):
            question = moved
    return question, fallback
