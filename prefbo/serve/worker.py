r"""The worker processes of ``prefbo serve``: models off the request path.

A worker polls the database for participants without a waiting question
(:meth:`~prefbo.serve.store.Store.needing_questions`), fits the study's
models on every answer (:class:`~prefbo.serve.engine.QuestionEngine`) and
stores the next question of each
(:meth:`~prefbo.serve.store.Store.queue_question`); after new answers it
also stores the favourites for the researcher's page. Workers share nothing
but the database: each makes the questions of the participants it holds a
lease on (:class:`~prefbo.serve.sharing.Share`), and a question another
process stored first is kept (the database's unique ``(participant, seq)``).

The server starts, watches and restarts its worker processes with
:mod:`prefbo.serve.supervisor`.
"""

from __future__ import annotations

import base64
import io
import logging
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

from prefbo.serve.answered import AnsweredRows
from prefbo.serve.collaborative import CollaborativeEngine
from prefbo.serve.config import StudyConfig, StudyFileError, study_from_dict
from prefbo.serve.engine import QuestionEngine
from prefbo.serve.rows import MadeQuestion, Needing, Progress
from prefbo.serve.sharing import Share
from prefbo.serve.store import Store, state_tag

log = logging.getLogger("prefbo.serve")


def config_from_store(
    store: Store, root: Any = ".", check_files: bool = True
) -> StudyConfig:
    r"""The study stored in the database (``check_files=False``: without
    looking for the display's files, for a replay or export).

    Raises:
        StudyFileError: The database holds no study.
    """
    source = store.study_source()
    if source is None:
        raise StudyFileError(f"the database {store.url} holds no study.")
    return study_from_dict(
        source, root=root, name="stored study", check_files=check_files
    )


class Hyperparameters:
    r"""A worker's population hyperparameters between rounds: refitted once
    the answers have grown by a quarter (and by at least :data:`REFIT_MIN`)
    since the last fit, reused in between (a round then costs EP runs and
    the questions, not fits)."""

    def __init__(self) -> None:
        self.state: dict[str, Any] | None = None
        self.at = 0

    def current(self, answers: int) -> dict[str, Any] | None:
        r"""The hyperparameters to use at ``answers`` answers (``None``: fit)."""
        if answers >= max(self.at + REFIT_MIN, 1.25 * self.at):
            return None
        return self.state

    def update(self, engine: QuestionEngine, answers: int, used: Any) -> None:
        if used is None and engine.hyperparameters is not None:
            self.state, self.at = engine.hyperparameters, answers


REFIT_MIN = 10  # answers


def work_once(
    store: Store,
    config: StudyConfig,
    share: Share | None = None,
    hyper: Hyperparameters | None = None,
    optimizers: dict | None = None,
) -> int:
    r"""One round: questions for every participant of this worker (those
    ``share`` gives it; ``None``: everyone) who needs one, those who have
    looked at their question longest first (``optimizers``: the individual
    participants' optimisers, kept from round to round, see
    :class:`~prefbo.serve.engine.QuestionEngine`). Each is stored as soon as
    it is made, as the participant's next question then: one who moved on
    meanwhile (shown a uniform question for lack of it) gets it one question
    later, made without their newest answer, as a batch of Bayesian
    optimisation is. Returns how many were stored."""
    most = config.answers_per_participant
    needing = _mine(store.needing_questions(most), share)
    if not needing:
        return 0
    answered = store.answered()
    told = Counter(a.participant_id for a in answered)
    # one who answered since needing was read: next round (else the question
    # on screen would be told twice, answered and believed)
    needing = {pid: n for pid, n in needing.items() if told[pid] == n.answers}
    if not needing:
        return 0
    order = sorted(needing, key=lambda pid: needing[pid].shown_at)
    used = None if hyper is None else hyper.current(len(answered))
    engine = QuestionEngine(config, answered, used, optimizers)
    stored = 0
    shown = {pid: needing[pid].shown for pid in order}
    shown_virtual = {pid: needing[pid].shown_virtual for pid in order}
    holder = None if share is None else share.name
    seconds = 0.0 if share is None else share.lease_seconds
    for pid, options in engine.propose_each(shown, shown_virtual):
        held = _holds(share, pid)  # else no need to read what they need
        now = store.needing_questions(most, [pid]).get(pid) if held else None
        if now is not None:
            made = MadeQuestion(
                participant_id=pid,
                seq=now.seq,
                options=options.tolist(),
                based_on=needing[pid].answers,
                virtual=_listed(engine.carried.get(pid)),
            )
            stored += store.queue_question(made, holder, seconds)
        if hyper is not None:  # fitted by the first proposal
            hyper.update(engine, len(answered), used)
            hyper = None
    return stored


