r"""A participant's path through a served study, one transaction a step.

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

import json
import time
import uuid
from typing import Any

import torch
from sqlalchemy import and_, delete, func, insert, select, tuple_, update
from sqlalchemy.exc import IntegrityError

from prefbo.serve.config import StudyConfig
from prefbo.serve.schema import events, participants, questions
from prefbo.serve.store import Store, log_event
from prefbo.utils.seeds import uniform_question_seed


class Conflict(Exception):
    r"""The request does not fit the participant's state (HTTP 409)."""


class NotFound(Exception):
    r"""No such question for this participant (HTTP 404)."""


class Invalid(Exception):
    r"""A malformed answer (HTTP 422)."""


def _rows(conn, pid: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(questions)
        .where(questions.c.participant_id == pid)
        .order_by(questions.c.seq)
    ).all()
    return [dict(r._mapping) for r in rows]


def _answered(rows: list[dict[str, Any]]) -> int:
    return sum(r["answered_at"] is not None for r in rows)


def _previous(rows: list[dict[str, Any]], answers: int) -> str | None:
    r"""The id of the latest answered question (what an undo names)."""
    return rows[answers - 1]["id"] if answers else None


def _public(
    row: dict[str, Any], config: StudyConfig, answers: int, previous: str | None
) -> dict[str, Any]:
    options = json.loads(row["options"])
    return {
        "done": False,
        "question_id": row["id"],
        "seq": row["seq"],
        "options": option_values(config, options),
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
    conn, config: StudyConfig, pid: int, rows: list, a: int, salt: int = 0
) -> dict[str, Any]:
    r"""Show question ``a``: the waiting one, or a new random one (drawn
    with ``salt``, which a replaced question's successor changes)."""
    now = time.time()
    row = next((r for r in rows if r["seq"] == a), None)
    if row is None:
        row = {
            "id": uuid.uuid4().hex,
            "participant_id": pid,
            "seq": a,
            "options": json.dumps(_random_options(config, pid, a, salt)),
            "origin": "random",
            "based_on": a,
            "created_at": now,
            "shown_at": now,
            "no_preference": False,
        }
        conn.execute(insert(questions).values(**row))
    elif row["shown_at"] is None:
        conn.execute(
            update(questions).where(questions.c.id == row["id"]).values(shown_at=now)
        )
    return _public(row, config, a, _previous(rows, a))


#: Seconds a newcomer's first request waits for a worker's question, where
#: the study's kind makes newcomers' questions from everyone's answers
#: (population, collaborative) and a worker has made a question already.
FIRST_QUESTION_WAIT = 0.5
_FIRST_QUESTION_POLL = 0.02


def _await_first_question(store: Store, config: StudyConfig, pid: int) -> None:
    r"""Wait up to :data:`FIRST_QUESTION_WAIT` for a worker's question 0 of
    a participant who has none: their first question then comes from the
    population's posterior, not uniformly."""
    if config.model_kind == "individual" or _has_question(store, pid):
        return
    with store.engine.connect() as conn:
        made = select(questions.c.id).where(questions.c.origin == "model")
        if conn.execute(made.limit(1)).first() is None:
            return  # no model yet: nothing to wait for
    deadline = time.monotonic() + FIRST_QUESTION_WAIT
    while time.monotonic() < deadline and not _has_question(store, pid):
        time.sleep(_FIRST_QUESTION_POLL)


def _has_question(store: Store, pid: int) -> bool:
    with store.engine.connect() as conn:
        mine = select(questions.c.id).where(questions.c.participant_id == pid)
        return conn.execute(mine.limit(1)).first() is not None


def current(store: Store, config: StudyConfig, pid: int) -> dict[str, Any]:
    r"""The question participant ``pid`` is on (shown now if it was not),
    or ``{"done": True, ...}``. A newcomer's first request may wait briefly
    for a worker's question (:data:`FIRST_QUESTION_WAIT`)."""
    _await_first_question(store, config, pid)
    for _ in range(3):  # a worker may insert question a at the same moment
        try:
            with store.transaction() as conn:
                rows = _rows(conn, pid)
                a = _answered(rows)
                if a >= config.answers_per_participant:
                    return _done(config, a, _previous(rows, a))
                return _show(conn, config, pid, rows, a)
        except IntegrityError:
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
            with store.transaction() as conn:
                return _answer(conn, config, pid, question_id, choice)
        except IntegrityError:
            continue
    raise Conflict("the answer could not be stored; try again.")


