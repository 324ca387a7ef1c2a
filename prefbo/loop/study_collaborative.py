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
- When the study's answers reach :meth:`CollaborativeState.next_fit`,
  ``max(ceil(REFIT_GROWTH * a), a + REFIT_MIN_NEW)`` with ``a`` the answers
  at the last fit, the shared part is refitted on every answer, warm-started
  on the same model object (:data:`REFIT_STEPS` steps), and every pending
  question is dropped. Fits thus get geometrically rarer: ``O(log m)`` of
  them over ``m`` answers, at least :data:`REFIT_MIN_NEW` answers apart
  (up to 5 answers every answer refits, then 7, 9, 12, 15, ...).
- An undo and a resume rebuild the model from scratch on the answers in
  force (every participant's, stacked in participant order) and restart the
  schedule at that count.

A participant's question is the EUBO-best pair of :func:`candidates`
(every design of a small space, else :data:`CANDIDATES` uniform ones) at
their posterior, from :func:`ask_people`, the batched step that
``prefbo serve``'s collaborative kind runs for every waiting participant at
once. A fit runs inside the ``tell``, ``undo`` or ``resume`` that calls for
it (seconds, against milliseconds for an online update or a question).
``best()``, ``participant_model()`` (a
:class:`~prefbo.models.collaborative.PersonModel`) and ``model`` work as
for the exact kinds;
``hyperparameters()``, ``fix_hyperparameters()`` and ``disagreement()``,
which read the exact model's kernel, raise ``UnsupportedError``.

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
from collections.abc import Callable, Mapping

import torch
from torch import Tensor
from torch.quasirandom import SobolEngine

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.loop.boundary import DEFAULT_STEP, face_columns
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.fitted import seeded
from prefbo.loop.options import SEED_MOD
from prefbo.models.collaborative import CollaborativePreferenceGP, PersonModel
from prefbo.models.collaborative.people import PersonPosterior
from prefbo.models.collaborative.questions import (
    believed_answers,
    imagined_posteriors,
    next_questions,
)
from prefbo.utils import seeds
from prefbo.utils.threads import limited

#: The study's name of this kind (``model=``).
COLLABORATIVE = "collaborative"
#: Gradient steps of a fit from scratch (a build or a rebuild).
FIT_STEPS = 300
#: Gradient steps of a warm-started refit of the shared part.
REFIT_STEPS = 100
#: A refit is due when the study's answers reach this multiple of those at
#: the last fit ...
REFIT_GROWTH = 1.25
#: ... and at least this many answers came since: one, so a small study
#: refits often (cheap there; at 1, 2, 3, 4, 5, 7, 9, 12, ... answers) and
#: the first participants' answers reach the shared part, which is all a
#: small population's fit may use.
REFIT_MIN_NEW = 1
#: The model's size: latent tastes, inducing points of the shared functions
#: and of each person's residual.
NUM_TASTES = 3
NUM_INDUCING = 64
NUM_RESIDUAL = 16
#: Scrambled Sobol designs of the unit cube added to the model's design
#: table at a build, so that its inducing points (chosen once, at the build)
#: cover the whole box even when the first fit sees a handful of answers.
INDUCING_FILL = 64


#: Candidates of a question where the space has more designs than
#: :data:`LISTED` (or is a box).
CANDIDATES = 128
#: A space with at most this many designs offers every one as a candidate.
LISTED = 512


def candidates(space, dim: int, seed: int, count: int = CANDIDATES) -> Tensor:
    r"""Distinct designs (model points, ``C x dim``) to choose questions
    from: every design of a space of at most :data:`LISTED`, else ``count``
    uniform ones of the space (a box without a space: scrambled Sobol
    points of the unit cube), drawn with ``seed``, their continuous columns
    a step (:data:`~prefbo.loop.boundary.DEFAULT_STEP`) inside the faces.

    A model fitted on a few dozen answers extrapolates towards the faces and
    corners, and EUBO, which rewards that and the variance there, would ask
    there (the loop answers this with virtual comparisons at the faces,
    :mod:`prefbo.loop.boundary`; a candidate seldom lies on a face for that
    rule). The price is the loop's: a person whose best design lies on a
    face is brought to within a step of it."""
    if space is None:
        sobol = SobolEngine(dim, scramble=True, seed=seed)
        X = sobol.draw(count, dtype=torch.float64)
    else:
        size = space.size
        if size is not None and size <= LISTED:
            return space.grid().to(torch.float64)
        X = space.sample(count, seed=seed).unique(dim=0).to(torch.float64)
    columns = face_columns(space, dim)
    X[:, columns] = DEFAULT_STEP + (1 - 2 * DEFAULT_STEP) * X[:, columns]
    return X


def ask_people(
    model: CollaborativePreferenceGP,
    people: Tensor,
    X: Tensor,
    shown: list[Tensor | None],
    strategy: str = "eubo",
    seed: int = 0,
) -> Tensor:
    r"""``B x 2 x dim`` questions of ``B`` people from the candidates ``X``
    in one batched step (EUBO or Thompson sampling,
    :func:`~prefbo.models.collaborative.questions.next_questions`). A person
    looking at a question (``shown[b]``, its ``2 x dim`` options) is asked
    at the posterior after the answer they more likely give to it ("kriging
    believer", Ginsbourger et al. 2010): the next question is made before
    that answer is known, and is never that question again."""
    mean = model.latent_mean[people].clone()
    chol = model.latent_precision_chol[people].clone()
    looking = [b for b, options in enumerate(shown) if options is not None]
    if looking:
        at = torch.tensor(looking, device=people.device)
        options = torch.stack([shown[b] for b in looking]).to(model.designs)
        with torch.no_grad(), limited(16 * len(looking)):
            rows = model.design_rows(options.reshape(-1, options.shape[-1]))
            rows = rows.reshape(len(looking), 2)
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
    )
    return X[pairs]


