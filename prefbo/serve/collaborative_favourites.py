r"""The favourites of a served collaborative study, for the researcher's page.

:func:`favourites_of` gives what
:meth:`~prefbo.serve.engine.QuestionEngine.favourites` gives for the exact
kinds: the population's favourite, with slices of its utility through it,
and each participant's, each the told design of highest posterior mean (the
population's among everyone's told designs, a participant's among their
own) with the posterior mean and sd there. The means come from one pass over
every participant's told designs (:func:`told_means`, ``O(n)`` memory), the
sds at the favourites only (:func:`utility`, in chunks of
:data:`FAVOURITES_CHUNK` people).

Example:
    >>> out = favourites_of(model, space, {7: told}, {7: 0})
    >>> out["participants"]["7"]["values"]
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.models.collaborative.people import PersonPosterior
from prefbo.serve.answered import Told
from prefbo.serve.engine import favourite, utility_slices
from prefbo.space import Space
from prefbo.utils.threads import limited

#: People whose favourites' sds are computed at once (``B x B`` moments).
FAVOURITES_CHUNK = 64


def told_designs(told: list[Told]) -> Tensor:
    r"""The distinct designs of a participant's answers (winners and losers;
    not the virtual comparisons' designs)."""
    return torch.stack([x for t in told for x in (t.winner, t.loser)]).unique(dim=0)


def utility(
    model: CollaborativePreferenceGP, people: list[int | None], X: Tensor
) -> tuple[Tensor, Tensor]:
    r"""Posterior means and sds ``B x n`` of ``people``'s utilities
    (``None``: the population's) at ``n x dim`` model points."""
    posts = [model.posterior_of(p) for p in people]
    latent = PersonPosterior(
        torch.cat([p.mean for p in posts]),
        torch.cat([p.precision_chol for p in posts]),
    )
    with torch.no_grad(), limited(len(people) * X.shape[0]):
        mean, cov = model.moments(X.to(model.designs).unsqueeze(1), latent)
    return mean[..., 0], cov[..., 0, 0].clamp_min(0).sqrt()


def told_means(
    model: CollaborativePreferenceGP, X: Tensor, people: list[int], counts: list[int]
) -> tuple[Tensor, Tensor]:
    r"""Posterior means at ``n x dim`` model points ``X``, the rows of each
    of ``people`` in turn (``counts[b]`` rows of ``people[b]``): the
    population's utility at every row, and each row's person's. ``O(n)``
    memory: the mean part of
    :meth:`~prefbo.models.collaborative.CollaborativePreferenceGP.moments`
    at each row for one person, not every person at every row."""
    X = X.to(model.designs)
    owner = torch.repeat_interleave(torch.tensor(people), torch.tensor(counts))
    with torch.no_grad(), limited(X.shape[0]):
        _, offset, rows = model.shared.person_rows(X, model.item_ids(X))
        population = offset + rows @ model.posterior_of(None).mean[0]
        own = offset + (rows * model.latent_mean[owner]).sum(-1)
    return population, own


def favourites_of(
    model: CollaborativePreferenceGP,
    space: Space,
    told: dict[int, list[Told]],
    people: dict[int, int],
) -> dict[str, Any]:
    r"""The favourites of the population and of each participant (see the
    module docstring).

    Args:
        model: The fitted collaborative model (its inputs ``space``'s model
            points).
        space: The study's space.
        told: Participant id to their answers in force (at least one each).
        people: Participant id to their person in ``model``.

    Returns:
        ``{"population": ..., "slices": ..., "participants": {id: ...}}``,
        each favourite as :func:`~prefbo.serve.engine.favourite` gives it.
    """
    pids = list(told)
    designs = [told_designs(told[pid]) for pid in pids]
    X = torch.cat(designs)
    persons = [people[pid] for pid in pids]
    counts = [len(x) for x in designs]
    population, own = told_means(model, X, persons, counts)
    top = X[population.argmax()].unsqueeze(0)
    out: dict[str, Any] = {"population": _best(model, space, [None], top)[0]}
    out["slices"] = utility_slices(
        space,
        out["population"]["values"],
        lambda Z: tuple(t[0] for t in utility(model, [None], Z)),
    )
    best = torch.stack(
        [x[m.argmax()] for x, m in zip(designs, own.split(counts), strict=True)]
    )
    each = _best(model, space, persons, best)
    out["participants"] = {str(pid): f for pid, f in zip(pids, each, strict=True)}
    return out


def _best(
    model: CollaborativePreferenceGP,
    space: Space,
    people: list[int | None],
    X: Tensor,
) -> list[dict[str, Any]]:
    r"""Person ``people[b]``'s favourite at ``X[b]``, with its posterior mean
    and sd (in chunks of :data:`FAVOURITES_CHUNK` people)."""
    out = []
    for start in range(0, len(people), FAVOURITES_CHUNK):
        chunk = people[start : start + FAVOURITES_CHUNK]
        x = X[start : start + FAVOURITES_CHUNK]
        mean, sd = utility(model, chunk, x)
        for b in range(len(chunk)):
            m, s = float(mean[b, b]), float(sd[b, b])
            out.append(favourite(space, x[b : b + 1], m, s))
    return out
