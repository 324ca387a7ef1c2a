r"""Questions of many people at once, from a collaborative model.

A :class:`~prefbo.models.collaborative.CollaborativePreferenceGP` gives each
person a posterior of their own, so the questions of every person waiting
for one come from one batched step: the pair of :func:`candidates` that
each person's posterior prefers by EUBO (or by a Thompson draw),
:func:`ask_people`. A person looking at a question is asked at the
posterior after the answer they more likely give to it ("kriging
believer", Ginsbourger et al. 2010), so the next question is ready before
that answer comes, and is never that question again.

As the single-person loop does (:mod:`prefbo.loop.boundary`), the step
gives every option it proposes on a face of the box the virtual comparison
"the design a step inside is preferred" and computes that person's
question again at their posterior with it, up to
:data:`~prefbo.loop.boundary.ROUNDS` times; an option still on a face is
then asked a step inside. Unlike the loop, which adds a face's comparison
again in each round that proposes it, a question makes each comparison
once (a repeat would count one virtual answer as several); a question that
proposes only faces whose comparisons it already has is asked a step
inside at once. The comparisons come back with the question, and its
answer carries them.

Without them EUBO at a broad posterior (a person with few answers, whose
own part the shared functions do not explain) asked pairs of the
candidates' far corners: six people of two planted groups, ten answers
each, ended with best designs 0.30 from their favourites on average
(study seeds 0-11); with them, 0.069 (59 of the 72 within 0.1).

:meth:`QuestionMaker.for_people <prefbo.loop.QuestionMaker.for_people>`
composes the two over the maker's box; it is what
:class:`~prefbo.loop.PopulationStudy`'s collaborative kind and ``prefbo
serve`` ask with.

Example:
    >>> box = DesignBox(torch.tensor([[0.0, 0.0], [1.0, 1.0]]))
    >>> X = candidates(None, 2, seed=0)                    # C x 2
    >>> asked = ask_people(
    ...     model, torch.tensor([0, 3]), X, [None, shown], box=box, step=DEFAULT_STEP
    ... )
    >>> asked.questions.shape                               # 2 x 2 x 2
    >>> asked.virtual[0]                     # k x 2 x 2 [inner, face], or None
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.loop.boundary import (
    DEFAULT_STEP,
    ROUNDS,
    face_columns,
    face_comparisons,
    off_faces,
)
from prefbo.loop.box import DesignBox
from prefbo.loop.people_checks import check_in_box, check_people, check_virtual
from prefbo.loop.repeats import RepeatRule, near_copy_mask, repeat_mask
from prefbo.loop.strategies import Thompson
from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.models.collaborative.people import PersonPosterior
from prefbo.models.collaborative.person_model import PersonModel
from prefbo.models.collaborative.questions import (
    believed_answers,
    imagined_posteriors,
    next_questions,
    pair_eubo,
)
from prefbo.space import Space

#: Candidates of a question where the space has more designs than
#: :data:`LISTED` (or is a box).
CANDIDATES = 128
#: A space with at most this many designs offers every one as a candidate.
LISTED = 512
#: The pairs of highest EUBO among which the repeat rule chooses a person's
#: question instead of one asked before (:func:`repeat_rule`).
RULE_PAIRS = 256
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
    there; the batched step answers this as the loop does, with virtual
    comparisons at the faces (:func:`ask_people`). So that options on a face
    are there to be proposed and given their comparisons, the continuous
    columns of the uniform draw that lie within ``step`` of a face (by
    default :data:`~prefbo.loop.boundary.DEFAULT_STEP`, the comparisons'
    step) are moved onto it: a draw's outer band becomes the faces.

    Args:
        space: The designs' :class:`~prefbo.space.Space`, or ``None`` for
            the unit cube.
        dim: The model columns ``d`` (a space's ``space.dim``).
        seed: The draw's seed.
        count: How many to draw (not for a listed space).
        step: The width of the band moved onto the faces of the continuous
            columns, in units of their range, or ``None``: none (the draw
            as it comes).

    Returns:
        ``C x d`` float64 model points (the unit cube's, a space's): every
        design of a space of at most :data:`LISTED`, else ``count`` uniform
        ones of the space (a box: scrambled Sobol points of the unit cube),
        their bands moved onto the faces, duplicates dropped.
    """
    if space is None:
        sobol = SobolEngine(dim, scramble=True, seed=seed)
        X = sobol.draw(count, dtype=torch.float64)  # C x d
    else:
        size = space.size
        if size is not None and size <= LISTED:
            return space.grid().to(torch.float64)
        X = space.sample(count, seed=seed).to(torch.float64)
    if step is not None:
        columns = face_columns(space, dim)
        Z = X[:, columns]
        Z = torch.where(Z < step, 0.0, torch.where(Z > 1 - step, 1.0, Z))
        X[:, columns] = Z
    return X.unique(dim=0)


