r"""The models a served collaborative study's engine
(:class:`~prefbo.serve.collaborative.CollaborativeEngine`) holds: the
prior before its first fit, a model built from the answers (fitted, or at
a saved shared part) and the shared part it saves.

Every one is a :func:`~prefbo.loop.study_collaborative.study_model`, as
:class:`~prefbo.loop.PopulationStudy`'s: the study's sizes and no item
effects (its design table holds a row per compared design, not a pool's
items).
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor

from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.fitted import seeded
from prefbo.loop.study_collaborative import NUM_INDUCING, fit_seed, study_model
from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.serve.answered import Told
from prefbo.serve.config import StudyConfig

log = logging.getLogger("prefbo.serve")

#: Gradient steps of the first fit. It comes at ``initial_random`` answers
#: (a handful), and refits warm-started from it follow at every quarter's
#: growth; participants get the prior model's questions until it is done.
BUILD_STEPS = 100

#: The state-dict prefixes of the saved shared part.
SHARED = "shared."
SAVED_PREFIXES = (SHARED, "likelihood.")


def prior_model(config: StudyConfig) -> CollaborativePreferenceGP:
    r"""The model of study ``config`` before any fit: no one yet, its design
    table and inducing points the space's Sobol points of
    :func:`~prefbo.loop.study_collaborative.fit_seed` at ``0`` answers,
    every shared function's posterior its prior
    (:meth:`SharedFunctions.to_prior
    <prefbo.models.collaborative.shared.SharedFunctions.to_prior>`), the
    hyperparameters where a fit starts them."""
    s = fit_seed(config.seed, 0)
    Z = config.space.sample(NUM_INDUCING, seed=s).double()
    model = study_model(Z, torch.zeros(0, 3, dtype=torch.long), 0, s, Z)
    model.shared.to_prior()
    return model


def build_model(
    config: StudyConfig,
    data: dict[int, list[Told]],
    m: int,
    saved: dict[str, Tensor] | None = None,
) -> tuple[CollaborativePreferenceGP, dict[int, int]]:
    r"""The model of study ``config`` at participants' answers ``data``
    (``m`` in all): fitted from scratch (:data:`BUILD_STEPS` steps), or at
    the ``saved`` shared part (:func:`shared_state` of an engine of the same
    study; only the people's posteriors made) where it fits.

    Returns:
        The model and participant id to person.
    """
    pids = sorted(data)
    persons = {pid: i for i, pid in enumerate(pids)}
    designs, rows = [], []
    for pid in pids:
        for told in data[pid]:
            for winner, loser in zip(*told.comparisons(), strict=True):
                n = len(designs)
                designs += [winner, loser]
                rows.append((persons[pid], n, n + 1))
    s = fit_seed(config.seed, m)
    if saved is not None:
        inducing = saved[SHARED + "Z"]
    else:
        inducing = config.space.sample(NUM_INDUCING, seed=s).double()
    with seeded(s), expected_fit_warnings(), torch.enable_grad():
        model = study_model(
            torch.stack(designs), torch.tensor(rows), len(pids), s, inducing
        )
        if saved is None or not load_shared(model, saved):
            model.fit(steps=BUILD_STEPS, seed=s)
        else:  # the saved fit: only the people's posteriors to make
            model.fit(steps=0, seed=s)
    return model, persons


def shared_state(model: CollaborativePreferenceGP) -> dict[str, Tensor]:
    r"""The shared part of ``model`` (the shared functions, the likelihood),
    detached, for :func:`build_model`'s ``saved``."""
    return {
        k: v.detach().clone()
        for k, v in model.state_dict().items()
        if k.startswith(SAVED_PREFIXES)
    }


def load_shared(model: CollaborativePreferenceGP, state: dict[str, Tensor]) -> bool:
    r"""Load a saved shared part into ``model``; ``False`` (logged) where it
    does not fit (another study's, another version's)."""
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except (RuntimeError, KeyError, ValueError) as e:
        log.warning("the saved collaborative model does not fit: %s; fitting", e)
        return False
    lost = [k for k in missing if k.startswith(SAVED_PREFIXES)]
    if lost or unexpected:
        log.warning(
            "the saved collaborative model lacks %s, has extra %s; fitting",
            lost[:3],
            list(unexpected)[:3],
        )
        return False
    return True
