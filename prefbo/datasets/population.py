r"""People's pairwise answers over one set of items: a synthetic population
with planted tastes, and the Game rankings as pairs.

Both return a :class:`Population`: ``n`` items' designs, every person's
answers as ``(person, winner row, loser row)`` and each person's features.
The synthetic one, a :class:`PlantedPopulation`, also returns the truth
behind the answers, so a model's recovered utilities and tastes can be
scored. It was written, and its defaults fixed, before any model was tuned
on it.

The planted world of :func:`planted_population`:

- **Items**: ``num_items`` points of ``[0, 1]^dim``, a scrambled Sobol
  sequence.
- **Smooth functions**: a shared utility ``g`` and ``num_tastes`` tastes
  ``h_1 … h_K``, each an independent draw of a zero-mean GP with an RBF
  kernel (lengthscale :data:`LENGTHSCALE`, outputscale 1), made by
  :data:`FEATURES` random Fourier features.
- **People**: person ``p`` has features ``u_p ~ N(0, I_e)`` and taste weights
  ``w_p = B u_p + ε_p`` with ``ε_p ~ N(0, I_K)``. ``B`` is a fixed random
  ``K x e`` matrix whose rows have unit norm, so ``B u_p`` has unit variance
  per taste, as ``ε_p`` does: the features explain half of each weight's
  variance (with ``e = 0``, none: ``w_p = ε_p``).
- **Utility**: ``f_p(x) = g(x) + Σ_k w_pk h_k(x) + r_p(x)``, where the
  residual ``r_p`` is person ``p``'s own GP draw (lengthscale
  :data:`LENGTHSCALE`, sd ``residual_scale``), independent of everyone's.
  At an item, ``g`` has variance 1 and the tastes ``Σ_k E[w_pk²] = 2K``: the
  shared part is a minor share of how people's utilities differ.
- **Items' own effects** (``item_effect_scale > 0``; none by default): each
  item ``i`` also has an appeal ``e_i ~ N(0, item_effect_scale²)`` of its
  own, the same for everyone, that its design does not explain (a pool of
  real items rarely has features for all that people like in them);
  ``f_p(x_i)`` then adds ``e_i``.
- **Answers**: person ``p`` answers ``answers_per_person`` distinct pairs of
  distinct items, drawn uniformly, each with Thurstone probit noise:
  ``P(a ≻ b) = Φ((f_p(a) − f_p(b)) / (√2 · noise_std))`` (each utility is
  read with independent ``N(0, noise_std²)`` noise).
- **Rankings** (:func:`planted_rankings`, the same world): person ``p``
  instead ranks ``items_per_person`` distinct items, drawn uniformly, each
  utility read once with that noise, and answers all the ranking's pairs:
  a person's answers are consistent, as in real ranking data (Game's, or a
  survey where each respondent orders a few of a large pool's items). At
  the defaults (100 items, 10 ranked each) a ranking's pairs agree with
  the true utility about 80 % of the time (0.77 to 0.83 over seeds 0 … 4).

The defaults (300 people, 60 items in ``[0, 1]^3``, 2 tastes, 20 answers
each, 2 person features, ``noise_std = 1.25``, ``residual_scale = 0.2``)
make a person's answers agree with their own utility about 80 % of the time
(over seeds 0 … 29, a default population's agreement is 0.80 on average,
from 0.75 to 0.83), so each answer is informative but no person is known
from a few answers alone. The residual is small next to the tastes (sd 0.2
against about 2), so a person is mostly their weights.

Every random draw comes from one ``torch.Generator`` seeded by ``seed``, in a
fixed order (items, ``g``, tastes, ``B``, features, weights, residuals,
the items' own effects where there are any, then the pairs or ranked
items, and the answer noise), so a seed gives the same population on every
machine, to rounding: the smooth draws' matrix products can round
differently from one call to the next
(by about 1e-7, seen once in 24 processes at 300 people), which moves the
utilities by that much and would flip an answer only at a tie that close.
People are independent given the world (items, ``g``, tastes, ``B``), so a
held-out group is a split of one population, not a second seed (which would
draw another world).

Example:
    >>> pop = planted_population(num_people=50, seed=1)
    >>> pop.answers[:2]  # person, winner item row, loser item row
    >>> pop.utilities.shape  # 50 x 60
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.exceptions import InputDataError
from prefbo.utils.checks import check_float, check_int, check_seed

#: The RBF lengthscale of ``g``, the tastes and the residuals.
LENGTHSCALE = 0.3
#: Random Fourier features per smooth function.
FEATURES = 512
#: Game.csv's platforms, in the order of the items.
PLATFORMS = ("Xbox", "PlayStation", "PSPortable", "GameCube", "GameBoy", "PC")

DTYPE = torch.float64


@dataclass(frozen=True)
class Population:
    r"""People's answers about one set of items.

    Attributes:
        designs: ``n x d`` item designs (float64).
        answers: ``m x 3`` long: ``(person, winner row, loser row)``, rows
            indexing ``designs``; people are ``0 … P - 1``.
        person_features: ``P x e`` features of the people (float64).
    """

    designs: Tensor
    answers: Tensor
    person_features: Tensor

    @property
    def num_people(self) -> int:
        r"""``P``, the number of people."""
        return self.person_features.shape[0]

    @property
    def num_items(self) -> int:
        r"""``n``, the number of items."""
        return self.designs.shape[0]


@dataclass(frozen=True)
class PlantedPopulation(Population):
    r"""A :class:`Population` with the truth behind its answers (see the
    module docstring).

    Attributes:
        utilities: ``P x n`` true utilities ``f_p`` at the items.
        tastes: ``n x K`` true tastes ``h_k`` at the items.
        shared: ``n`` true shared utility ``g`` at the items.
        weights: ``P x K`` true taste weights ``w_p``.
        item_effects: ``n`` true own effects ``e_i`` of the items (zeros
            without them).
    """

    utilities: Tensor
    tastes: Tensor
    shared: Tensor
    weights: Tensor
    item_effects: Tensor


def planted_population(
    num_people: int = 300,
    num_items: int = 60,
    dim: int = 3,
    num_tastes: int = 2,
    answers_per_person: int = 20,
    noise_std: float = 1.25,
    residual_scale: float = 0.2,
    person_feature_dim: int = 2,
    seed: int = 0,
    item_effect_scale: float = 0.0,
) -> PlantedPopulation:
    r"""A synthetic population with planted shared utility and tastes.

    Args:
        num_people: ``P >= 1`` people.
        num_items: ``n >= 2`` items.
        dim: ``d >= 1``, the items' dimension.
        num_tastes: ``K >= 0`` tastes.
        answers_per_person: Pairs each person answers, from 1 to
            ``n (n - 1) / 2`` (every pair at most once per person).
        noise_std: ``σ >= 0`` of the Thurstone noise on each utility read
            (0: every answer follows the utility).
        residual_scale: ``>= 0``, the sd of each person's own residual.
        person_feature_dim: ``e >= 0`` person features.
        seed: Seed of the one generator of every draw.
        item_effect_scale: ``>= 0``, the sd of each item's own effect
            (``0``: none, and the draws are those of a population without
            them).

    Returns:
        A :class:`PlantedPopulation` with ``m = P · answers_per_person``
        answers, grouped by person in order.

    Raises:
        InputTypeError: An argument of the wrong type.
        InputDataError: An argument out of range, e.g. more answers per
            person than there are pairs of items.
    """
    answers_per_person = check_int("answers_per_person", answers_per_person, 1)
    noise_std = check_float("noise_std", noise_std, minimum=0)
    num_items = check_int("num_items", num_items, minimum=2)
    num_pairs = num_items * (num_items - 1) // 2
    if answers_per_person > num_pairs:
        raise InputDataError(
            f"answers_per_person must be at most the {num_pairs} pairs of "
            f"num_items={num_items} items (each pair answered once per person); got "
            f"answers_per_person={answers_per_person}. Ask fewer pairs or add items."
        )
    world, gen = _planted_world(
        num_people,
        num_items,
        dim,
        num_tastes,
        residual_scale,
        person_feature_dim,
        seed,
        item_effect_scale,
    )
    pairs = torch.triu_indices(num_items, num_items, offset=1).T  # pairs x 2
    keys = torch.rand(num_people, num_pairs, generator=gen)
    chosen = pairs[keys.argsort(dim=-1)[:, :answers_per_person]]  # P x a x 2
    u = world.utilities.gather(1, chosen.flatten(1)).view(chosen.shape)  # P x a x 2
    noise = noise_std * torch.randn(u.shape, dtype=DTYPE, generator=gen)
    first = (u + noise).diff(dim=-1).squeeze(-1) < 0  # P x a: the first wins
    ordered = torch.where(first.unsqueeze(-1), chosen, chosen.flip(-1))
    return replace(world, answers=_by_person(ordered))


def planted_rankings(
    num_people: int = 300,
    num_items: int = 100,
    items_per_person: int = 10,
    dim: int = 3,
    num_tastes: int = 2,
    noise_std: float = 1.25,
    residual_scale: float = 0.2,
    person_feature_dim: int = 2,
    seed: int = 0,
    item_effect_scale: float = 0.0,
) -> PlantedPopulation:
    r"""The planted world of :func:`planted_population`, each person ranking
    a few items rather than answering pairs.

    Person ``p`` ranks ``items_per_person`` distinct items, drawn uniformly,
    by reading each one's utility once with Thurstone noise,
    ``f_p(x) + N(0, noise_std²)``, and ordering them; their answers are the
    ranking's ``r (r - 1) / 2`` pairs, the better-ranked item the winner. So
    one person's answers are always consistent (transitive), and any one of
    their pairs follows ``P(a ≻ b) = Φ((f_p(a) − f_p(b)) / (√2 · noise_std))``
    as in :func:`planted_population`. This is the shape of real ranking data
    sets where each respondent orders a handful of a large pool's items.

    With the same ``seed`` and the world's arguments (all but
    ``items_per_person`` and ``noise_std``), the world (items, utilities,
    tastes, weights, features, item effects) is the one
    :func:`planted_population` draws: only the answers differ.

    Args:
        num_people: ``P >= 1`` people.
        num_items: ``n >= 2`` items.
        items_per_person: ``r``, from 2 to ``n``, the items each person ranks.
        dim: ``d >= 1``, the items' dimension.
        num_tastes: ``K >= 0`` tastes.
        noise_std: ``σ >= 0`` of the noise on each utility read (0: every
            ranking follows the utility).
        residual_scale: ``>= 0``, the sd of each person's own residual.
        person_feature_dim: ``e >= 0`` person features.
        seed: Seed of the one generator of every draw.
        item_effect_scale: ``>= 0``, the sd of each item's own effect.

    Returns:
        A :class:`PlantedPopulation` with ``m = P · r (r - 1) / 2`` answers,
        grouped by person in order.

    Raises:
        InputTypeError: An argument of the wrong type.
        InputDataError: An argument out of range, e.g. more items per person
            than there are items.

    Example:
        >>> pop = planted_rankings(num_people=50, items_per_person=6, seed=1)
        >>> pop.answers.shape  # 50 people x 15 pairs, x (person, winner, loser)
    """
    num_items = check_int("num_items", num_items, minimum=2)
    items_per_person = check_int("items_per_person", items_per_person, minimum=2)
    noise_std = check_float("noise_std", noise_std, minimum=0)
    if items_per_person > num_items:
        raise InputDataError(
            f"items_per_person must be at most num_items={num_items} (each person "
            f"ranks distinct items); got items_per_person={items_per_person}. "
            "Rank fewer items or add items."
        )
    world, gen = _planted_world(
        num_people,
        num_items,
        dim,
        num_tastes,
        residual_scale,
        person_feature_dim,
        seed,
        item_effect_scale,
    )
    keys = torch.rand(num_people, num_items, generator=gen)
    ranked = keys.argsort(dim=-1)[:, :items_per_person]  # P x r items
    read = world.utilities.gather(1, ranked)  # P x r
    read = read + noise_std * torch.randn(read.shape, dtype=DTYPE, generator=gen)
    ranked = ranked.gather(1, read.argsort(dim=-1, descending=True))  # best first
    better, worse = torch.triu_indices(items_per_person, items_per_person, offset=1)
    ordered = torch.stack([ranked[:, better], ranked[:, worse]], -1)  # P x a x 2
    return replace(world, answers=_by_person(ordered))


def _by_person(ordered: Tensor) -> Tensor:
    r"""``P x a x 2`` answers (winner, loser) as ``P a x 3`` rows
    ``(person, winner, loser)``, grouped by person in order."""
    people = torch.arange(ordered.shape[0]).repeat_interleave(ordered.shape[1])
    return torch.cat([people.unsqueeze(-1), ordered.reshape(-1, 2)], -1)


def _planted_world(
    num_people: int,
    num_items: int,
    dim: int,
    num_tastes: int,
    residual_scale: float,
    person_feature_dim: int,
    seed: int,
    item_effect_scale: float,
) -> tuple[PlantedPopulation, torch.Generator]:
    r"""The planted world without answers (``0 x 3``), and the generator its
    draws left, for the answers' draws."""
    num_people = check_int("num_people", num_people, minimum=1)
    num_items = check_int("num_items", num_items, minimum=2)
    dim = check_int("dim", dim, minimum=1)
    num_tastes = check_int("num_tastes", num_tastes, minimum=0)
    residual_scale = check_float("residual_scale", residual_scale, minimum=0)
    item_effect_scale = check_float("item_effect_scale", item_effect_scale, minimum=0)
    person_feature_dim = check_int("person_feature_dim", person_feature_dim, 0)
    seed = check_seed("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    sobol_seed = int(torch.randint(2**31, (1,), generator=gen))
    designs = SobolEngine(dim, scramble=True, seed=sobol_seed).draw(num_items)
    designs = designs.to(DTYPE)  # n x d
    functions = _smooth_draws(designs, 1 + num_tastes, gen)  # (1 + K) x n
    shared, tastes = functions[0], functions[1:].T  # n, n x K
    loadings = torch.randn(num_tastes, person_feature_dim, dtype=DTYPE, generator=gen)
    loadings = loadings / loadings.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    features = torch.randn(num_people, person_feature_dim, dtype=DTYPE, generator=gen)
    eps = torch.randn(num_people, num_tastes, dtype=DTYPE, generator=gen)
    weights = features @ loadings.T + eps  # P x K
    residuals = residual_scale * _smooth_draws(designs, num_people, gen)  # P x n
    item_effects = torch.zeros(num_items, dtype=DTYPE)
    if item_effect_scale > 0:  # drawn only where asked: other seeds' worlds stay
        item_effects = item_effect_scale * torch.randn(
            num_items, dtype=DTYPE, generator=gen
        )
    world = PlantedPopulation(
        designs=designs,
        answers=torch.empty(0, 3, dtype=torch.long),
        person_features=features,
        utilities=shared + weights @ tastes.T + residuals + item_effects,  # P x n
        tastes=tastes,
        shared=shared,
        weights=weights,
        item_effects=item_effects,
    )
    return world, gen


def _smooth_draws(designs: Tensor, num: int, gen: torch.Generator) -> Tensor:
    r"""``num`` independent draws at the ``n x d`` ``designs`` of a zero-mean
    RBF GP (lengthscale :data:`LENGTHSCALE`, outputscale 1), each by
    :data:`FEATURES` random Fourier features; ``num x n``."""
    d = designs.shape[-1]
    omega = torch.randn(num, FEATURES, d, dtype=DTYPE, generator=gen) / LENGTHSCALE
    phase = 2 * math.pi * torch.rand(num, FEATURES, 1, dtype=DTYPE, generator=gen)
    coef = torch.randn(num, 1, FEATURES, dtype=DTYPE, generator=gen)
    basis = torch.cos(omega @ designs.T + phase)  # num x F x n
    return math.sqrt(2.0 / FEATURES) * (coef @ basis).squeeze(-2)  # num x n


def game_rankings() -> Population:
    r"""``Game.csv``'s 91 students' rankings of 6 gaming platforms as pairs.

    The items are the platforms (:data:`PLATFORMS`), one-hot: an item's
    identity is its only design feature. Each student's ranking (``ch.*``,
    rank 1 best) gives all 15 pairs of platforms, the better-ranked one the
    winner. A student's features are the 6 ownership bits (``own.*``, in the
    order of :data:`PLATFORMS`), then their age and weekly hours of play,
    each standardised over the 91 students (mean 0, sd 1).

    Returns:
        A :class:`Population`: ``designs`` ``6 x 6`` (the identity),
        ``answers`` ``1365 x 3`` (15 per student, students in file order),
        ``person_features`` ``91 x 8``.

    Raises:
        InputDataError: A student's ranks are not a permutation of 1 … 6.
    """
    from prefbo.datasets import read_csv  # the package imports this module

    rows = read_csv("Game.csv")
    ranks = torch.tensor([[int(r[f"ch.{p}"]) for p in PLATFORMS] for r in rows])
    expected = torch.arange(1, len(PLATFORMS) + 1)
    bad = [i for i, r in enumerate(ranks) if not torch.equal(r.sort().values, expected)]
    if bad:
        raise InputDataError(
            f"Game.csv: each student's ch.* ranks must be a permutation of 1 to "
            f"{len(PLATFORMS)}; rows {bad[:5]} are not (first: "
            f"{ranks[bad[0]].tolist()})."
        )
    own = torch.tensor(
        [[float(r[f"own.{p}"]) for p in PLATFORMS] for r in rows], dtype=DTYPE
    )
    other = torch.tensor(
        [[float(r["age"]), float(r["hours"])] for r in rows], dtype=DTYPE
    )
    other = (other - other.mean(0)) / other.std(0)
    i, j = torch.triu_indices(len(PLATFORMS), len(PLATFORMS), offset=1)
    first = ranks[:, i] < ranks[:, j]  # P x 15: the first platform ranks better
    winners, losers = torch.where(first, i, j), torch.where(first, j, i)
    people = torch.arange(len(rows)).unsqueeze(-1).expand_as(winners)
    answers = torch.stack([people, winners, losers], -1).reshape(-1, 3)  # m x 3
    return Population(
        designs=torch.eye(len(PLATFORMS), dtype=DTYPE),
        answers=answers,
        person_features=torch.cat([own, other], -1),
    )
