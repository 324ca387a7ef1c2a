r"""The ask/tell loop over a :class:`~prefbo.space.Space`: mixed variables and
item pools.

With a space, the optimiser's designs are the space's model points (the
unit cube of its encoding, :meth:`~prefbo.space.Space.encode`), and every
option it asks is a design of the space: integers integral, categories and
items from their sets, no two options the same design.

Questions:

- A finite space (an item pool, or integer, ordinal and categorical
  variables only) of at most :data:`EXACT_MAX` designs, with strategy
  ``"eubo"`` and ``q = 2``: the pair with the highest analytic EUBO over all
  pairs of designs (:func:`~prefbo.acquisition.pool_eubo.best_pool_pair`,
  exact; 3,000 designs, 4.5 million pairs, take about 3 s on two cores),
  skipping pairs the loop does not ask (a resolved repeat, or a repeat where
  an unasked pair is nearly as informative: :mod:`prefbo.loop.repeats`).
- Otherwise (a continuous variable, a larger space, another strategy, a kept
  winner): the strategy's optimiser over the encoding's unit cube, then each
  option snapped to its nearest design (:meth:`~prefbo.space.Space.snap`).
  With EUBO (``q = 2``, no kept winner) the question is then the best allowed
  pair, by exact EUBO, among the snapped options and :data:`SAMPLED`
  designs drawn uniformly from the space: a relaxed optimum can snap to a
  poor design (a one-hot block between categories), and the sampled designs
  cover the categories and levels. On the mixed study of
  ``benchmarks/space_regret.py`` this took the regret after 30 answers from
  0.38 to 0.11 (tuning seeds 0-9; random pairs: 0.66), at ~0.1 s more per
  question. Where snapping makes options equal or a resolved repeat, the
  question is drawn uniformly from the space instead (counted in
  ``PreferentialOptimizer.random_fallbacks``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from prefbo.acquisition.pool_eubo import best_pool_pair
from prefbo.exceptions import InputDataError
from prefbo.loop.answers import check_new_options
from prefbo.loop.repeats import RepeatRule
from prefbo.space import Space
from prefbo.utils.seeds import retry_seed

#: The largest finite space whose pairs are all scored (a measured ~3 s).
EXACT_MAX = 3000

# pairs refused in turn (resolved repeats) before the exact search gives up
EXACT_TRIES = 20

# a told option's continuous columns may differ from their design by rounding
SNAP_TOL = 1e-9

#: Uniform designs scored beside a snapped EUBO optimum (256: 33,000 pairs).
SAMPLED = 256


def as_space(bounds: Any) -> Space | None:
    r"""The :class:`Space` that ``bounds`` stands for, or ``None`` for a box.

    A :class:`Space` or its JSON form (a dict ``{"variables": [...]}``, as a
    session log's header stores it) is a space; anything else is a box.
    """
    if isinstance(bounds, Space):
        return bounds
    if isinstance(bounds, Mapping):
        return Space.from_dict(bounds)
    return None


def unit_box(space: Space) -> Tensor:
    r"""``2 x dim`` float64 bounds of the space's encoding, ``[0, 1]^dim``."""
    box = torch.zeros(2, space.dim, dtype=torch.float64)
    box[1] = 1.0
    return box


def check_space_size(space: Space, q: int) -> None:
    r"""Refuse a finite space with fewer designs than options per question.

    Raises:
        InputDataError: Naming the space's size and ``q``.
    """
    if space.size is not None and space.size < q:
        raise InputDataError(
            f"a question needs q={q} distinct designs; the space holds only "
            f"{space.size}."
        )


def encode_options(space: Space, options: Any) -> Any:
    r"""Options given in the person's view (a list of dicts by name) as model
    points; anything else unchanged (checked later as a tensor)."""
    if isinstance(options, Sequence) and options and isinstance(options[0], Mapping):
        return space.encode(options)
    return options


def check_space_options(space: Space, options: Tensor, name: str = "options") -> None:
    r"""Every row of ``options`` (``q x dim`` model points) is a design.

    Raises:
        InputDataError: Naming the first row that is not a design of the
            space and its nearest design.
    """
    snapped = space.snap(options)
    off = (snapped - options).abs().amax(-1) > SNAP_TOL
    if bool(off.any()):
        i = int(off.nonzero()[0])
        raise InputDataError(
            f"{name} row {i} is not a design of the space (integers integral, "
            f"categories and items one-hot or pool rows); got {options[i].tolist()}, "
            f"nearest design {space.decode(options[i])[0]}."
        )


def random_designs(
    space: Space, k: int, seed: int, avoid: Tensor | None = None
) -> Tensor:
    r"""``k x dim`` distinct designs drawn uniformly from the space, none
    equal to ``avoid`` (a design, e.g. a kept winner).

    Draws are repeated (with derived seeds) until ``k`` are found;
    :func:`check_space_size` has made sure the space holds them.
    """
    picked: list[Tensor] = []
    taken = [] if avoid is None else [avoid.to(torch.float64)]
    for attempt in range(1000):
        for x in space.sample(k, seed=retry_seed(seed, attempt) % 2**63):
            if not any(bool((x == y).all()) for y in picked + taken):
                picked.append(x)
            if len(picked) == k:
                return torch.stack(picked)
    raise InputDataError(  # only for a pathological space (k of ~10^-300 odds)
        f"could not draw {k} distinct designs from the space in 1000 rounds."
    )


def exact_pair(model: Any, space: Space, rule: RepeatRule) -> Tensor | None:
    r"""The pair of designs of the finite ``space`` the rule asks, by EUBO, or
    ``None`` (see :func:`best_allowed_pair`)."""
    return best_allowed_pair(model, space.grid(max_size=EXACT_MAX), rule)


def best_allowed_pair(model: Any, grid: Tensor, rule: RepeatRule) -> Tensor | None:
    r"""The pair of rows of ``grid`` the rule asks, or ``None``.

    The pair of highest EUBO that ``rule`` allows (a pair it refuses is
    excluded and the search repeated, at most :data:`EXACT_TRIES` times);
    if that pair repeats an asked one, the pair of highest EUBO among the
    unasked pairs nearly as informative, where there is one
    (:mod:`prefbo.loop.repeats`, rule 3: every pair is a candidate).

    Args:
        model: The model.
        grid: ``N x d`` designs (the model's inputs).
        rule: The loop's :class:`~prefbo.loop.repeats.RepeatRule` (no kept
            winner).
    """
    exclude = torch.zeros(0, 2, dtype=torch.long)
    for _ in range(EXACT_TRIES):
        try:
            idx, _ = best_pool_pair(model, grid, exclude=exclude)
        except InputDataError:  # every pair excluded
            return None
        pair = grid[idx]
        if rule.allowed(pair):
            break
        exclude = torch.cat([exclude, idx.unsqueeze(0)])
    else:
        return None
    if not rule.avoid_resolved or not rule.is_repeat(pair):
        return pair
    asked = torch.cat([exclude, rule.asked_index_pairs(grid)])
    try:
        idx, _ = best_pool_pair(
            model, grid, exclude=asked, min_information=rule.floor(pair)
        )
    except InputDataError:  # no unasked pair nearly as informative
        return pair
    return grid[idx]


def sampled_pair(
    model: Any,
    space: Space,
    snapped: Tensor,
    rule: RepeatRule,
    seed: int,
) -> Tensor | None:
    r"""The pair the rule asks (by EUBO, :func:`best_allowed_pair`) among the
    ``2 x dim`` snapped options and :data:`SAMPLED` uniform designs of
    ``space`` (drawn with ``seed``), or ``None`` (see the module
    docstring)."""
    candidates = torch.cat([snapped, space.sample(SAMPLED, seed=seed)])
    return best_allowed_pair(model, candidates, rule)


def choose_options(
    strategy_name: str, strategy: Any, question: Any, space: Space | None, exact: bool
) -> Tensor | None:
    r"""The new options of a question in the model's coordinates (``None``:
    nothing found), before the caller's ``allowed`` check and fallback.

    ``exact``: the best allowed pair of the finite ``space`` by EUBO
    (:func:`exact_pair`). Otherwise the strategy's options, checked, and with
    a space snapped onto its designs and, for EUBO without a kept winner,
    set against sampled designs (:func:`sampled_pair`).
    """
    if exact:
        return exact_pair(question.model, space, question.rule)
    new = strategy.acquire(question)
    check_new_options(new, question.num_new, question.bounds, strategy_name)
    if space is None:
        return new
    new = space.snap(new)
    if strategy_name == "eubo" and question.fixed is None:
        new = sampled_pair(question.model, space, new, question.rule, question.seed)
    return new


def takes_exact(space: Space | None, strategy: str, q: int, keep_winner: bool) -> bool:
    r"""Whether a question is chosen by exact enumeration (see the module
    docstring)."""
    return (
        space is not None
        and strategy == "eubo"
        and q == 2
        and not keep_winner
        and space.size is not None
        and space.size <= EXACT_MAX
    )
