import asyncio
import logging

import pytest
from starlette.testclient import TestClient

from prefbo.serve import flow
from prefbo.serve.app import StudyApp
from prefbo.serve.render import Renderer
from prefbo.serve.security import (
    HEADERS,
    MAX_BODY,
    RedactTokens,
    redact,
)


@pytest.fixture
def client(store, make_config):
    config = make_config(max_participants=3)
    store.set_study_source(config.source)
    app = StudyApp(store, config, Renderer(config), "JOINCODE", "RESEARCHER").app()
    with TestClient(app, raise_server_exceptions=False) as c:
        c.store = store
        yield c


def test_a_body_over_the_limit_is_refused_while_it_is_read(store, make_config):
    config = make_config()
    store.set_study_source(config.source)
    app = StudyApp(store, config, Renderer(config), "JOINCODE", "R").app()
    received, sent = [], []

    async def receive():  # 300 MB in 64 kB chunks, if read to the end
        received.append(1)
        more = len(received) < 300 * 16
        return {"type": "http.request", "body": b"x" * 65_536, "more_body": more}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/join",
        "raw_path": b"/api/join",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"transfer-encoding", b"chunked")],
        "client": ("127.0.0.1", 5),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 413
    assert b"64 kB" in sent[1]["body"]
    assert len(received) <= 2  # stopped after the limit, not after 300 MB
    assert store.count_participants() == 0


def test_a_declared_length_over_the_limit_is_refused_unread(client):
    r = client.post(
        "/api/join",
        content=b"{}",
        headers={"Content-Length": str(MAX_BODY + 1)},
    )
    assert r.status_code == 413


@pytest.mark.parametrize("depth", [1_000, 5_000, 20_000])
def test_deeply_nested_json_is_a_400(client, depth):
    body = b'{"join": ' + b"[" * depth + b"]" * depth + b"}"
    assert len(body) < MAX_BODY
    r = client.post("/api/join", content=body)
    assert r.status_code == 400 and "nested" in r.json()["error"]


def test_every_response_carries_the_security_headers(client):
    token = client.post("/api/join", json={"join": "JOINCODE"}).json()["token"]
    for path in ("/healthz", "/join/JOINCODE", f"/p/{token}", "/p/nope", "/r/R"):
        r = client.get(path)
        for name, value in HEADERS.items():
            assert r.headers[name] == value, (path, name)
    csp = HEADERS["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert HEADERS["Referrer-Policy"] == "no-referrer"
    assert HEADERS["X-Frame-Options"] == "DENY"
    assert HEADERS["X-Content-Type-Options"] == "nosniff"


def test_redact_hides_every_secret_in_a_path():
    assert redact("GET /api/p/abcDEF_-123/question") == "GET /api/p/…/question"
    assert redact("/p/tok/option/q1/0 /r/sec/export.csv") == (
        "/p/…/option/q1/0 /r/…/export.csv"
    )
    assert redact("/join/CODE?label=x and /api/r/sec/status") == (
        "/join/…?label=x and /api/r/…/status"
    )
    assert redact("/static/study.css") == "/static/study.css"


def test_a_500_logs_no_token(client, caplog, monkeypatch):
    token = client.post("/api/join", json={"join": "JOINCODE"}).json()["token"]

    def boom(*args):
        raise RuntimeError(f"failed for /api/p/{token}/question")

    monkeypatch.setattr(flow, "current", boom)
    with caplog.at_level(logging.INFO):
        r = client.get(f"/api/p/{token}/question")
    assert r.status_code == 500 and token not in r.text
    server = "\n".join(  # the server's records (not the test client's)
        caplog.handler.format(record)
        for record in caplog.records
        if record.name.startswith(("prefbo", "uvicorn"))
    )
    assert "GET /api/p/…/question" in server and "RuntimeError" in server
    assert token not in server


def test_the_filter_redacts_uvicorn_style_records():
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/api/p/SECRET/question", "1.1", 500),
        None,
    )
    assert RedactTokens().filter(record)
    assert record.args[2] == "/api/p/…/question" and record.args[4] == 500
    assert "SECRET" not in record.getMessage()
    try:
        raise ValueError("/r/SECRET/status")
    except ValueError:
        import sys

        exc = logging.LogRecord("x", 40, __file__, 1, "m", None, sys.exc_info())
    RedactTokens().filter(exc)
    assert "SECRET" not in logging.Formatter().format(exc)


def test_a_500_carries_the_security_headers(client, monkeypatch):
    def boom(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(flow, "current", boom)
    token = client.post("/api/join", json={"join": "JOINCODE"}).json()["token"]
    for path in (f"/api/p/{token}/question",):
        r = client.get(path)
        assert r.status_code == 500
        for name, value in HEADERS.items():
            assert r.headers.get(name) == value, (path, name)
