r"""The collaborative kind of a served study: one model a worker keeps from
round to round, each answer applied in milliseconds.

``model.kind = "collaborative"`` serves a
:class:`~prefbo.models.collaborative.CollaborativePreferenceGP`. A worker
holds one :class:`CollaborativeEngine` for the life of its process:

- Each round it is told what changed in the database
  (:meth:`CollaborativeEngine.update`, a participant's answered questions
  whenever their count or latest time moved): new answers update that
  person's posterior online (the shared part fixed); an undo forgets the
  person's answers and observes those in force again.
- The questions of every waiting participant come from one batched step
  (:meth:`CollaborativeEngine.propose`): EUBO (or Thompson sampling) over
  candidate designs (every design of a small space, else
  :data:`~prefbo.loop.people_questions.CANDIDATES` uniform ones drawn
  for the round), each person at their own posterior, with virtual
  comparisons at the space's faces (:mod:`prefbo.loop.people_questions`),
  stored with the question and told with its answer. A participant's next
  question is made while they look at the current one, so it is made at the
  posterior after the answer their model finds likelier ("kriging
  believer", Ginsbourger et al. 2010); a newcomer's first question comes
  from the population's posterior. A participant alone in the study (every
  answer is theirs, as the first of one-at-a-time sessions) is asked as the
  single-person loop asks instead
  (:func:`~prefbo.loop.person_question.ask_person`: a continuous search,
  virtual comparisons at the faces, stored with the question and told with
  its answer), on a copy of the model told the believed answer and
  refitted: alone, their answers are what the shared part is fitted on,
  and an online update at a fixed shared part moves their utility far
  less than a refit. On 20 simulated lone participants (seeds fixed before
  the run) the favourite after 12 answers was 0.057 from their best (mean
  regret) this way, 0.096 from the batched step with its virtual
  comparisons, the individual kind's 0.059
  (``benchmarks/results/serve_lone.md``).
- The shared part is fitted off the question path, on a thread
  (:meth:`CollaborativeEngine.maintain`): built once the study holds
  ``initial_random`` answers, refitted warm-started on a copy when
  :func:`~prefbo.loop.study_collaborative.next_fit` says (at every answer
  while the study is small, then whenever the answers have grown by
  :data:`~prefbo.loop.study_collaborative.REFIT_GROWTH`),
  the copy swapped in when done and told the answers that came meanwhile.
  Only the first worker's engine fits; each fit is saved in the database,
  and every other worker's engine (``fitter=False``) builds its model from
  it (:meth:`CollaborativeEngine.restore`: the people's posteriors at the
  saved shared part, no gradient step), so workers add question rounds, not
  fits, to a machine's load.

Before the first fit the engine's model is the collaborative model's
prior (:func:`~prefbo.serve.collaborative_models.prior_model`: no one
yet, every shared function at its prior ``N(0, I)``, no gradient step):
answers update their participant's own part online, and each waiting
participant is asked at their posterior by a step of their own
(:meth:`CollaborativeEngine.own_seed`; at the prior everyone's posterior
is the same, and one shared step would ask every newcomer the same
pair), so the first questions of a study are the model's too (with EUBO,
the pair of the participant's candidates whose utilities differ most in
variance: far apart in the kernel's sense). A participant alone in the
study is asked by the lone path only once a fit exists (it refits what
the prior has not fitted).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch
from torch import Tensor

from prefbo.loop.box import DesignBox
from prefbo.loop.fit_warnings import expected_fit_warnings
from prefbo.loop.fitted import seeded
from prefbo.loop.options import SEED_MOD
from prefbo.loop.people_questions import CANDIDATES
from prefbo.loop.person_question import ask_person
from prefbo.loop.question_maker import QuestionMaker
from prefbo.loop.spaces import unit_box
from prefbo.loop.study_collaborative import (
    ASK_ONE_STRATEGIES,
    REFIT_STEPS,
    fit_seed,
    next_fit,
    question_seed,
    revive_due,
)
from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.models.collaborative.questions import believed_answers
from prefbo.serve import collaborative_models as built
from prefbo.serve.answered import Told, points, told_answers
from prefbo.serve.collaborative_favourites import (
    favourites_of,
    told_designs,
    told_means,
)
from prefbo.serve.config import StudyConfig
from prefbo.serve.rows import QuestionRow

log = logging.getLogger("prefbo.serve")

#: After a fit fails, the next one waits for this many more answers (a
#: failure such as running out of memory would repeat at once).
FIT_RETRY_MIN_NEW = 20

#: A served study's strategy (``model.strategy``) to the loop's name of it.
LOOP_STRATEGY = {"eubo": "eubo", "thompson": "ts", "random": "random"}


class CollaborativeEngine:
    r"""A worker's collaborative model and the answers it was told (see the
    module docstring).

    Args:
        config: The study (``model.kind = "collaborative"``, ``q = 2``).
        background: Fit on a thread (``False``: inside :meth:`maintain`,
            for tests and replays).
        fitter: Whether the engine fits the shared part itself, on the
            schedule above; ``False``: it never does, and builds its model
            only from the fits another engine saved (each one given to
            :meth:`restore`), as every worker but the first does.

    Attributes:
        fitter: Whether the engine fits the shared part itself.
        questions: The study's question maker (its space, its strategy).
        model: The model: the prior
            (:func:`~prefbo.serve.collaborative_models.prior_model`) before
            the first fit.
        persons: Participant id to their person in :attr:`model`.
        told: Participant id to their answers in force, in order.
        answered: Participant id to their answered questions, "no
            preference" ones (not told) included.
        fits: The answer counts of the fits made so far.
        carried: Participant id to the ``k x 2 x d`` virtual comparisons
            (model points) the latest question :meth:`propose` made for
            them carries to its answer (none: no entry).
    """

    def __init__(
        self, config: StudyConfig, background: bool = True, fitter: bool = True
    ) -> None:
        self.config = config
        self.fitter = fitter
        self.model: CollaborativePreferenceGP = built.prior_model(config)
        self.persons: dict[int, int] = {}
        self.told: dict[int, list[Told]] = {}
        self.answered: dict[int, int] = {}
        self.fits: list[int] = []
        self.carried: dict[int, Tensor] = {}
        self._asked: dict[int, Tensor] = {}
        self._pool = ThreadPoolExecutor(1) if background else None
        self._job: Future | None = None
        self._job_counts: dict[int, int] = {}
        self._changed_during_job: set[int] = set()
        self._job_answers = 0
        self._saved: dict[str, Tensor] | None = None
        space = config.space
        self.questions = QuestionMaker(
            DesignBox(unit_box(space), space),
            LOOP_STRATEGY[config.strategy],
            inset=config.boundary_step,
        )
        self._failed_at: int | None = None

    @property
    def answers(self) -> int:
        r"""The answers in force, everyone's."""
        return sum(len(t) for t in self.told.values())

    @property
    def fitted(self) -> bool:
        r"""Whether :attr:`model` is a fit (built, or adopted from a saved
        one), not the prior."""
        return bool(self.fits)

    @property
    def fitting(self) -> bool:
        r"""Whether a fit is running."""
        return self._job is not None and not self._job.done()

    # ------------------------------------------------------------ answers
    def update(self, pid: int, rows: list[QuestionRow]) -> None:
        r"""Participant ``pid``'s answered questions, all of them, by
        ``seq``: the new ones are observed online; if those told before are
        no longer a prefix (an undo), the person is observed afresh."""
        old = self.told.get(pid, [])
        new = told_answers(rows, old)
        kept = len(old) <= len(new) and all(
            a.key == b.key for a, b in zip(old, new, strict=False)
        )
        self.told[pid] = new
        self._asked.pop(pid, None)  # made again from the new answers
        self.answered[pid] = len(rows)
        if self._job is not None and not kept:
            self._changed_during_job.add(pid)
        self._observe(pid, new[len(old) :] if kept else new, forget=not kept)

    def asked(self, pid: int) -> Tensor | None:
        r"""Participant ``pid``'s told questions as ``k x 2 x d`` model points
        ``[winner, loser]`` (``None``: none told), kept until :meth:`update`
        tells them again."""
        told = self.told.get(pid)
        if not told:
            return None
        if pid not in self._asked:
            self._asked[pid] = torch.stack(
                [torch.stack([t.winner, t.loser]) for t in told]
            )
        return self._asked[pid]

    def _person(self, pid: int) -> int:
        if pid not in self.persons:
            self.persons[pid] = self.model.add_person()
        return self.persons[pid]

    def _observe(self, pid: int, answers: list[Told], forget: bool = False) -> None:
        person = self._person(pid)
        if forget:
            self.model.forget(person)
        if answers:
            pairs = [a.comparisons() for a in answers]
            winners = torch.cat([w for w, _ in pairs]).to(self.model.designs)
            losers = torch.cat([lo for _, lo in pairs]).to(self.model.designs)
            with expected_fit_warnings():
                self.model.observe(person, winners, losers)

    # ------------------------------------------------------------ fits
    def maintain(self) -> None:
        r"""Swap in a finished fit; start the next one if it is due."""
        if self._job is not None and self._job.done():
            job, self._job = self._job, None
            try:
                result = job.result()
            except Exception:  # logged; tried again with more answers
                log.exception("a fit of the collaborative model failed")
                self._failed_at = self._job_answers
            else:
                self._swap(result)
        if self._job is not None:
            return
        m = self.answers
        if not self.fitter:  # a saved fit to adopt, if any
            if self._saved is not None and m > 0:
                self._start(m, self._build, self._data(), m, self._take_saved())
            return
        if not self.fitted:
            due = m >= self.config.initial_random
        else:
            due = m >= next_fit(self.fits[-1])
        if not due or (
            self._failed_at is not None and m < self._failed_at + FIT_RETRY_MIN_NEW
        ):
            return
        self._failed_at = None
        if not self.fitted:
            self._start(m, self._build, self._data(), m, self._take_saved())
        else:
            revive = revive_due(self.fits[-1], m)
            model, persons = copy.deepcopy(self.model), dict(self.persons)
            self._start(m, self._refit, model, persons, m, revive)

    def _data(self) -> dict[int, list[Told]]:
        return {pid: list(t) for pid, t in self.told.items()}

    def _take_saved(self) -> dict[str, Tensor] | None:
        saved, self._saved = self._saved, None  # used once
        return saved

    def _start(self, m: int, work: Callable[..., tuple], *args: Any) -> None:
        r"""Run ``work(*args)`` (returning what :meth:`_swap` takes) as the
        fit at ``m`` answers."""
        self._job_answers = m
        self._job_counts = {pid: len(t) for pid, t in self.told.items()}
        self._changed_during_job = set()
        if self._pool is None:
            self._job = Future()
            try:
                self._job.set_result(work(*args))
            except Exception as e:
                self._job.set_exception(e)
            self.maintain()
        else:
            self._job = self._pool.submit(work, *args)

    def _build(
        self,
        data: dict[int, list[Told]],
        m: int,
        saved: dict[str, Tensor] | None = None,
    ) -> tuple:
        model, persons = built.build_model(self.config, data, m, saved)
        return model, persons, m

    def _refit(
        self,
        model: CollaborativePreferenceGP,
        persons: dict[int, int],
        m: int,
        revive: bool,
    ) -> tuple:
        s = fit_seed(self.config.seed, m)
        with seeded(s), expected_fit_warnings(), torch.enable_grad():
            model.fit(steps=REFIT_STEPS, seed=s, revive=revive)
        return model, persons, m

    def _swap(self, result: tuple) -> None:
        model, persons, m = result
        self.model, self.persons = model, dict(persons)
        self.fits.append(m)
        for pid, answers in self.told.items():
            if pid in self._changed_during_job or pid not in persons:
                self._observe(pid, answers, forget=pid in persons)
            else:
                self._observe(pid, answers[self._job_counts.get(pid, 0) :])
        log.info("collaborative model fitted at %d answers", m)

    # ------------------------------------------------------------ saved fits
    def shared_state(self) -> dict[str, Tensor] | None:
        r"""The fitted shared part (the shared functions, the likelihood)
        of the model, for a later engine's :meth:`restore`; ``None``
        before the first fit (the prior is no fit to save)."""
        if not self.fitted:
            return None
        return built.shared_state(self.model)

    def restore(self, state: dict[str, Tensor]) -> None:
        r"""Build the model from ``state`` (:meth:`shared_state` of an
        engine of the same study: a worker that died, or for an engine that
        is not the ``fitter``, the one that is): no fit, only the
        people's posteriors at its shared functions. A fitter does so at its
        first build; any other engine at the next :meth:`maintain` with no
        build running (a later ``state`` given meanwhile replaces this one).
        A state that does not fit the model is logged and a fit made
        instead."""
        self._saved = dict(state)

    # ------------------------------------------------------------ questions
    def candidates(self, seed: int, count: int = CANDIDATES) -> Tensor:
        r"""Distinct designs to choose questions from
        (:meth:`QuestionMaker.candidates
        <prefbo.loop.question_maker.QuestionMaker.candidates>`)."""
        return self.questions.candidates(seed, count)

    def propose(
        self,
        shown: dict[int, list | None],
        shown_virtual: dict[int, list | None] | None = None,
    ) -> dict[int, Tensor]:
        r"""The next question (``2 x dim`` model points) of each participant
        in ``shown`` (id to the options of the question on screen, or
        ``None``; ``shown_virtual``: to the virtual comparisons it carries,
        as stored), made at the posterior after the answer to it their
        model finds likelier (before the first fit, the prior's).

        A participant alone in the study (every answer is theirs) is asked,
        once a fit exists, as the single-person loop asks
        (:func:`~prefbo.loop.person_question.ask_person`, the strategies of
        :data:`~prefbo.loop.study_collaborative.ASK_ONE_STRATEGIES`), with
        the virtual comparisons the question carries in :attr:`carried`;
        everyone else from one batched step (:meth:`QuestionMaker.for_people
        <prefbo.loop.question_maker.QuestionMaker.for_people>`), its virtual
        comparisons in :attr:`carried` as well. Before the first fit, and
        for a strategy that uses no model, each participant is asked by a
        step of their own, seeded by :meth:`own_seed`: at the prior
        everyone's posterior is the same, and one step's candidates would
        give every newcomer the same pair (and a participant whose round
        saw no new answer the same draw again)."""
        self.carried = {}
        if not shown:
            return {}
        seed = fit_seed(self.config.seed, self.answers + 1)
        alone = self._alone(shown)
        out = {}
        if alone is not None:
            virtual = (shown_virtual or {}).get(alone)
            out[alone] = self._ask_alone(alone, shown[alone], virtual, seed)
        pids = [pid for pid in shown if pid != alone]
        if self.fitted and self.questions.uses_model:
            batches = [(pids, seed)] if pids else []
        else:
            batches = [([pid], self.own_seed(pid, shown[pid])) for pid in pids]
        for batch, batch_seed in batches:
            out.update(self._ask_batch(batch, shown, shown_virtual, batch_seed))
        return out

    def own_seed(self, pid: int, options: list | None) -> int:
        r"""The seed of participant ``pid``'s own step: from the study's
        answers, the participant's questions (those answered, "no
        preference" included, and the one on screen, ``options``) and their
        id (:func:`~prefbo.loop.study_collaborative.question_seed`)."""
        own = self.answered.get(pid, 0) + (options is not None)
        return question_seed(self.config.seed, self.answers, own, pid) % SEED_MOD

    def _ask_batch(
        self,
        pids: list[int],
        shown: dict[int, list | None],
        shown_virtual: dict[int, list | None] | None,
        seed: int,
    ) -> dict[int, Tensor]:
        r"""The questions of ``pids`` from one batched step of ``seed``,
        their virtual comparisons put in :attr:`carried`."""
        people = torch.tensor([self._person(pid) for pid in pids])
        looking = [points(shown[p]) for p in pids]
        virtual = [points((shown_virtual or {}).get(p)) for p in pids]
        before = [self.asked(p) for p in pids]
        made = self.questions.for_people(
            self.model, people, looking, seed, virtual, asked=before
        )
        for pid, carried in zip(pids, made.virtual, strict=True):
            if carried is not None:
                self.carried[pid] = carried
        return dict(zip(pids, made.questions, strict=True))

    def _alone(self, shown: dict[int, list | None]) -> int | None:
        r"""The participant of ``shown`` whose answers are all of the
        study's, where a fit exists and the strategy asks so (else
        ``None``)."""
        m = self.answers
        if (
            m == 0
            or not self.fitted
            or self.questions.strategy_name not in ASK_ONE_STRATEGIES
        ):
            return None
        return next((p for p in shown if len(self.told.get(p, ())) == m), None)

    def _ask_alone(
        self, pid: int, options: list | None, virtual: list | None, seed: int
    ) -> Tensor:
        r"""Participant ``pid``'s question from
        :func:`~prefbo.loop.person_question.ask_person` on a copy of the
        model told the comparisons the question on screen (``options``)
        carries and the answer to it the model finds likelier, and refitted
        as the next answer will refit the model: alone, the person's
        answers are what the shared part is mostly fitted on, so an answer
        moves their utility through a refit (an online update at a fixed
        shared part moves it far less)."""
        model, person = self.model, self._person(pid)
        asked = list(self.asked(pid))
        if options is not None:
            X = points(options)
            win = int(believed_answers(model, torch.tensor([person]), X[None])[0])
            shown = Told(("shown", 0.0), X[win], X[1 - win], points(virtual))
            model = copy.deepcopy(model)
            with expected_fit_warnings():
                model.observe(
                    person, *(t.to(model.designs) for t in shown.comparisons())
                )
            m = self.answers + 1
            if m >= next_fit(self.fits[-1]):
                revive = revive_due(self.fits[-1], m)
                model = self._refit(model, self.persons, m, revive)[0]
            asked.append(X)

        def best() -> Tensor:  # their told design of highest posterior mean
            X = told_designs(self.told[pid]).to(model.designs)
            return X[int(told_means(model, X, [person], [len(X)])[1].argmax())]

        box = self.questions.box
        question, carried, _ = ask_person(
            self.questions, model, person, asked, seed, best
        )
        if carried is not None:
            self.carried[pid] = box.to_model(carried)
        return box.to_model(question)

    # ------------------------------------------------------------ favourites
    def favourites(self, pids: list[int]) -> dict[str, Any]:
        r"""The population's favourite with its utility slices, and each of
        ``pids``' with answers
        (:func:`~prefbo.serve.collaborative_favourites.favourites_of`)."""
        answered = [pid for pid in pids if self.told.get(pid)]
        if not self.fitted or not answered:
            return {"population": None, "participants": {}}
        return favourites_of(
            self.model,
            self.config.space,
            {pid: self.told[pid] for pid in answered},
            {pid: self._person(pid) for pid in answered},
        )

    def close(self) -> None:
        r"""Stop the fitting thread (a running fit finishes first)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
