import threading
import time

import pytest

from prefbo.serve import flow
from prefbo.serve.collaborative import CollaborativeEngine
from prefbo.serve.sharing import Share, worker_name
from prefbo.serve.store import Store
from prefbo.serve.worker import collaborative_round, work_once

BOX = [
    {"name": "x", "type": "continuous", "lower": 0.0, "upper": 1.0},
    {"name": "y", "type": "continuous", "lower": 0.0, "upper": 1.0},
]


def test_a_renewal_must_come_before_the_lease_lapses(store):
    with pytest.raises(ValueError, match=r"renew_seconds must be in \(0, lease"):
        Share(store, "w", lease_seconds=1.0, renew_seconds=1.0)
    assert worker_name(42).endswith(":42")


def test_live_workers_divide_the_participants_by_rank(store):
    pids = [store.add_participant(f"t{i}", f"p{i}") for i in range(6)]
    one = Share(store, "w1")
    assert one.take(pids) == set(pids)  # alone: everyone
    two = Share(store, "w2")
    # w2 shares with w1 but w1 holds every lease: w2 gets nobody yet
    assert two.take(pids) == set()
    one.renew()  # w1 sees two workers: gives up the odd ids
    assert one.held == {p for p in pids if p % 2 == 0}
    two._refused.clear()  # w2 would retry after RETRY_SECONDS
    assert two.take(pids) == {p for p in pids if p % 2 == 1}
    # w1 stops: its leases go at once, and w2 alone takes everyone
    one.close()
    two.renew()
    two._refused.clear()
    assert two.take(pids) == set(pids)


def test_a_dead_workers_participants_are_taken_over(store):
    pids = [store.add_participant(f"t{i}", f"p{i}") for i in range(4)]
    dead = Share(store, "dead", lease_seconds=0.6, renew_seconds=0.2)
    assert dead.take(pids) == set(pids)  # then it never renews
    alive = Share(store, "alive", lease_seconds=0.6, renew_seconds=0.2)
    assert alive.take(pids) == set()
    time.sleep(0.7)
    alive.renew()
    alive._refused.clear()
    assert alive.live == ["alive"] and alive.take(pids) == set(pids)
    assert set(store.lease_holders().values()) == {"alive"}


def test_a_started_share_keeps_its_leases_between_long_rounds(store):
    pids = [store.add_participant(f"t{i}", f"p{i}") for i in range(3)]
    busy = Share(store, "busy", lease_seconds=0.6, renew_seconds=0.2).start()
    assert busy.take(pids) == set(pids)
    time.sleep(1.0)  # a round of fits: no take() meanwhile, the thread renews
    other = Share(store, "other", lease_seconds=0.6, renew_seconds=0.2)
    other.renew()
    assert other.live == ["busy", "other"]
    assert other.take(pids) == set()  # held, and the odd ids fall to busy
    busy.close()
    other.renew()
    other._refused.clear()
    assert other.live == ["other"] and other.take(pids) == set(pids)


@pytest.mark.parametrize("kind", ["collaborative", "individual"])
def test_two_workers_never_make_the_same_participants_question(
    store, make_config, kind
):
    # two workers (threads, each with its own connections) run rounds while
    # eight participants answer as their questions come (the second worker
    # may start with no share:
    # the first holds every lease until its next renewal); every question a
    # worker made is recorded
    model = {"kind": kind, "initial_random": 3}
    if kind == "individual":
        model["strategy"] = "random"
    config = make_config(space=BOX, model=model, answers_per_participant=100)
    pids = [store.add_participant(f"t{i}", f"p{i}") for i in range(8)]
    for pid in pids[:4]:  # answers enough for the collaborative model
        flow.answer(
            store, config, pid, flow.current(store, config, pid)["question_id"], 0
        )
    made: list[tuple[str, int, int]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(name: str) -> None:
        mine = Store(store.url)
        share = Share(mine, name).start()  # with its heartbeat, as a worker's
        engine = CollaborativeEngine(config, background=False)
        queue_questions = mine.queue_questions

        def recorded(questions, holder=None, seconds=0.0):
            with lock:
                made.extend((name, m.participant_id, m.seq) for m in questions)
            return queue_questions(questions, holder, seconds)

        def recorded_one(question, holder=None, seconds=0.0):
            return recorded([question], holder, seconds) == 1

        mine.queue_questions, mine.queue_question = recorded, recorded_one
        seen: dict = {}
        try:
            while not stop.is_set():
                if kind == "collaborative":
                    _, seen = collaborative_round(mine, config, engine, seen, share)
                else:
                    work_once(mine, config, share)
                time.sleep(0.01)
        finally:
            share.close()
            engine.close()
            mine.engine.dispose()

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("w1", "w2")]
    for t in threads:
        t.start()
    try:
        # until both made questions a while (the machine's speed varies)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                if len(made) >= 16 and {m[0] for m in made[8:]} == {"w1", "w2"}:
                    break
            # those whose next question waits answer: at the workers' pace
            needing = store.needing_questions(config.answers_per_participant)
            for pid in set(pids) - set(needing):
                q = flow.current(store, config, pid)
                if not q["done"]:
                    flow.answer(store, config, pid, q["question_id"], pid % 2)
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    by_question: dict[tuple[int, int], set[str]] = {}
    for name, pid, seq in made:
        by_question.setdefault((pid, seq), set()).add(name)
    twice = [k for k, names in by_question.items() if len(names) > 1]
    assert twice == []  # no question made by both workers
    assert {name for name, _, _ in made} == {"w1", "w2"}  # both worked
    # what was stored is what one worker made (a question made for a
    # participant who answered meanwhile is not stored)
    stored = {
        (r.participant_id, r.seq)
        for pid in pids
        for r in store.questions_of(pid)
        if r.origin == "model"
    }
    assert stored and stored <= set(by_question)
