r"""One participant's question from a collaborative model, as the loop asks.

The batched step (:mod:`prefbo.loop.people_questions`) chooses each
person's pair among candidate designs. Where one person is asked at a
time, :func:`ask_person` asks as the single-person loop does instead: the
strategy's question from the question maker's continuous search
(:meth:`QuestionMaker.from_model
<prefbo.loop.QuestionMaker.from_model>`) on the person's view of the
model, with the virtual comparisons at the box's faces of
:mod:`prefbo.loop.boundary` ("the design a step inside is preferred") for
every option it proposes on a face, computed again
(:func:`~prefbo.loop.boundary.ask_off_faces`, the loop's rounds) at the
person's posterior with those comparisons imagined
(:func:`~prefbo.loop.people_questions.imagined_people`; the
stored posterior is not changed). The comparisons come back with the
question: its answer carries them, so they become the person's answers
only if the question is answered.

:class:`~prefbo.loop.PopulationStudy`'s collaborative kind asks so a
participant alone in the study (no one else has answered: their posterior
is a single person's; :meth:`CollaborativeState.ask
<prefbo.loop.study_collaborative.CollaborativeState.ask>`). On
``benchmarks/population_study.py``'s setting, the study's first
participant ended at a regret of 0.36 (mean of 20 seeds) after 12 answers
with the batched step without virtual comparisons at the faces and at
0.06 this way, level with the loop alone (0.07). Asked so once others had
answered too, the next three participants ended worse than with that
batched step (0.096 against 0.043 on six seeds). The batched step with its
comparisons was not measured against this path in a study; served, for a
lone participant, this path ended at 0.057 and the batched step at 0.096
(``benchmarks/results/serve_lone.md``).

Example:
    >>> question, virtual, fallback = ask_person(maker, model, 0, asked, seed, best)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from prefbo.loop.boundary import ask_off_faces
from prefbo.loop.people_questions import imagined_people
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.repeats import RepeatRule
from prefbo.models.collaborative import (
    CollaborativePreferenceGP,
    PersonModel,
    PersonPosterior,
)


def imagined(
    model: CollaborativePreferenceGP, person: int, pairs: Sequence[Tensor]
) -> PersonPosterior:
    r"""``person``'s posterior after the comparisons ``pairs`` (``2 x d``
    ``[winner, loser]`` model inputs each), not stored (their designs join
    the model's design table)."""
    people = torch.tensor([person], device=model.designs.device)
    return imagined_people(model, people, [list(pairs)])


def ask_person(
    maker: QuestionMaker,
    model: CollaborativePreferenceGP,
    person: int,
    asked: Sequence[Tensor],
    seed: int,
    best: Callable[[], Tensor],
) -> tuple[Tensor, Tensor | None, bool]:
    r"""``person``'s next question (see the module docstring).

    Args:
        maker: The question maker (its box's model coordinates are the
            model's inputs; its ``inset``, the virtual comparisons' step in
            units of the box's width, ``None``: none, the strategy's
            question as it comes).
        model: The collaborative model.
        person: The person's id in ``model``.
        asked: The person's questions so far, ``q x d`` model inputs each
            (the rule of :mod:`prefbo.loop.repeats` does not ask them again
            without cause).
        seed: The question's seed (each round's search runs under it).
        best: The person's recommendation as a ``d`` model input (called by
            the strategies that use it).

    Returns:
        ``(question, virtual, fallback)``: the ``q x d`` question (box
        coordinates), the ``k x 2 x d`` virtual comparisons ``[inner,
        face]`` (box coordinates) its answer carries, or ``None``, and
        whether the question is a random one because the strategy found
        nothing worth asking.
    """
    box, step = maker.box, maker.inset
    virtual: list[Tensor] = []  # 2 x d [inner, face] each, box coordinates
    latent = None

    def view() -> PersonModel:  # at the posterior with the comparisons
        return model.person_model(person, latent)

    def ask() -> tuple[Tensor, bool]:
        return maker.from_model(RepeatRule(view(), asked), seed, best)

    def propose(pairs: list[Tensor]) -> None:
        nonlocal latent
        virtual.extend(pairs)
        latent = imagined(model, person, [box.to_model(v) for v in virtual])

    def allowed(new: Tensor) -> bool:
        return RepeatRule(view(), asked).allowed(new)

    if step is None:
        question, fallback = ask()
        return question, None, fallback
    question, fallback = ask_off_faces(ask, propose, allowed, box, step)
    return question, torch.stack(virtual) if virtual else None, fallback