def next_fit(fitted_at: int) -> int:
    r"""The answer count at which a refit is due after a fit at
    ``fitted_at`` answers: ``max(ceil(REFIT_GROWTH * a), a + REFIT_MIN_NEW)``."""
    return max(math.ceil(REFIT_GROWTH * fitted_at), fitted_at + REFIT_MIN_NEW)


def fit_seed(seed: int, answers: int) -> int:
    r"""Seed of the fit at ``answers`` answers (the model's start, inducing
    points, minibatches and the RNG), in ``[0, SEED_MOD)``."""
    return seeds.fit_seed(seed, answers) % SEED_MOD


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
            model = CollaborativePreferenceGP(
                torch.cat(designs),
                torch.cat(rows),
                num_people=num_people,
                num_tastes=NUM_TASTES,
                num_inducing=NUM_INDUCING,
                num_residual=NUM_RESIDUAL,
                seed=s,
            )
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
        with expected_fit_warnings():
            self.model.observe(person, winners, options[others])
        self.online_updates += 1
        if answers < self.next_fit():
            return True
        s = fit_seed(self.seed, answers)
        with seeded(s), expected_fit_warnings(), torch.enable_grad():
            self.model.fit(steps=REFIT_STEPS, seed=s)
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

    def question(self, person: int, own: int, space) -> Tensor:
        r"""``person``'s next ``2 x d`` question (model points) given their
        ``own`` answers: EUBO over :func:`candidates` of ``space`` (``None``:
        the unit cube), at their posterior (:func:`ask_people`), seeded by
        :meth:`question_seed`."""
        seed = self.question_seed(person, own) % SEED_MOD
        d = self.model.designs.shape[-1]
        X = candidates(space, d, seed)
        return ask_people(self.model, torch.tensor([person]), X, [None], seed=seed)[0]

    def question_seed(self, person: int, own: int) -> int:
        r"""The seed of ``person``'s question given their ``own`` answers
        (see :func:`question_seed`)."""
        return question_seed(self.seed, self.fitted_at, own, person)
