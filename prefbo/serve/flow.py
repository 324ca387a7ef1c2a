r"""A participant's path through a served study, one transaction a step
(its queries are :class:`~prefbo.serve.steps.ParticipantSteps`').

Invariants per participant, kept by every function here: questions
``0 .. a-1`` are answered (``a`` answers), question ``a`` is the one shown
(or, right after an undo or before the first request, queued), and at most
one more, ``a + 1``, waits unshown, made by a worker. An answer commits
together with the showing of the next question, so what a participant was
told is what the database holds; if no worker question waits, the next
question is drawn uniformly from the space (``origin = "random"``) rather
than keep the participant waiting.

Conflicts between concurrent requests (two tabs, a double click) are
decided by conditional updates: only one ``answered_at IS NULL -> now``
succeeds, and the other gets :class:`Conflict`. An undo names the answered
question it withdraws (a question's ``previous_id``), so a repeated undo of
the same question (two tabs, a double click) withdraws nothing more.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import torch

from prefbo.serve.config import StudyConfig
from prefbo.serve.rows import QuestionRow
from prefbo.serve.steps import ParticipantSteps, Raced, Window
from prefbo.serve.store import Store
from prefbo.utils.seeds import uniform_question_seed


class Conflict(Exception):
    r"""The request does not fit the participant's state (HTTP 409)."""


class NotFound(Exception):
    r"""No such question for this participant (HTTP 404)."""


class Invalid(Exception):
    r"""A malformed answer (HTTP 422)."""


def _previous(window: Window, answers: int) -> str | None:
    r"""The id of question ``answers - 1``, the latest answered one when the
    participant holds ``answers`` (what an undo names)."""
    row = window.at(answers - 1)
    return None if row is None else row.id


def _find(steps: ParticipantSteps, window: Window, question_id: str) -> QuestionRow:
    r"""The participant's question ``question_id``: in ``window`` or not.

    Raises:
        NotFound: The participant has no such question.
    """
    row = window.find(question_id) or steps.question(question_id)
    if row is None:
        raise NotFound("no such question for this participant.")
    return row


def _public(
    row: QuestionRow, config: StudyConfig, answers: int, previous: str | None
) -> dict[str, Any]:
    return {
        "done": False,
        "question_id": row.id,
        "seq": row.seq,
        "options": option_values(config, row.options),
        "q": config.q,
        "answered": answers,
        "total": config.answers_per_participant,
        "no_preference": config.no_preference,
        "previous_id": previous,
    }


def option_values(config: StudyConfig, options: list) -> list[dict[str, Any]]:
    r"""Stored options (model points, JSON lists) as the person saw them:
    dicts by variable name."""
    return config.space.decode(torch.tensor(options, dtype=torch.float64))


def _done(config: StudyConfig, answers: int, previous: str | None) -> dict[str, Any]:
    return {
        "done": True,
        "answered": answers,
        "total": config.answers_per_participant,
        "previous_id": previous,
    }


def _random_options(config: StudyConfig, pid: int, seq: int, salt: int = 0) -> list:
    seed = uniform_question_seed(config.seed, pid, seq, salt)
    X = config.space.sample(config.q, seed=seed % (2**31))
    tries = 0
    while len({tuple(r) for r in X.tolist()}) < config.q and tries < 20:
        tries += 1  # a small finite space can draw a design twice
        X = config.space.sample(config.q, seed=(seed + tries) % (2**31))
    return X.tolist()


def _show(
    steps: ParticipantSteps,
    config: StudyConfig,
    window: Window,
    a: int,
    salt: int = 0,
    fresh: bool = False,
) -> dict[str, Any]:
    r"""Show question ``a``: the waiting one (of ``window``), or a new
    random one (``fresh``: always; drawn with ``salt``, which a replaced
    question's successor changes)."""
    now = time.time()
    row = None if fresh else window.at(a)
    if row is None:
        row = QuestionRow(
            id=uuid.uuid4().hex,
            participant_id=steps.pid,
            seq=a,
            options=_random_options(config, steps.pid, a, salt),
            origin="random",
            based_on=a,
            created_at=now,
            shown_at=now,
        )
        steps.add_question(row)
    elif row.shown_at is None:
        steps.show(row.id, now)
    return _public(row, config, a, _previous(window, a))


#: Seconds a newcomer's first request waits for a worker's question, where
#: the study's kind makes newcomers' questions from everyone's answers:
#: the collaborative kind always (before any answer, from the model's
#: prior), the population kind once a worker has made a question.
FIRST_QUESTION_WAIT = 0.5
_FIRST_QUESTION_POLL = 0.02


def _await_first_question(store: Store, config: StudyConfig, pid: int) -> None:
    r"""Wait up to :data:`FIRST_QUESTION_WAIT` for a worker's question 0 of
    a participant who has none: their first question then comes from the
    population's posterior (or the collaborative model's prior), not
    uniformly."""
    if config.model_kind == "individual" or store.has_question(pid):
        return
    if config.model_kind != "collaborative" and not store.any_model_question():
        return  # no model yet: nothing to wait for
    deadline = time.monotonic() + FIRST_QUESTION_WAIT
    while time.monotonic() < deadline and not store.has_question(pid):
        time.sleep(_FIRST_QUESTION_POLL)


