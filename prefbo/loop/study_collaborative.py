r"""The collaborative kind of a study: one shared model, people updated online.

``PopulationStudy(model="collaborative")`` (:mod:`prefbo.loop.study`) runs
on a :class:`~prefbo.models.collaborative.CollaborativePreferenceGP`: a
shared utility and a few shared tastes fitted on everyone's answers, each
participant a point in taste space (plus a small residual of their own)
whose posterior is updated in milliseconds when they answer. Participant
``i`` of the study (the ``i``-th to join) is person ``i`` of the model; a
newcomer is added (``add_person``) when first asked or told, and their first
question comes from the population's posterior.

:class:`CollaborativeState` is the study's model and its schedule of fits:

- Before the study holds ``initial_random`` answers, questions are uniform.
  A model read then (``best()``, ``study.model``) is fitted from scratch for
  the read and dropped at the next answer.
- The answer that brings the study to ``initial_random`` answers builds the
  model on every answer and fits it from scratch (:data:`FIT_STEPS`
  gradient steps).
- Each later answer updates its participant's posterior online
  (``observe``; the shared part fixed): only that participant's pending
  question is dropped, since no one else's posterior changed.
- When the study's answers reach :meth:`CollaborativeState.next_fit`
  (:func:`next_fit`: every answer below :data:`REFIT_EVERY_BELOW` answers,
  then ``max(ceil(REFIT_GROWTH * a), a + REFIT_MIN_NEW)`` with ``a`` the
  answers at the last fit), the shared part is refitted on every answer,
  warm-started on the same model object (:data:`REFIT_STEPS` steps), and
  every pending question is dropped. Fits thus get geometrically rarer:
  ``O(log m)`` of them over ``m`` answers (at 64, 80, 100, 125, ...). A refit
  where the answers pass a power of two (:func:`revive_due`) also tries
  the collapsed tastes and residual revived (``fit(revive=True)``): the
  first fits, on a handful of answers, often switch tastes off, and plain
  refits never switch them on again.
- An undo and a resume rebuild the model from scratch on the answers in
  force (every participant's, stacked in participant order) and restart the
  schedule at that count.

A participant's question (:meth:`CollaborativeState.ask`), while every
answer of the study is theirs (no one else has answered: their posterior
is a single person's) and the strategy is EUBO, is the single-person
loop's: :func:`~prefbo.loop.person_question.ask_person` searches the box
continuously at their posterior, with virtual comparisons at the box's
faces that the answer keeps (logged with it, observed with it, read back by
a rebuild). Otherwise it comes from the study's question maker
(:meth:`QuestionMaker.for_people <prefbo.loop.QuestionMaker.for_people>`,
:meth:`CollaborativeState.question`): the EUBO-best pair of candidate
designs (every design of a small space, else
:data:`~prefbo.loop.people_questions.CANDIDATES` uniform ones) at their
posterior, or with ``strategy="ts"`` the maxima of two draws of their
utility over the candidates, with virtual comparisons at the box's faces
that its answer keeps as well: the batched step that ``prefbo serve``'s
collaborative kind runs for every waiting participant at once. A fit runs
inside the ``tell``, ``undo`` or ``resume`` that calls for it (seconds,
against milliseconds for an online update or a batched question, and about
0.2 s for the loop's). ``best()``,
``participant_model()`` (a
:class:`~prefbo.models.collaborative.PersonModel`) and ``model`` work as for
the exact kinds; ``hyperparameters()``, ``fix_hyperparameters()`` and
``disagreement()``, which read the exact model's kernel, raise
``UnsupportedError``.

Determinism (what the collaborative kind promises, less than the exact
kinds): the model after each answer is a function of the seed and of the
answers in their *global* order (who answered what, in which order across
participants), because fits happen at counts of the whole study's answers
and each sees the answers told by then; each fit runs under seeds derived
from ``(seed, answers at the fit)`` (:func:`fit_seed`). A participant's
question is a function of the model's shared part and of their own answers
(:func:`question_seed`: ``(seed, answers at the last fit, their answers,
their id)``), so between two fits it does not depend on when they ask or on
what others answer meanwhile. Two studies told the same answers in the same
global order ask the same questions. A resumed study replays the
participants' logs in participant order and rebuilds once on everything, as
the running study does right after an undo: it asks what the running study
would ask after an undo that leaves the same answers, but in general not
what the running study asked before it was closed, whose warm-started
chain of fits saw the answers in their global order (which the logs do not
keep).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.fitted import seeded
from prefbo.loop.options import SEED_MOD
from prefbo.loop.person_question import ask_person
from prefbo.loop.question_maker import QuestionMaker
from prefbo.models.collaborative import CollaborativePreferenceGP, PersonModel
from prefbo.utils import seeds

#: The study's name of this kind (``model=``).
COLLABORATIVE = "collaborative"
#: Gradient steps of a fit from scratch (a build or a rebuild).
FIT_STEPS = 300
#: Gradient steps of a warm-started refit of the shared part.
REFIT_STEPS = 100
#: Below this many answers every answer refits the shared part. A small
#: study's fits give the people's own parts (tastes, residual) little of
#: the variance, so a person's answers reach their utility mostly through
#: a refit: a lone first participant whose answers refitted at 1, 2, 3, 4,
#: 5, 7, 9 and 12 answers ended at regret 0.77 after 12 (the single-person
#: loop: 0.03).
REFIT_EVERY_BELOW = 64
#: From there a refit is due when the study's answers reach this multiple of
#: those at the last fit ...
REFIT_GROWTH = 1.25
#: ... and at least this many answers came since.
REFIT_MIN_NEW = 1
#: The model's size: latent tastes, inducing points of the shared functions
#: and of each person's residual.
NUM_TASTES = 3
NUM_INDUCING = 64
NUM_RESIDUAL = 16
#: The strategies a participant alone in the study is asked with as the
#: single-person loop asks (:func:`~prefbo.loop.person_question.ask_person`,
#: about 0.2 s a question); other strategies, and everyone once someone
#: else has answered, are asked from the batched step (milliseconds).
ASK_ONE_STRATEGIES = ("eubo",)
#: Scrambled Sobol designs of the unit cube added to the model's design
#: table at a build, so that its inducing points (chosen once, at the build)
#: cover the whole box even when the first fit sees a handful of answers.
INDUCING_FILL = 64


def next_fit(fitted_at: int) -> int:
    r"""The answer count at which a refit is due after a fit at
    ``fitted_at = a`` answers: ``a + 1`` below :data:`REFIT_EVERY_BELOW`,
    else ``max(ceil(REFIT_GROWTH * a), a + REFIT_MIN_NEW)``."""
    if fitted_at < REFIT_EVERY_BELOW:
        return fitted_at + 1
    return max(math.ceil(REFIT_GROWTH * fitted_at), fitted_at + REFIT_MIN_NEW)


def revive_due(fitted_at: int, answers: int) -> bool:
    r"""Whether the refit at ``answers`` after a fit at ``fitted_at`` also
    tries reviving the model's collapsed parts (``fit(revive=True)``, which
    doubles a refit's cost where a part collapsed): where a power of two
    lies in ``(fitted_at, answers]``, about one refit in three."""
    return int(answers).bit_length() > max(int(fitted_at), 0).bit_length()


def fit_seed(seed: int, answers: int) -> int:
    r"""Seed of the fit at ``answers`` answers (the model's start, inducing
    points, minibatches and the RNG), in ``[0, SEED_MOD)``."""
    return seeds.fit_seed(seed, answers) % SEED_MOD


def study_model(
    designs: Tensor,
    rows: Tensor,
    num_people: int,
    seed: int,
    inducing: Tensor | None = None,
) -> CollaborativePreferenceGP:
    r"""A study's unfitted model of ``n x d`` ``designs`` (unit cube) and
    ``m x 3`` answer ``rows``: :data:`NUM_TASTES` tastes,
    :data:`NUM_INDUCING` inducing points (``inducing``, default chosen
    among the designs), :data:`NUM_RESIDUAL` of the residual's, and no item
    effects (a row per compared design, no item). ``prefbo serve``'s
    collaborative kind builds the same."""
    return CollaborativePreferenceGP(
        designs,
        rows,
        num_people=num_people,
        num_tastes=NUM_TASTES,
        num_inducing=NUM_INDUCING,
        num_residual=NUM_RESIDUAL,
        item_effects=False,
        seed=seed,
        inducing_points=inducing,
    )


def question_seed(seed: int, fitted_at: int, own: int, person: int) -> int:
    r"""Seed of ``person``'s question, from the answers at the last fit and
    the ``own`` answers of the person."""
    return seeds.person_question_seed(seed, fitted_at, own, person)


def unavailable(method: str) -> UnsupportedError:
    r"""The error of a study method that only the exact kinds offer."""
    return UnsupportedError(
        f"{method}() needs the exact population model's kernel (its "
        "hyperparameters, its population and individual parts), which "
        f"model={COLLABORATIVE!r} does not have; use model='ep' or 'laplace'."
    )


class CollaborativeState:
    r"""A study's collaborative model and its schedule of fits (see the
    module docstring).

    Args:
        seed: The study's seed.
        initial_random: The study's ``initial_random``: answers before the
            first fit.

    Attributes:
        model: The model, or ``None`` (no answer yet, or dropped before
            ``initial_random`` answers).
        fitted_at: The study's answers at the last fit (``-1``: none).
        fits: The answer counts of the fits since the last build, the build
            first.
        online_updates: Answers applied online since the last build.
    """

    def __init__(self, seed: int, initial_random: int) -> None:
        self.seed, self.initial_random = int(seed), int(initial_random)
        self.model: CollaborativePreferenceGP | None = None
        self.fitted_at = -1
        self.fits: list[int] = []
        self.online_updates = 0

    def next_fit(self) -> int:
        r"""The study's answer count at which the next refit is due."""
        return next_fit(self.fitted_at)

    # ------------------------------------------------------------ builds
    def rebuild(
        self,
        data: Mapping[int, tuple[Tensor, Tensor]],
        num_people: int,
        answers: int,
    ) -> None:
        r"""Build and fit the model from scratch, or drop it before
        ``initial_random`` answers (a read then fits one afresh,
        :meth:`current`).

        Args:
            data: ``{participant id: (n_i x d unit-cube designs, m_i x 2
                [winner, loser] rows)}`` of the participants with answers.
            num_people: Participants of the study.
            answers: The study's answers.
        """
        self.model, self.fitted_at, self.fits = None, -1, []
        self.online_updates = 0
        if answers >= self.initial_random:
            self._build(data, num_people, answers)

    def current(
        self,
        data: Callable[[], Mapping[int, tuple[Tensor, Tensor]]],
        num_people: int,
        answers: int,
    ) -> CollaborativePreferenceGP | None:
        r"""The model (fitted now from scratch where there is none and
        ``answers > 0``), with room for ``num_people`` participants;
        ``None`` without answers."""
        if self.model is None and answers > 0:
            self._build(data(), num_people, answers)
        if self.model is not None:
            self._sync(num_people)
        return self.model

    def _build(
        self,
        data: Mapping[int, tuple[Tensor, Tensor]],
        num_people: int,
        answers: int,
    ) -> None:
        designs, rows, offset = [], [], 0
        for pid in sorted(data):
            X, comps = data[pid]
            designs.append(X)
            person = torch.full_like(comps[:, :1], pid)
            rows.append(torch.cat([person, comps + offset], dim=-1))  # m_i x 3
            offset += X.shape[0]
        d = designs[0].shape[-1]
        s = fit_seed(self.seed, answers)
        sobol = SobolEngine(d, scramble=True, seed=s)
        designs.append(sobol.draw(INDUCING_FILL, dtype=designs[0].dtype))
        with seeded(s), expected_fit_warnings(), torch.enable_grad():
            model = study_model(torch.cat(designs), torch.cat(rows), num_people, s)
            model.fit(steps=FIT_STEPS, seed=s)
        self.model, self.fitted_at, self.fits = model, answers, [answers]

    def _sync(self, num_people: int) -> None:
        while self.model.num_people < num_people:  # newcomers, in id order
            self.model.add_person()

    # ------------------------------------------------------------ answers
    def told(
        self,
        person: int,
        options: Tensor,
        answer: int,
        data: Callable[[], Mapping[int, tuple[Tensor, Tensor]]],
        num_people: int,
        answers: int,
        virtual: Tensor | None = None,
    ) -> bool:
        r"""Take a participant's new answer (already counted in ``answers``).

        Args:
            person: The participant's id.
            options: ``q x d`` unit-cube options of the question.
            answer: Index of the chosen option.
            data: The participants' data, as :meth:`rebuild` takes it (read
                only for a build).
            num_people: Participants of the study.
            answers: The study's answers, this one included.
            virtual: The ``k x 2 x d`` unit-cube virtual comparisons
                ``[inner, face]`` the answer carries, or ``None``
                (:func:`~prefbo.loop.person_question.ask_person`).

        Returns:
            ``True`` where only ``person``'s posterior changed (an online
            update); ``False`` where every participant's questions are stale
            (a build, a refit, or no model yet).
        """
        if answers < self.initial_random or self.fitted_at < self.initial_random:
            self.rebuild(data(), num_people, answers)  # drops a read's model
            return False
        self._sync(num_people)
        others = [i for i in range(options.shape[0]) if i != answer]
        winners = options[answer].expand(len(others), -1)  # (q - 1) x d
        losers = options[others]
        if virtual is not None:  # observed before the answer, as logged
            winners = torch.cat([virtual[:, 0], winners])
            losers = torch.cat([virtual[:, 1], losers])
        with expected_fit_warnings():
            self.model.observe(person, winners, losers)
        self.online_updates += 1
        if answers < self.next_fit():
            return True
        s = fit_seed(self.seed, answers)
        with seeded(s), expected_fit_warnings(), torch.enable_grad():
            self.model.fit(
                steps=REFIT_STEPS,
                seed=s,
                revive=revive_due(self.fitted_at, answers),
            )
        self.fitted_at = answers
        self.fits.append(answers)
        return False

    # ------------------------------------------------------------ views
    def view(self, person: int | None) -> PersonModel:
        r"""``person``'s utility (``None``: the population's) as a model.

        Raises:
            InputDataError: No model yet (no answer was told).
        """
        if self.model is None:
            raise InputDataError(
                "the collaborative model needs at least one answer; none was told."
            )
        return self.model.person_model(person)

    def question(
        self,
        maker: QuestionMaker,
        person: int,
        own: int,
        asked: Sequence[Tensor] = (),
    ) -> tuple[Tensor, Tensor | None]:
        r"""``person``'s next question given their ``own`` answers.

        Args:
            maker: The study's question maker.
            person: The participant's id (a person of :attr:`model`).
            own: Their answers.
            asked: Their questions so far, ``2 x d`` model inputs each: one
                is asked again only as the loop's repeat rule allows.

        Returns:
            The ``2 x d`` question and the ``k x 2 x d`` virtual comparisons
            ``[inner, face]`` it carries (or ``None``), in the maker's model
            coordinates, from :meth:`maker.for_people
            <prefbo.loop.QuestionMaker.for_people>` at their posterior,
            seeded by :meth:`question_seed`.
        """
        seed = self.question_seed(person, own) % SEED_MOD
        before = [torch.stack(list(asked))] if len(asked) else None
        made = maker.for_people(
            self.model, torch.tensor([person]), seed=seed, asked=before
        )
        return made.questions[0], made.virtual[0]

    def ask(
        self,
        maker: QuestionMaker,
        person: int,
        asked: Sequence[Tensor],
        best: Callable[[], Tensor],
        answers: int,
    ) -> tuple[Tensor, Tensor | None, bool]:
        r"""``person``'s next question: from
        :func:`~prefbo.loop.person_question.ask_person` while every answer of
        the study is theirs and the strategy is one of
        :data:`ASK_ONE_STRATEGIES`, else from :meth:`question`.

        Args:
            maker: The study's question maker.
            person: The participant's id (a person of :attr:`model`).
            asked: Their questions so far, ``2 x d`` model inputs each.
            best: Their recommendation as a ``d`` model input.
            answers: The study's answers.

        Returns:
            ``(question, virtual, fallback)`` as
            :func:`~prefbo.loop.person_question.ask_person` returns them
            (box coordinates; the batched step's question is never a
            fallback).
        """
        alone = answers == len(asked)  # no one else has answered
        if alone and maker.strategy_name in ASK_ONE_STRATEGIES:
            seed = self.question_seed(person, len(asked)) % SEED_MOD
            return ask_person(maker, self.model, person, asked, seed, best)
        question, virtual = self.question(maker, person, len(asked), asked)
        box = maker.box
        carried = None if virtual is None else box.from_model(virtual)
        return box.from_model(question), carried, False

    def question_seed(self, person: int, own: int) -> int:
        r"""The seed of ``person``'s question given their ``own`` answers
        (see :func:`question_seed`)."""
        return question_seed(self.seed, self.fitted_at, own, person)
