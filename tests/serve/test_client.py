import socket
import threading
import time

import pytest
import uvicorn

from prefbo.serve.app import StudyApp
from prefbo.serve.client import StudyClient, StudyServerError
from prefbo.serve.render import Renderer


@pytest.fixture
def server(store, make_config):
    config = make_config(no_preference=True)
    store.set_study_source(config.source)
    app = StudyApp(store, config, Renderer(config), "JOIN", "R").app()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


def test_a_script_takes_the_study_through_the_client(server):
    client = StudyClient.join(server, "JOIN", label="robot")
    q = client.ask()
    assert len(q["options"]) == 2 and set(q["options"][0]) == {"sweetness", "size"}
    q = client.tell(0)
    assert q["answered"] == 1
    assert client.undo()["answered"] == 0
    while not q["done"]:
        q = client.tell(1 if q["options"][1]["sweetness"] > 5 else None)
    assert {k: q[k] for k in ("done", "answered", "total")} == {
        "done": True,
        "answered": 4,
        "total": 4,
    }
    assert client.undo()["answered"] == 3  # undo after the last answer
    assert set(client.best()) == {"favourite", "as_of_answers"}


def test_refusals_are_typed_errors(server):
    with pytest.raises(StudyServerError, match="unknown join code") as e:
        StudyClient.join(server, "WRONG")
    assert e.value.status == 404
    client = StudyClient.join(server, "JOIN")
    q = client.ask()
    with pytest.raises(StudyServerError, match=r"in \[0, 2\)") as e:
        client.tell(5)
    assert e.value.status == 422
    client.tell(0, q["question_id"])
    with pytest.raises(StudyServerError, match="answered already"):
        client.tell(0, q["question_id"])
    with pytest.raises(StudyServerError) as e:
        StudyClient(server, "not-a-token").ask()
    assert e.value.status == 404