class PeopleQuestions(NamedTuple):
    r"""The questions of a batched step (:func:`ask_people`).

    Attributes:
        questions: ``B x 2 x d`` questions (model points).
        virtual: ``B`` entries: the ``k x 2 x d`` virtual comparisons
            ``[inner, face]`` (model points) person ``b``'s question carries
            to its answer, or ``None``.
    """

    questions: Tensor
    virtual: list[Tensor | None]


def imagined_people(
    model: CollaborativePreferenceGP,
    people: Tensor,
    pairs: Sequence[Sequence[Tensor]],
) -> PersonPosterior:
    r"""The posteriors of ``B`` people after comparisons not stored.

    Args:
        model: The collaborative model.
        people: ``B`` person ids.
        pairs: ``B`` entries, each a list of ``2 x d`` ``[winner, loser]``
            model points (their designs join the model's design table).

    Returns:
        Their posteriors with the comparisons imagined
        (:func:`~prefbo.models.collaborative.questions.imagined_posteriors`);
        a person of none keeps their stored one.
    """
    mean = model.latent_mean[people].clone()
    chol = model.latent_precision_chol[people].clone()
    some = [b for b, own in enumerate(pairs) if len(own)]
    if some:
        k = max(len(pairs[b]) for b in some)
        rows = model.design_rows(torch.cat([torch.cat(list(pairs[b])) for b in some]))
        winners = torch.zeros(len(some), k, dtype=torch.long, device=rows.device)
        losers, mask = winners.clone(), winners.bool()
        start = 0
        for i, b in enumerate(some):
            n = len(pairs[b])
            own = rows[start : start + 2 * n]
            winners[i, :n], losers[i, :n], mask[i, :n] = own[0::2], own[1::2], True
            start += 2 * n
        at = torch.tensor(some, device=people.device)
        post = imagined_posteriors(model, people[at], winners, losers, mask)
        mean[at], chol[at] = post.mean.to(mean), post.precision_chol.to(chol)
    return PersonPosterior(mean, chol)


