r"""Questions of many people at once, from a collaborative model.

A :class:`~prefbo.models.collaborative.CollaborativePreferenceGP` gives each
person a posterior of their own, so the questions of every person waiting
for one come from one batched step: the pair of :func:`candidates` that
each person's posterior prefers by EUBO (or by a Thompson draw),
:func:`ask_people`. A person looking at a question is asked at the
posterior after the answer they more likely give to it ("kriging
believer", Ginsbourger et al. 2010), so the next question is ready before
that answer comes, and is never that question again.

:meth:`QuestionMaker.for_people <prefbo.loop.QuestionMaker.for_people>`
composes the two over the maker's box; it is what
:class:`~prefbo.loop.PopulationStudy`'s collaborative kind asks with.

Example:
    >>> X = candidates(None, 2, seed=0)                    # C x 2
    >>> pairs = ask_people(model, torch.tensor([0, 3]), X, [None, shown])
    >>> pairs.shape                                         # 2 x 2 x 2
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.loop.boundary import DEFAULT_STEP, face_columns
from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.models.collaborative.people import PersonPosterior
from prefbo.models.collaborative.questions import (
    believed_answers,
    imagined_posteriors,
    next_questions,
)
from prefbo.space import Space
from prefbo.utils.checks import describe
from prefbo.utils.threads import limited

#: Candidates of a question where the space has more designs than
#: :data:`LISTED` (or is a box).
CANDIDATES = 128
#: A space with at most this many designs offers every one as a candidate.
LISTED = 512
#: The loop's strategies (:mod:`prefbo.loop.strategies`) that the batched
#: step runs, by name, with the step's name of each.
BATCHED_STRATEGIES = {"eubo": "eubo", "ts": "thompson"}


def candidates(
    space: Space | None,
    dim: int,
    seed: int,
    count: int = CANDIDATES,
    step: float | None = DEFAULT_STEP,
) -> Tensor:
    r"""Distinct designs to choose questions from.

    A model fitted on a few dozen answers extrapolates towards the faces and
    corners, and EUBO, which rewards that and the variance there, would ask
    there (the loop answers this with virtual comparisons at the faces,
    :mod:`prefbo.loop.boundary`; a candidate seldom lies on a face for that
    rule). So the continuous columns of the candidates lie ``step`` (by
    default :data:`~prefbo.loop.boundary.DEFAULT_STEP`) inside the faces;
    the price is that a person whose best design lies on a face is brought
    to within a step of it (``step=None``: the whole box).

    Args:
        space: The designs' :class:`~prefbo.space.Space`, or ``None`` for
            the unit cube.
        dim: The model columns ``d`` (a space's ``space.dim``).
        seed: The draw's seed.
        count: How many to draw (not for a listed space).
        step: How far inside the faces of the continuous columns, in units
            of their range, or ``None``.

    Returns:
        ``C x d`` float64 model points (the unit cube's, a space's): every
        design of a space of at most :data:`LISTED`, else ``count`` uniform
        ones of the space (a box: scrambled Sobol points of the unit cube),
        duplicates dropped.
    """
    if space is None:
        sobol = SobolEngine(dim, scramble=True, seed=seed)
        X = sobol.draw(count, dtype=torch.float64)  # C x d
    else:
        size = space.size
        if size is not None and size <= LISTED:
            return space.grid().to(torch.float64)
        X = space.sample(count, seed=seed).unique(dim=0).to(torch.float64)
    if step is not None:
        columns = face_columns(space, dim)
        X[:, columns] = step + (1 - 2 * step) * X[:, columns]
    return X


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
    if not isinstance(people, Tensor) or people.is_floating_point() or people.ndim != 1:
        raise InputTypeError(
            "people must be a 1-d integer tensor of the model's person ids; got "
            f"{describe(people)}."
        )
    P = model.num_people
    if len(people) and (int(people.min()) < 0 or int(people.max()) >= P):
        raise InputDataError(
            f"people must be the model's person ids, in [0, {P}); got values from "
            f"{int(people.min())} to {int(people.max())} (add a newcomer with "
            "model.add_person() first)."
        )
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
            not isinstance(options, Tensor) or options.shape != (2, d)
        ):
            raise InputDataError(
                f"shown[{b}] must be the 2 x {d} options on person "
                f"{int(people[b])}'s screen (model points), or None; got "
                f"{describe(options)}."
            )


def ask_people(
    model: CollaborativePreferenceGP,
    people: Tensor,
    X: Tensor,
    shown: Sequence[Tensor | None],
    strategy: str = "eubo",
    seed: int = 0,
) -> Tensor:
    r"""The questions of ``B`` people from the candidates ``X``, in one
    batched step.

    Each person's question is the pair of candidates of highest EUBO at
    their posterior, or of a Thompson draw of it
    (:func:`~prefbo.models.collaborative.questions.next_questions`). A
    person looking at a question is asked at the posterior after the answer
    their model finds likelier
    (:func:`~prefbo.models.collaborative.questions.believed_answers`), and
    is not asked that question again.

    Args:
        model: The collaborative model (inputs: model points).
        people: ``B`` person ids of ``model``.
        X: ``C x d`` candidates (:func:`candidates`), ``C >= 2``.
        shown: ``B`` entries, each the ``2 x d`` options of the question on
            that person's screen (model points), or ``None``.
        strategy: ``"eubo"`` or ``"thompson"``.
        seed: Seed of Thompson's draws.

    Returns:
        ``B x 2 x d`` questions, rows of ``X``.

    Raises:
        InputTypeError, InputDataError: See :func:`check_people`.
    """
    check_people(model, people, shown)
    mean = model.latent_mean[people].clone()
    chol = model.latent_precision_chol[people].clone()
    looking = [b for b, options in enumerate(shown) if options is not None]
    if looking:
        at = torch.tensor(looking, device=people.device)
        options = torch.stack([shown[b] for b in looking]).to(model.designs)
        with torch.no_grad(), limited(16 * len(looking)):
            rows = model.design_rows(options.reshape(-1, options.shape[-1]))
            rows = rows.reshape(len(looking), 2)  # looking x 2
            choice = believed_answers(model, people[at], options).unsqueeze(-1)
            win = rows.gather(-1, choice).squeeze(-1)
            lose = rows.gather(-1, 1 - choice).squeeze(-1)
            post = imagined_posteriors(model, people[at], win, lose)
        mean[at], chol[at] = post.mean.to(mean), post.precision_chol.to(chol)
    exclude = torch.full((len(people), 2), -1, dtype=torch.long)
    for b in looking:  # the question on screen is not asked again
        same = (shown[b].to(X).unsqueeze(1) == X.unsqueeze(0)).all(-1)  # 2 x C
        if bool(same.any(-1).all()):
            exclude[b] = same.long().argmax(-1)
    pairs = next_questions(
        model,
        people,
        X,
        strategy=strategy,
        seed=seed,
        latent=PersonPosterior(mean, chol),
        exclude=exclude,
    )  # B x 2
    return X[pairs]