def _listed(virtual: torch.Tensor | None) -> list | None:
    r"""Virtual comparisons as stored (nested lists), or ``None``."""
    return None if virtual is None else virtual.tolist()


def _holds(share: Share | None, pid: int) -> bool:
    r"""Whether this worker still holds participant ``pid`` after making
    their question: its heartbeat may give the lease up during a round (a
    worker joined and ``pid`` falls to it), and then the new holder makes
    that question; this one's is not offered for storing."""
    return share is None or pid in share.held


def _mine(needing: dict[int, Needing], share: Share | None) -> dict[int, Needing]:
    r"""The participants of ``needing`` whose questions this worker makes."""
    if share is None:
        return needing
    held = share.take(needing)
    return {pid: n for pid, n in needing.items() if pid in held}


def collaborative_round(
    store: Store,
    config: StudyConfig,
    engine: CollaborativeEngine,
    seen: dict[int, Progress],
    share: Share | None = None,
    answered: AnsweredRows | None = None,
) -> tuple[int, dict[int, Progress]]:
    r"""One round of the collaborative kind: tell ``engine`` the answers of
    each participant whose progress
    (:meth:`~prefbo.serve.store.Store.answer_progress`) moved since ``seen``,
    swap in or start its fits, then store the questions of this worker's
    waiting participants (those ``share`` gives it; ``None``: everyone) from
    one batched step, in one transaction
    (:meth:`~prefbo.serve.store.Store.queue_questions`). The answers are
    read by ``answered``, kept from round to round (only the new ones are
    read; ``None``: all of the moved participants', each round).
    Returns how many were stored and the progress now."""
    progress = store.answer_progress()
    changed = sorted(
        pid for pid in set(progress) | set(seen) if progress.get(pid) != seen.get(pid)
    )
    if changed:
        rows = (answered or AnsweredRows(store)).read(changed)
        for pid in changed:
            engine.update(pid, rows[pid])
    engine.maintain()
    needing = {
        pid: n
        for pid, n in store.needing_questions(config.answers_per_participant).items()
        if progress.get(pid, Progress(0, 0.0)).answers == n.answers
    }
    needing = _mine(needing, share)
    asked = engine.propose(
        {pid: n.shown for pid, n in needing.items()},
        {pid: n.shown_virtual for pid, n in needing.items()},
    )
    made = [
        MadeQuestion(
            pid,
            needing[pid].seq,
            options.tolist(),
            needing[pid].answers,
            _listed(engine.carried.get(pid)),
        )
        for pid, options in asked.items()
        if _holds(share, pid)
    ]
    holder = None if share is None else share.name
    seconds = 0.0 if share is None else share.lease_seconds
    return store.queue_questions(made, holder, seconds), progress