def ask_people(
    model: CollaborativePreferenceGP,
    people: Tensor,
    X: Tensor,
    shown: Sequence[Tensor | None],
    strategy: str = "eubo",
    seed: int = 0,
    shown_virtual: Sequence[Tensor | None] | None = None,
    box: DesignBox | None = None,
    step: float | None = None,
    asked: Sequence[Tensor | None] | None = None,
) -> PeopleQuestions:
    r"""The questions of ``B`` people from the candidates ``X``, in one
    batched step.

    Each person's question is the pair of candidates of highest EUBO at
    their posterior, or of a Thompson draw of it
    (:func:`~prefbo.models.collaborative.questions.next_questions`). A
    person looking at a question is asked at the posterior after the
    comparisons it carries and the answer to it their model finds likelier
    (:func:`~prefbo.models.collaborative.questions.believed_answers`), and
    is not asked that question again. Given a ``box`` and a ``step``, every
    option proposed on a face of the box gets its virtual comparison and
    the person's question is computed again with it (see the module
    docstring).

    Args:
        model: The collaborative model (inputs: model points).
        people: ``B`` person ids of ``model``.
        X: ``C x d`` candidates (:func:`candidates`), ``C >= 2``.
        shown: ``B`` entries, each the ``2 x d`` options of the question on
            that person's screen (model points), or ``None``.
        strategy: ``"eubo"`` or ``"thompson"``.
        seed: Seed of Thompson's draws (the same in every round).
        shown_virtual: ``B`` entries, the virtual comparisons each question
            on screen carries (:func:`check_virtual`), or ``None``.
        box: The designs' :class:`~prefbo.loop.box.DesignBox` (its maps
            between model points and the unit cube, its space's continuous
            columns), or ``None``: no virtual comparisons (and the questions
            on screen are not checked against it).
        step: The comparisons' step in units of the box's width, or
            ``None``: none.
        asked: ``B`` entries, each the ``k x 2 x d`` questions (model
            points) person ``b`` was asked and answered, or ``None``. A
            question that repeats one of them (or holds two options within
            :data:`~prefbo.loop.repeats.REPEAT_TOL`) is asked only as the
            single-person loop's :class:`~prefbo.loop.repeats.RepeatRule`
            allows (see :func:`repeat_rule`).

    Returns:
        The :class:`PeopleQuestions`: rows of ``X``, except an option moved
        off the faces after the last round.

    Raises:
        InputTypeError, InputDataError: See :func:`check_people`,
            :func:`check_virtual` and :func:`check_in_box`.
    """
    check_people(model, people, shown)
    d = model.designs.shape[-1]
    carried = check_virtual(shown_virtual, shown, d)
    if box is not None:
        check_in_box(box, shown, carried)
    B = len(people)
    known: list[list[Tensor]] = [[] for _ in range(B)]  # 2 x d [winner, loser]
    looking = [b for b, options in enumerate(shown) if options is not None]
    if looking:
        at = torch.tensor(looking, device=people.device)
        options = torch.stack([shown[b] for b in looking]).to(model.designs)
        choice = believed_answers(model, people[at], options).tolist()
        for i, b in enumerate(looking):
            if carried[b] is not None:
                known[b].extend(carried[b].to(model.designs))
            known[b].append(options[i, [choice[i], 1 - choice[i]]])
    exclude = torch.full((B, 2), -1, dtype=torch.long)
    for b in looking:  # the question on screen is not asked again
        same = (shown[b].to(X).unsqueeze(1) == X.unsqueeze(0)).all(-1)  # 2 x C
        if bool(same.any(-1).all()):
            exclude[b] = same.long().argmax(-1)
    columns = None if box is None else face_columns(box.space, box.dim)
    questions = torch.zeros(B, 2, d, dtype=X.dtype, device=X.device)
    virtual: list[list[Tensor]] = [[] for _ in range(B)]  # 2 x d [inner, face]
    todo = list(range(B))
    settled: list[int] = []  # on faces whose comparisons they carry already
    for _ in range(ROUNDS + 1):
        if not todo:
            break
        at = torch.tensor(todo, device=people.device)
        latent = imagined_people(
            model, people[at], [known[b] + virtual[b] for b in todo]
        )
        pairs = next_questions(
            model,
            people[at],
            X,
            strategy=strategy,
            seed=seed,
            latent=latent,
            exclude=exclude[at.cpu()],
        )
        questions[at] = X[pairs]
        if asked is not None:
            for i, b in enumerate(todo):
                if asked[b] is not None and len(asked[b]):
                    own = PersonPosterior(
                        latent.mean[i : i + 1], latent.precision_chol[i : i + 1]
                    )
                    questions[b] = repeat_rule(
                        model,
                        int(people[b]),
                        own,
                        X,
                        questions[b],
                        asked[b],
                        exclude[b],
                        strategy,
                        seed,
                    )
        made = {b: _comparisons(box, questions[b], columns, step) for b in todo}
        todo = [b for b in todo if made[b]]
        again = []  # with a comparison new to them: computed again
        for b in todo:
            new = [c for c in made[b] if not any(torch.equal(c, v) for v in virtual[b])]
            virtual[b].extend(new)
            (again if new else settled).append(b)
        todo = again
    for b in todo + settled:  # on a face still: a step inside
        moved = _off_faces(box, questions[b], columns, step)
        if shown[b] is None or not box.same_question(
            box.from_model(moved), box.from_model(shown[b].to(moved))
        ):
            questions[b] = moved
    return PeopleQuestions(questions, [torch.stack(v) if v else None for v in virtual])