def _answer(conn, config, pid, question_id, choice):
    rows = _rows(conn, pid)
    row = next((r for r in rows if r["id"] == question_id), None)
    if row is None:
        raise NotFound("no such question for this participant.")
    if row["answered_at"] is not None:
        raise Conflict("this question was answered already.")
    a = _answered(rows)
    if row["seq"] != a or row["shown_at"] is None:
        raise Conflict("this is not the current question; reload it.")
    now = time.time()
    done = conn.execute(
        update(questions)
        .where(and_(questions.c.id == question_id, questions.c.answered_at.is_(None)))
        .values(
            answered_at=now,
            choice=None if choice is None else choice,
            no_preference=choice is None,
        )
    )
    if done.rowcount != 1:
        raise Conflict("this question was answered already.")
    log_event(conn, pid, question_id, "answer", {"choice": choice, "seq": a}, now)
    row["answered_at"] = now
    if a + 1 >= config.answers_per_participant:
        conn.execute(
            update(participants).where(participants.c.id == pid).values(finished_at=now)
        )
        return _done(config, a + 1, question_id)
    return _show(conn, config, pid, rows, a + 1)


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
    with store.transaction() as conn:
        rows = _rows(conn, pid)
        a = _answered(rows)
        last = next((r for r in rows if r["id"] == question_id), None)
        if last is None:
            raise NotFound("no such question for this participant.")
        if last["answered_at"] is None:  # undone already: nothing to do
            return _unchanged(conn, config, pid)
        if last["seq"] != a - 1:
            raise Conflict("only the latest answer can be undone; reload the page.")
        withdrawn = conn.execute(
            update(questions)
            .where(
                and_(questions.c.id == last["id"], questions.c.answered_at.isnot(None))
            )
            .values(answered_at=None, choice=None, no_preference=False)
        )
        if withdrawn.rowcount != 1:  # a concurrent undo of it was first
            return _unchanged(conn, config, pid)
        # the question shown after it waits again; a worker's later one goes
        conn.execute(
            update(questions)
            .where(and_(questions.c.participant_id == pid, questions.c.seq == a))
            .values(shown_at=None)
        )
        conn.execute(
            delete(questions).where(
                and_(questions.c.participant_id == pid, questions.c.seq > a)
            )
        )
        conn.execute(
            update(participants)
            .where(participants.c.id == pid)
            .values(finished_at=None)
        )
        log_event(
            conn,
            pid,
            last["id"],
            "undo",
            {"choice": last["choice"], "no_preference": last["no_preference"]},
        )
        last.update(answered_at=None)
        return _public(last, config, a - 1, _previous(rows, a - 1))


def _unchanged(conn, config: StudyConfig, pid: int) -> dict[str, Any]:
    r"""The participant's current question (or the end), as it stands."""
    rows = _rows(conn, pid)
    a = _answered(rows)
    if a >= config.answers_per_participant:
        return _done(config, a, _previous(rows, a))
    return _show(conn, config, pid, rows, a)


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
    with store.transaction() as conn:
        rows = _rows(conn, pid)
        a = _answered(rows)
        row = next((r for r in rows if r["id"] == question_id), None)
        if row is None or row["seq"] != a or row["answered_at"] is not None:
            raise Conflict("this is not the current question; reload it.")
        conn.execute(
            delete(questions).where(
                and_(questions.c.participant_id == pid, questions.c.seq >= a)
            )
        )
        salt = (
            1
            + conn.execute(
                select(func.count())
                .select_from(events)
                .where(and_(events.c.participant_id == pid, events.c.kind == "replace"))
            ).scalar_one()
        )
        log_event(
            conn,
            pid,
            question_id,
            "replace",
            {"seq": a, "options": json.loads(row["options"]), "reason": reason},
        )
        return _show(conn, config, pid, rows[:a], a, salt)