def current(store: Store, config: StudyConfig, pid: int) -> dict[str, Any]:
    r"""The question participant ``pid`` is on (shown now if it was not),
    or ``{"done": True, ...}``. A newcomer's first request may wait briefly
    for a worker's question (:data:`FIRST_QUESTION_WAIT`)."""
    _await_first_question(store, config, pid)
    for _ in range(3):  # a worker may insert question a at the same moment
        try:
            with store.participant(pid) as steps:
                return _unchanged(steps, config)
        except Raced:
            continue
    raise Conflict("the question could not be made; try again.")


def answer(
    store: Store, config: StudyConfig, pid: int, question_id: Any, choice: Any
) -> dict[str, Any]:
    r"""Record ``choice`` (an option index, or ``None`` for no preference)
    for question ``question_id`` and show the next question, in one
    transaction.

    Raises:
        Invalid: ``question_id`` is not a string, or ``choice`` is not an
            index in ``[0, q)`` (or ``None`` where the study offers no
            preference).
        NotFound: The participant has no such question.
        Conflict: The question is answered already or is not the current one.
    """
    if not isinstance(question_id, str):
        raise Invalid(f"question_id must be a string; got {question_id!r}.")
    if choice is None:
        if not config.no_preference:
            raise Invalid(
                "choice must be an option index; this study has no 'no preference'."
            )
    elif isinstance(choice, bool) or not isinstance(choice, int):
        raise Invalid(f"choice must be an integer option index; got {choice!r}.")
    elif not 0 <= choice < config.q:
        raise Invalid(f"choice must be in [0, {config.q}); got {choice}.")
    for _ in range(3):
        try:
            with store.participant(pid) as steps:
                return _answer(steps, config, question_id, choice)
        except Raced:
            continue
    raise Conflict("the answer could not be stored; try again.")


def _answer(
    steps: ParticipantSteps, config: StudyConfig, question_id: str, choice: int | None
) -> dict[str, Any]:
    window = steps.window()
    row = _find(steps, window, question_id)
    if row.answered:
        raise Conflict("this question was answered already.")
    a = window.answers
    if row.seq != a or row.shown_at is None:
        raise Conflict("this is not the current question; reload it.")
    now = time.time()
    if not steps.record_answer(question_id, choice, now, answers=a):
        raise Conflict("this question was answered already.")
    steps.log(question_id, "answer", {"choice": choice, "seq": a}, now)
    if a + 1 >= config.answers_per_participant:
        steps.set_finished(now)
        return _done(config, a + 1, question_id)
    return _show(steps, config, window, a + 1)


def undo(
    store: Store, config: StudyConfig, pid: int, question_id: Any
) -> dict[str, Any]:
    r"""Withdraw participant ``pid``'s answer to ``question_id`` (their
    latest) and show its question again (the withdrawn answer stays in the
    audit trail). Undoing a question that is no longer answered (a repeated
    undo) changes nothing and returns the current question.

    Raises:
        Invalid: ``question_id`` is not a string.
        NotFound: The participant has no such question.
        Conflict: ``question_id`` is answered but not the latest answer.
    """
    if not isinstance(question_id, str):
        raise Invalid(
            "question_id must be the id of the answered question to withdraw "
            f"(a question's previous_id); got {question_id!r}."
        )
    for _ in range(3):  # another tab's answer or undo may come first
        try:
            with store.participant(pid) as steps:
                return _undo(steps, config, question_id)
        except Raced:
            continue
    raise Conflict("the answer could not be withdrawn; try again.")


def _undo(
    steps: ParticipantSteps, config: StudyConfig, question_id: str
) -> dict[str, Any]:
    window = steps.window()
    a = window.answers
    last = _find(steps, window, question_id)
    if not last.answered:  # undone already: nothing to do
        return _unchanged(steps, config)
    if last.seq != a - 1:
        raise Conflict("only the latest answer can be undone; reload the page.")
    if not steps.withdraw(last.id, answers=a):  # a concurrent undo was first
        return _unchanged(steps, config)
    # the question shown after it waits again; a worker's later one goes
    steps.hide(a)
    steps.drop_from(a + 1)
    steps.set_finished(None)
    steps.log(
        last.id,
        "undo",
        {"choice": last.choice, "no_preference": last.no_preference},
    )
    return _public(last, config, a - 1, _previous(window, a - 1))


def _unchanged(steps: ParticipantSteps, config: StudyConfig) -> dict[str, Any]:
    r"""The participant's current question (shown now if it was not), or
    the end."""
    window = steps.window()
    a = window.answers
    if a >= config.answers_per_participant:
        return _done(config, a, _previous(window, a))
    return _show(steps, config, window, a)


def replace(
    store: Store, config: StudyConfig, pid: int, question_id: str, reason: str
) -> dict[str, Any]:
    r"""Replace participant ``pid``'s current question ``question_id`` (one
    that cannot be shown, e.g. an option the display could not render) by a
    new uniform one, shown now; the replaced question and ``reason`` go to
    the audit trail (event ``replace``), and a worker's question made after
    it is dropped (it believed an answer to it).

    Raises:
        Conflict: ``question_id`` is not the participant's current question.
    """
    with store.participant(pid) as steps:
        window = steps.window()
        a = window.answers
        row = window.find(question_id)
        if row is None or row.seq != a or row.answered:
            raise Conflict("this is not the current question; reload it.")
        steps.drop_from(a)
        salt = 1 + steps.count_events("replace")
        steps.log(
            question_id,
            "replace",
            {"seq": a, "options": row.options, "reason": reason},
        )
        return _show(steps, config, window, a, salt, fresh=True)