def repeat_rule(
    model: CollaborativePreferenceGP,
    person: int,
    latent: PersonPosterior,
    X: Tensor,
    question: Tensor,
    asked: Tensor,
    exclude: Tensor,
    strategy: str = "eubo",
    seed: int = 0,
) -> Tensor:
    r"""A person's question under the loop's repeat rule.

    Where ``question`` repeats one of the person's ``k x 2 x d`` ``asked``
    questions or holds near-copies, the rule
    (:class:`~prefbo.loop.repeats.RepeatRule`: a resolved one is not asked,
    an informative one gives way to an unasked question nearly as
    informative) chooses, as the loop's strategies do:

    - ``"eubo"``: among the :data:`RULE_PAIRS` pairs of the ``C x d``
      candidates ``X`` of highest EUBO at ``person``'s posterior ``latent``
      (one person's, the one the step used);
    - ``"thompson"``: among up to
      :attr:`Thompson.max_draws <prefbo.loop.strategies.Thompson.max_draws>`
      draws of their utility (``question`` the first, then seeds
      ``seed + 1``, ``seed + 2``, ...), the first allowed one that is no
      repeat, else by the rule, earlier draws first.

    The pair ``exclude`` (candidate rows, ``-1``: none) is left out; where
    the rule allows none, ``question`` stays.

    Returns:
        The ``2 x d`` question.
    """
    one = question.unsqueeze(0)
    if not bool(near_copy_mask(one)[0] or repeat_mask(one, asked)[0]):
        return question  # nothing for the rule to decide
    view = PersonModel(model, person, latent)
    rule = RepeatRule(view, list(asked.to(question)))
    if strategy == "thompson":
        draws = [question]
        ids = torch.tensor([person], device=model.designs.device)
        for draw in range(1, Thompson.max_draws):
            pair = next_questions(
                model,
                ids,
                X,
                strategy="thompson",
                seed=seed + draw,
                latent=latent,
                exclude=exclude.unsqueeze(0),
            )[0]
            draws.append(X[pair])
            if rule.allowed(draws[-1]) and not rule.is_repeat(draws[-1]):
                return draws[-1]
        order = -torch.arange(len(draws), dtype=X.dtype)  # earlier first
        chosen = rule.choose(torch.stack(draws), order)
        return question if chosen is None else chosen
    with torch.no_grad():
        post = view.posterior(X)
    mean = post.mean.reshape(1, -1)
    value = pair_eubo(mean, post.mvn.covariance_matrix.reshape(1, len(X), len(X)))[0]
    upper = torch.ones_like(value, dtype=torch.bool).triu(1)
    if bool((exclude >= 0).all()):
        low, high = int(exclude.min()), int(exclude.max())
        upper[low, high] = False
    value = value.masked_fill(~upper, float("-inf")).reshape(-1)
    top = value.topk(min(RULE_PAIRS, int(upper.sum()))).indices
    pairs = torch.stack([top // len(X), top % len(X)], -1)
    chosen = rule.choose(X[pairs], value[top])
    return question if chosen is None else chosen


def _comparisons(
    box: DesignBox | None, question: Tensor, columns: Tensor | None, step: float | None
) -> list[Tensor]:
    r"""The virtual comparisons (``2 x d`` ``[inner, face]`` model points)
    of a question's options on the box's faces (none without a box or a
    step)."""
    if box is None or step is None:
        return []
    unit = box.to_unit(box.from_model(question))
    pairs = face_comparisons(unit, columns, step)
    return [box.to_model(box.from_unit(torch.stack(p))).to(question) for p in pairs]


def _off_faces(
    box: DesignBox, question: Tensor, columns: Tensor, step: float
) -> Tensor:
    r"""A question's options moved ``step`` inside the faces they lie on
    (:func:`~prefbo.loop.boundary.off_faces`), as model points."""
    moved = box.from_unit(
        off_faces(box.to_unit(box.from_model(question)), columns, step)
    )
    if box.space is not None:
        moved = box.space.snap(moved)
    return box.to_model(moved).to(question)
