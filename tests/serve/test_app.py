import json
import threading
import time

import pytest
from starlette.testclient import TestClient

from prefbo.serve import flow
from prefbo.serve.app import MAX_BODY, StudyApp
from prefbo.serve.config import study_from_dict
from prefbo.serve.demo import DEMO_STUDY
from prefbo.serve.render import Renderer


@pytest.fixture
def client(store, make_config):
    config = make_config(max_participants=3, no_preference=True)
    store.set_study_source(config.source)
    app = StudyApp(store, config, Renderer(config), "JOIN", "RESEARCHER").app()
    with TestClient(app, raise_server_exceptions=False) as c:
        c.store = store
        yield c


def _join(client, label=None):
    r = client.post("/api/join", json={"join": "JOIN", "label": label})
    assert r.status_code == 200
    return r.json()["token"]


def test_a_participant_joins_answers_undoes_and_finishes(client):
    r = client.post("/join/JOIN", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/p/")
    page = client.get(r.headers["location"])
    assert page.status_code == 200 and "participant.js" in page.text
    token = _join(client, "Bea")
    api = f"/api/p/{token}"
    q = client.get(f"{api}/question").json()
    assert q["q"] == 2 and q["total"] == 4 and q["no_preference"]
    assert q["previous_id"] is None
    first = q["question_id"]
    q = client.post(f"{api}/answer", json={"question_id": first, "choice": 1}).json()
    assert q["answered"] == 1 and q["previous_id"] == first
    back = client.post(f"{api}/undo", json={"question_id": first}).json()
    assert back["answered"] == 0 and back["question_id"] == first
    q = back
    for choice in [0, None, 1, 0]:
        q = client.post(
            f"{api}/answer", json={"question_id": q["question_id"], "choice": choice}
        ).json()
    last = q["previous_id"]
    assert q == {"done": True, "answered": 4, "total": 4, "previous_id": last}
    assert client.get(f"{api}/best").json() == {
        "favourite": None,
        "as_of_answers": None,
    }


@pytest.mark.parametrize(
    "payload, status, message",
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (json.dumps({"question_id": "Q"}).encode(), 422, "choice is missing"),
        (json.dumps({"question_id": "Q", "choice": 2}).encode(), 422, "in [0, 2)"),
        (json.dumps({"question_id": "Q", "choice": "1"}).encode(), 422, "integer"),
        (json.dumps({"question_id": "nope", "choice": 0}).encode(), 404, "no such"),
        (b"x" * (MAX_BODY + 1), 413, "over"),
    ],
)
def test_bad_answers_are_4xx_and_store_nothing(client, payload, status, message):
    token = _join(client)
    q = client.get(f"/api/p/{token}/question").json()
    body = payload.replace(b'"Q"', json.dumps(q["question_id"]).encode())
    r = client.post(f"/api/p/{token}/answer", content=body)
    assert r.status_code == status and message in r.json()["error"]
    assert "Traceback" not in r.text
    assert client.store.count_answers() == 0


def test_tokens_stale_and_double_answers(client):
    a, b = _join(client), _join(client)
    qa = client.get(f"/api/p/{a}/question").json()
    qb = client.get(f"/api/p/{b}/question").json()
    # another participant's question, with one's own token: not found
    r = client.post(
        f"/api/p/{a}/answer", json={"question_id": qb["question_id"], "choice": 0}
    )
    assert r.status_code == 404
    assert client.get("/api/p/unknown/question").status_code == 404
    assert client.get("/p/unknown").status_code == 404
    ok = client.post(
        f"/api/p/{a}/answer", json={"question_id": qa["question_id"], "choice": 0}
    )
    assert ok.status_code == 200
    again = client.post(
        f"/api/p/{a}/answer", json={"question_id": qa["question_id"], "choice": 0}
    )
    assert again.status_code == 409 and "answered already" in again.json()["error"]
    client.post(f"/api/p/{a}/undo", json={"question_id": qa["question_id"]})
    stale = ok.json()["question_id"]
    r = client.post(f"/api/p/{a}/answer", json={"question_id": stale, "choice": 1})
    assert r.status_code == 409 and "not the current question" in r.json()["error"]
    assert client.store.count_answers() == 0
    assert client.post(f"/api/p/{a}/undo").status_code == 422  # names no question