def queue(
    store: Store,
    pid: int,
    seq: int,
    options: list,
    based_on: int,
    virtual: list | None = None,
) -> bool:
    r"""Store a worker's question ``seq`` for participant ``pid`` (with the
    virtual comparisons it carries to its answer, if any) unless one is
    there already (another worker's, or a random one shown meanwhile);
    returns whether it was stored."""
    try:
        with store.transaction() as conn:
            conn.execute(_model_question(pid, seq, options, based_on, virtual))
        return True
    except IntegrityError:
        return False


def _model_question(
    pid: int, seq: int, options: list, based_on: int, virtual: list | None = None
) -> Any:
    r"""The insert of a worker's question."""
    return insert(questions).values(
        id=uuid.uuid4().hex,
        participant_id=pid,
        seq=seq,
        options=json.dumps(options),
        origin="model",
        based_on=based_on,
        created_at=time.time(),
        no_preference=False,
        virtual_comparisons=None if virtual is None else json.dumps(virtual),
    )


def queue_many(store: Store, made: list[tuple[int, int, list, int]]) -> int:
    r"""Store a round's worker questions ``(participant, seq, options,
    answers they were made at)`` in one transaction: each unless the
    participant has answered or undone since (their answer count is no
    longer the one it was made at) or a question ``seq`` is there already;
    returns how many were stored."""
    if not made:
        return 0
    pids = sorted({m[0] for m in made})
    stored = 0
    with store.transaction() as conn:
        counts = dict(
            conn.execute(
                select(questions.c.participant_id, func.count(questions.c.answered_at))
                .where(questions.c.participant_id.in_(pids))
                .group_by(questions.c.participant_id)
            ).all()
        )
        wanted = [(pid, seq) for pid, seq, _, _ in made]
        taken = set(
            conn.execute(
                select(questions.c.participant_id, questions.c.seq).where(
                    tuple_(questions.c.participant_id, questions.c.seq).in_(wanted)
                )
            ).all()
        )
        for pid, seq, options, based_on in made:
            if counts.get(pid, 0) != based_on or (pid, seq) in taken:
                continue
            try:
                with conn.begin_nested():  # another process's insert first
                    conn.execute(_model_question(pid, seq, options, based_on))
                stored += 1
            except IntegrityError:
                pass
    return stored


def needing_questions(
    store: Store, config: StudyConfig, only: list[int] | None = None
) -> dict[int, tuple]:
    r"""Participants (of ``only``, default all) without a waiting question:
    id to ``(seq, shown options or None, answers, shown at, shown virtual
    comparisons or None)`` of the question a worker should make (``shown
    at``: when the question on screen was shown, ``inf`` for none).

    Two queries whatever the study's size: each active participant's answer
    count and last ``seq``, then the rows on screen of those whose last
    question is the one they look at."""
    query = select(participants.c.id).where(participants.c.finished_at.is_(None))
    if only is not None:
        query = query.where(participants.c.id.in_(only))
    with store.engine.connect() as conn:
        active = conn.execute(query).scalars().all()
        counts = (
            conn.execute(
                select(
                    questions.c.participant_id,
                    func.count(questions.c.answered_at),
                    func.max(questions.c.seq),
                )
                .where(questions.c.participant_id.in_(active))
                .group_by(questions.c.participant_id)
            ).all()
            if active
            else []
        )
        last = {pid: (int(a), int(top)) for pid, a, top in counts}
        # a participant's last question is the one at seq = answers: on screen
        # (then the next one is needed) or queued unshown (nothing is)
        at = [(pid, a) for pid, (a, top) in last.items() if top == a]
        rows = (
            conn.execute(
                select(questions).where(
                    tuple_(questions.c.participant_id, questions.c.seq).in_(at)
                )
            ).all()
            if at
            else []
        )
    on_screen = {r.participant_id: dict(r._mapping) for r in rows}
    out: dict[int, tuple] = {}
    for pid in active:
        a, top = last.get(pid, (0, -1))
        shown = on_screen.get(pid)
        if top > a or (shown is not None and shown["shown_at"] is None):
            continue  # question a + 1, or an unshown question a, waits
        if shown is None:
            target, options, since, virtual = a, None, float("inf"), None
        else:
            target, options = a + 1, json.loads(shown["options"])
            since, virtual = shown["shown_at"], shown["virtual_comparisons"]
            virtual = None if virtual is None else json.loads(virtual)
        if target < config.answers_per_participant:
            out[pid] = (target, options, a, since, virtual)
    return out
