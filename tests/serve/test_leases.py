from prefbo.serve import leases


def _join(store, *names):
    return [store.add_participant(f"t-{n}", n) for n in names]


def test_a_lapsed_heartbeat_leaves_the_live_workers(store):
    with store.transaction() as conn:
        assert leases.heartbeat(conn, "b", 3.0, now=100.0) == ["b"]
        assert leases.heartbeat(conn, "a", 3.0, now=101.0) == ["a", "b"]
        # b beat last at 100: lapsed at 103
        assert leases.heartbeat(conn, "a", 3.0, now=103.5) == ["a"]
        # and forgotten a minute later
        leases.heartbeat(conn, "a", 3.0, now=103.0 + leases.FORGET_SECONDS + 1)
        rows = conn.exec_driver_sql("SELECT name FROM workers").scalars().all()
    assert rows == ["a"]


def test_a_lease_is_taken_only_when_free_or_lapsed(store):
    p, q = _join(store, "p", "q")
    with store.transaction() as conn:
        assert leases.claim(conn, "a", [p], 3.0, now=100.0) == {p}
        assert leases.claim(conn, "b", [p, q], 3.0, now=102.9) == {q}
        assert leases.claim(conn, "a", [p], 3.0, now=102.9) == {p}  # renewed
        assert leases.claim(conn, "b", [p], 3.0, now=105.8) == set()  # to 105.9
        assert leases.claim(conn, "b", [p], 3.0, now=106.0) == {p}  # lapsed
        assert leases.claim(conn, "a", [], 3.0, now=106.0) == set()
    assert store.lease_holders() == {p: "b", q: "b"}


def test_renewing_gives_up_the_released_and_the_finished(store, make_config):
    from prefbo.serve import flow

    config = make_config(answers_per_participant=1)
    p, q, r = _join(store, "p", "q", "r")
    with store.transaction() as conn:
        leases.claim(conn, "a", [p, q, r], 3.0, now=100.0)
    qid = flow.current(store, config, r)["question_id"]
    flow.answer(store, config, r, qid, 0)  # r finished
    with store.transaction() as conn:
        assert leases.renew(conn, "a", [q], 3.0, now=102.0) == {p}
        # renewed to 105: b cannot take p at 104
        assert leases.claim(conn, "b", [p, q], 3.0, now=104.0) == {q}
        assert leases.renew_for_storing(conn, "a", [p, q], 3.0, now=104.0) == {p}
    store.leave("a")
    assert store.lease_holders() == {q: "b"}