def test_joining_is_closed_when_full_and_needs_the_code(client):
    assert client.post("/api/join", json={"join": "WRONG"}).status_code == 404
    assert client.get("/join/WRONG", follow_redirects=False).status_code == 404
    assert client.post("/join/WRONG", follow_redirects=False).status_code == 404
    for _ in range(3):
        _join(client)
    r = client.post("/api/join", json={"join": "JOIN"})
    assert r.status_code == 403 and "full" in r.json()["error"]
    page = client.get("/join/JOIN")  # a person sees a page, not JSON
    assert page.status_code == 403 and "text/html" in page.headers["content-type"]
    assert "This study is closed" in page.text and "is full" in page.text
    assert "copied whole" not in page.text  # the hint is for unknown links
    assert client.post("/join/JOIN").status_code == 403
    assert client.store.count_participants() == 3


def test_opening_the_join_link_makes_nobody_until_start_is_pressed(client):
    # a link scanner (HEAD), a chat preview and a reload (GET) with a
    # three-person study: nobody is made, the real person still gets in
    assert client.head("/join/JOIN").status_code == 200
    for _ in range(2):
        page = client.get("/join/JOIN?label=P017")
        assert page.status_code == 200 and 'action="/join/JOIN"' in page.text
        assert 'name="label" value="P017"' in page.text
    assert client.store.count_participants() == 0
    r = client.post("/join/JOIN", data={"label": "P017"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/p/")
    assert [p.label for p in client.store.participants()] == ["P017"]
    r = client.post("/join/JOIN", follow_redirects=False)  # no label: numbered
    assert client.store.participants()[1].label == "participant 2"


def test_people_get_pages_and_scripts_get_json(client):
    for path, status, text in (
        ("/p/not-a-participant", 404, "Unknown participant link."),
        ("/join/not-the-code", 404, "Unknown join link."),
        ("/r/not-the-token", 404, "Not found."),
    ):
        r = client.get(path)
        assert r.status_code == status and "text/html" in r.headers["content-type"]
        assert "This link is not known" in r.text and text in r.text
        assert "copied whole" in r.text
        assert "/static/study.css" in r.text and "{" not in r.text
    r = client.get("/api/p/not-a-participant/question")
    assert r.json() == {"error": "unknown participant link."}
    assert client.get("/r/not-the-token/export.csv").json() == {"error": "not found."}
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert client.get("/static/favicon.svg").status_code == 200


def test_a_repeated_undo_withdraws_one_answer(client):
    token = _join(client)
    api = f"/api/p/{token}"
    q = client.get(f"{api}/question").json()
    for choice in (0, 1):
        q = client.post(
            f"{api}/answer", json={"question_id": q["question_id"], "choice": choice}
        ).json()
    assert client.store.count_answers() == 2
    name = {"question_id": q["previous_id"]}
    first, second = (client.post(f"{api}/undo", json=name) for _ in range(2))
    assert first.status_code == second.status_code == 200
    assert first.json()["question_id"] == second.json()["question_id"]
    assert client.store.count_answers() == 1
    undos = [e for e in client.store.events() if e.kind == "undo"]
    assert len(undos) == 1
    # an answer that is not the latest cannot be withdrawn
    older = client.post(f"{api}/undo", json={"question_id": "nope"})
    assert older.status_code == 404


def test_the_researchers_pages_need_the_token(client):
    token = _join(client, "Cy")
    assert "No answers yet: the favourites" in client.get("/r/RESEARCHER").text
    q = client.get(f"/api/p/{token}/question").json()
    client.post(
        f"/api/p/{token}/answer", json={"question_id": q["question_id"], "choice": 1}
    )
    assert client.get("/r/WRONG").status_code == 404
    assert client.get("/r/WRONG/export.csv").status_code == 404
    page = client.get("/r/RESEARCHER")
    assert page.status_code == 200 and "Cy" in page.text and "<svg" in page.text
    assert "No favourites yet: the favourites" in page.text  # no worker here
    status = client.get("/api/r/RESEARCHER/status").json()
    assert status["answers"] == 1 and status["participants"][0]["label"] == "Cy"
    csv = client.get("/r/RESEARCHER/export.csv")
    assert csv.headers["content-type"].startswith("text/csv")
    head, row = csv.text.strip().splitlines()
    assert head.startswith("participant,label,seq") and ",Cy,0," in row
    data = client.get("/r/RESEARCHER/export.json").json()
    assert (
        data["questions"][0]["choice"] == 1
        and data["study"]["answers_per_participant"] == 4
    )
    added = client.post("/api/r/RESEARCHER/participants", json={"label": "Di"}).json()
    assert added["url"] == f"/p/{added['token']}"
    assert client.get("/r/RESEARCHER/export.xml").status_code == 404


def test_options_are_rendered_for_their_participant_only(store, tmp_path):
    config = study_from_dict(DEMO_STUDY, root=tmp_path)
    app = StudyApp(store, config, Renderer(config), "J", "R").app()
    with TestClient(app, raise_server_exceptions=False) as client:
        a, b = _join_code(client, "J"), _join_code(client, "J")
        q = client.get(f"/api/p/{a}/question").json()
        assert q["media"] == ["image/svg+xml", "image/svg+xml"]
        r = client.get(f"/p/{a}/option/{q['question_id']}/1")
        assert r.status_code == 200 and r.content.startswith(b"<svg")
        assert client.get(f"/p/{b}/option/{q['question_id']}/1").status_code == 404
        assert client.get(f"/p/{a}/option/{q['question_id']}/2").status_code == 404


def _join_code(client, code):
    return client.post("/api/join", json={"join": code}).json()["token"]


def _failing_renderer(config, fails):
    renderer = Renderer(config)
    renderer.kind = "callable"

    def render(values):
        if fails(values):
            raise RuntimeError("secret detail")
        return b"<svg/>", "image/svg+xml"

    renderer._function = render
    return renderer


def test_a_failing_option_is_a_500_without_details(store, make_config):
    config = make_config()
    calls = []

    def fails(values):  # the question renders, the option later does not
        calls.append(1)
        return len(calls) > 2

    renderer = _failing_renderer(config, fails)
    app = StudyApp(store, config, renderer, "J", "R").app()
    with TestClient(app, raise_server_exceptions=False) as client:
        token = _join_code(client, "J")
        q = client.get(f"/api/p/{token}/question").json()
        renderer._cache.clear()
        r = client.get(f"/p/{token}/option/{q['question_id']}/0")
        assert r.status_code == 500 and "secret detail" not in r.text


def test_a_question_that_cannot_be_shown_is_replaced(store, make_config, caplog):
    config = make_config()
    # sweetness above 5 cannot be rendered: such questions are replaced
    renderer = _failing_renderer(config, lambda v: v["sweetness"] > 5)
    app = StudyApp(store, config, renderer, "J", "R").app()
    with TestClient(app, raise_server_exceptions=False) as client:
        token = _join_code(client, "J")
        api = f"/api/p/{token}"
        q = client.get(f"{api}/question").json()
        seen = [q]
        while not q["done"]:
            q = client.post(
                f"{api}/answer", json={"question_id": q["question_id"], "choice": 0}
            ).json()
            seen.append(q)
    shown = [o for q in seen if not q["done"] for o in q["options"]]
    assert all(o["sweetness"] <= 5 for o in shown)  # only what renders
    events = store.events()
    replaced = [e for e in events if e.kind == "replace"]
    assert replaced, "the seed draws no failing question: the test checks nothing"
    assert all("secret detail" in e.data["reason"] for e in replaced)
    assert {e.question_id for e in replaced}.isdisjoint(
        row.id for row in store.answered()
    )
    assert "replaced by a new one" in caplog.text


def test_an_answer_stands_when_another_tab_replaced_the_next_question(
    store, make_config, monkeypatch
):
    # the answer is stored and its next question cannot be shown; another
    # tab's request replaced that question first: the answer's reply is the
    # question now current (200), not a 409 that says it was not stored
    config = make_config()
    renderer = _failing_renderer(config, lambda v: v["sweetness"] > 5)
    app = StudyApp(store, config, renderer, "J", "R").app()
    real = flow.replace

    def second(store_, config_, pid, question_id, reason):
        real(store_, config_, pid, question_id, reason)  # the other tab's
        return real(store_, config_, pid, question_id, reason)  # ours: 409

    with TestClient(app, raise_server_exceptions=False) as client:
        token = _join_code(client, "J")
        api = f"/api/p/{token}"
        q = client.get(f"{api}/question").json()
        monkeypatch.setattr(flow, "replace", second)
        answered = 0
        while not q["done"]:
            r = client.post(
                f"{api}/answer", json={"question_id": q["question_id"], "choice": 0}
            )
            assert r.status_code == 200, r.text
            answered += 1
            q = r.json()
            if q["done"] or any(e.kind == "replace" for e in store.events()):
                break
    assert any(e.kind == "replace" for e in store.events()), "no failing question"
    assert len(store.answered()) == answered  # every 200 an answer stored
    if not q["done"]:
        assert all(o["sweetness"] <= 5 for o in q["options"])
        current = flow.current(store, config, store.participants()[0].id)
        assert current["question_id"] == q["question_id"]


def test_a_question_is_refused_when_nothing_renders(store, make_config):
    config = make_config()
    app = StudyApp(
        store, config, _failing_renderer(config, lambda v: True), "J", "R"
    ).app()
    with TestClient(app, raise_server_exceptions=False) as client:
        token = _join_code(client, "J")
        r = client.get(f"/api/p/{token}/question")
        assert r.status_code == 503 and "try again" in r.json()["error"]


def test_concurrent_joins_never_pass_max_participants(client):
    from concurrent.futures import ThreadPoolExecutor

    def join(i):
        return client.post(
            "/api/join", json={"join": "JOIN", "label": f"r{i}"}
        ).status_code

    with ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(join, range(30)))
    assert codes.count(200) == 3 and codes.count(403) == 27
    assert client.store.count_participants() == 3


@pytest.mark.parametrize("label", ["a\x00b", "tab\tlabel", "x" * 201, 7])
def test_a_bad_label_is_a_422_before_anyone_is_made(client, label):
    r = client.post("/api/join", json={"join": "JOIN", "label": label})
    assert r.status_code == 422 and "label" in r.json()["error"]
    if isinstance(label, str):  # the start page checks a link's label
        page = client.get("/join/JOIN", params={"label": label})
        assert page.status_code == 422
        assert "text/html" in page.headers["content-type"]
    assert client.store.count_participants() == 0


def test_a_display_that_hangs_on_a_design_holds_no_question_long(
    store, make_config, monkeypatch
):
    from prefbo.serve import render

    monkeypatch.setattr(render, "RENDER_SECONDS", 0.1)
    config = make_config()
    renderer = _failing_renderer(config, lambda v: False)

    def render_or_hang(values):  # hangs (for a while) above sweetness 5
        if values["sweetness"] > 5:
            time.sleep(2)
        return b"<svg/>", "image/svg+xml"

    renderer._function = render_or_hang
    app = StudyApp(store, config, renderer, "J", "R").app()
    with TestClient(app, raise_server_exceptions=False) as client:
        token = _join_code(client, "J")
        q = client.get(f"/api/p/{token}/question").json()
        for _ in range(3):
            assert all(o["sweetness"] <= 5 for o in q["options"])
            q = client.post(
                f"/api/p/{token}/answer",
                json={"question_id": q["question_id"], "choice": 0},
            ).json()
    reasons = [e.data["reason"] for e in store.events() if e.kind == "replace"]
    assert reasons and all("did not return within 0.1 s" in r for r in reasons)


def test_a_stuck_display_is_a_503_and_healthz_says_so(store, make_config, monkeypatch):
    from prefbo.serve import render

    monkeypatch.setattr(render, "RENDER_SECONDS", 0.05)
    monkeypatch.setattr(render, "MAX_STUCK", 2)
    config = make_config()
    renderer = _failing_renderer(config, lambda v: False)
    release = threading.Event()

    def never(values):  # a display that never returns (until the test ends)
        release.wait(30)
        return b"<svg/>", "image/svg+xml"

    renderer._function = never
    app = StudyApp(store, config, renderer, "J", "R").app()
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            token = _join_code(client, "J")
            r = client.get(f"/api/p/{token}/question")
            assert r.status_code == 503
            health = client.get("/healthz")
            assert health.status_code == 503
            assert health.json()["display"] == {"ok": False, "stuck": 2}
            assert client.get("/static/study.css").status_code == 200
    finally:
        release.set()


@pytest.mark.parametrize("label", ["", "   "])
def test_a_blank_label_is_refused(client, label):
    r = client.post("/api/join", json={"join": "JOIN", "label": label})
    assert r.status_code == 422 and "blank" in r.json()["error"]