def encode_state(state: dict[str, Any]) -> str:
    r"""A model's saved shared part as text for the database."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_state(text: str) -> dict[str, Any]:
    r"""The inverse of :func:`encode_state` (tensors only: nothing else is
    unpickled)."""
    return torch.load(
        io.BytesIO(base64.b64decode(text)), map_location="cpu", weights_only=True
    )


def snapshot_once(
    store: Store,
    config: StudyConfig,
    last: int,
    hyper: Hyperparameters | None = None,
    optimizers: dict | None = None,
) -> int:
    r"""Store the favourites if the answers changed since ``last`` (a count);
    returns the count they were made at."""
    answers = store.count_answers()
    if answers == last:
        return last
    pids = [p.id for p in store.participants()]
    state = hyper and hyper.state
    engine = QuestionEngine(config, store.answered(), state, optimizers)
    store.add_snapshot(answers, engine.favourites(pids))
    return answers


def run_worker(
    url: str,
    root: str,
    stop: Any = None,
    index: int = 0,
    poll: float = 0.05,
    snapshot_every: float | None = None,
    parent: int | None = None,
) -> None:
    r"""The worker loop, until ``stop`` (an event; ``None``: never, the
    server's workers end on SIGTERM) is set or the server that started it
    (process ``parent``, by default this process's parent) is gone (killed:
    its workers do not outlive it). The worker makes the questions of the
    participants it holds leases on (:class:`~prefbo.serve.sharing.Share`,
    given up when it stops). Index 0 also keeps the researcher's favourites
    up to date, every ``snapshot_every`` seconds (default: the kind's, 5 s
    for the exact kinds and 2.5 s for the collaborative one)."""
    stop = threading.Event() if stop is None else stop
    store = Store(url)
    config = config_from_store(store, root)
    parent = os.getppid() if parent is None else parent
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    seat = Seat(store, config, index, Share(store).start())
    if config.model_kind == "collaborative":
        step: _ExactRounds | _CollaborativeRounds = _CollaborativeRounds(seat)
    else:
        step = _ExactRounds(seat)
    next_snapshot = 0.0
    try:
        while not stop.is_set() and os.getppid() == parent:
            try:
                made = step.round()
                if index == 0 and time.monotonic() >= next_snapshot:
                    step.snapshot()
                    every = (
                        step.snapshot_every
                        if snapshot_every is None
                        else snapshot_every
                    )
                    next_snapshot = time.monotonic() + every
            except Exception:  # a failed round is logged; the next one retries
                log.exception("worker %d: a round failed", index)
                made = 0
            if not made:
                stop.wait(poll)
    finally:
        step.close()
        seat.share.close()
        store.engine.dispose()


@dataclass(frozen=True)
class Seat:
    r"""Where a worker works: the study's database and settings, its index
    (index 0 keeps the favourites and the saved model) and its share of the
    participants (``None``: everyone, without leases)."""

    store: Store
    config: StudyConfig
    index: int = 0
    share: Share | None = None


class _ExactRounds:
    r"""A worker's rounds for the population and individual kinds."""

    #: Seconds between the favourites written for the researcher's page (a
    #: population model's favourites cost a fit).
    snapshot_every = 5.0

    def __init__(self, seat: Seat) -> None:
        self.seat = seat
        self.last, self.hyper = -1, Hyperparameters()
        self.optimizers: dict = {}  # individual participants', round to round

    def round(self) -> int:
        s = self.seat
        return work_once(s.store, s.config, s.share, self.hyper, self.optimizers)

    def snapshot(self) -> None:
        s = self.seat
        self.last = snapshot_once(
            s.store, s.config, self.last, self.hyper, self.optimizers
        )

    def close(self) -> None:
        pass


class _CollaborativeRounds:
    r"""A worker's rounds for the collaborative kind: one engine kept.
    Worker 0 fits the shared part and saves each fit in the database; the
    others never fit, and adopt each fit it saves (a model at its shared
    part, only the people's posteriors made), so that several workers on
    one machine do not each spend its cores on the same fits."""

    #: Seconds between the favourites written for the researcher's page (one
    #: batched call: they stay within 5 s of the answers).
    snapshot_every = 2.5

    def __init__(self, seat: Seat) -> None:
        self.seat = seat
        self.fitter = seat.index == 0
        self.engine = CollaborativeEngine(seat.config, fitter=self.fitter)
        self.seen: dict[int, Progress] = {}
        self.answered = AnsweredRows(seat.store)
        self.last = -1
        self.adopted: str | None = None  # the tag of the saved fit adopted
        self._adopt()  # a worker before this one fitted it
        self.saved_fits = 0

    def _adopt(self) -> None:
        r"""Give the engine the saved fit if it is new to it."""
        store = self.seat.store
        if store.model_state_tag() == self.adopted:
            return
        saved = store.model_state()
        if saved is not None:
            self.engine.restore(decode_state(saved))
            self.adopted = state_tag(saved)

    def round(self) -> int:
        s = self.seat
        if not self.fitter:
            self._adopt()
        made, self.seen = collaborative_round(
            s.store, s.config, self.engine, self.seen, s.share, self.answered
        )
        fits = len(self.engine.fits)
        if self.fitter and fits > self.saved_fits:
            s.store.set_model_state(encode_state(self.engine.shared_state()))
            self.saved_fits = fits
        return made

    def snapshot(self) -> None:
        answers = sum(n for n, _ in self.seen.values())
        if answers != self.last and self.engine.fitted:
            pids = [p.id for p in self.seat.store.participants()]
            self.seat.store.add_snapshot(answers, self.engine.favourites(pids))
            self.last = answers

    def close(self) -> None:
        self.engine.close()


def _watch(parent: int, every: float = 0.5) -> None:
    r"""End this process at once when ``parent`` is no longer its parent (a
    killed server): a round of fits can take minutes, and the worker must
    not outlive the server meanwhile. An open transaction is rolled back."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(0)
