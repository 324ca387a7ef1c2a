import re

import pytest

from prefbo.serve import render
from prefbo.serve.config import StudyFileError, study_from_dict
from prefbo.serve.render import CACHE_SIZE, Renderer, RenderError, load_callable

POOL = [
    {"name": "dish", "type": "items", "ids": ["a", "b"], "features": [[0.0], [1.0]]}
]


def test_files_are_read_with_their_type(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(b"\x89PNG a")
    (tmp_path / "img" / "b.png").write_bytes(b"\x89PNG b")
    display = {"kind": "files", "folder": "img", "pattern": "{dish}.png"}
    config = study_from_dict({"space": POOL, "display": display}, root=tmp_path)
    r = Renderer(config)
    assert r.render({"dish": "b"}) == (b"\x89PNG b", "image/png")
    assert r.mime({"dish": "a"}) == "image/png"
    # a value that would leave the folder is refused
    r.config.display["pattern"] = "../{dish}.png"
    with pytest.raises(RenderError, match="outside the display folder"):
        r.render({"dish": "x"})


def test_a_callable_renders_and_is_checked(tmp_path):
    (tmp_path / "myrender.py").write_text(
        "def text(values):\n"
        "    return (f\"dish {values['dish']}\".encode(), 'text/plain')\n"
        "def wrong(values):\n"
        "    return 'not bytes'\n"
        "number = 3\n"
    )
    data = {"space": POOL, "display": {"kind": "callable", "function": "myrender:text"}}
    r = Renderer(study_from_dict(data, root=tmp_path))
    assert r.render({"dish": "a"}) == (b"dish a", "text/plain")
    assert r.mime({"dish": "b"}) == "text/plain"
    r._function = load_callable("myrender:wrong", tmp_path)
    with pytest.raises(RenderError, match=r"must return \(bytes, mime type\)"):
        r.render({"dish": "b", "other": 1})
    with pytest.raises(StudyFileError, match="is not callable"):
        load_callable("myrender:number", tmp_path)
    with pytest.raises(StudyFileError, match="cannot be loaded"):
        load_callable("myrender:missing", tmp_path)
    with pytest.raises(StudyFileError, match="cannot be loaded"):
        load_callable("no_such_module_here:f", tmp_path)


def test_the_cache_is_bounded(tmp_path):
    calls = []
    (tmp_path / "anyrender.py").write_text(
        "def f(values):\n    return b'x', 'image/png'\n"
    )
    data = {
        "space": [{"name": "x", "type": "continuous", "lower": 0.0, "upper": 1.0}],
        "display": {"kind": "callable", "function": "anyrender:f"},
    }
    r = Renderer(study_from_dict(data, root=tmp_path))
    r._function = lambda v: (calls.append(v) or b"x", "image/png")
    for i in range(CACHE_SIZE + 5):
        r.render({"x": i / 1000})
    r.render({"x": 0.0})  # pushed out: rendered again
    r.render({"x": (CACHE_SIZE + 4) / 1000})  # kept
    assert len(calls) == CACHE_SIZE + 6 and len(r._cache) == CACHE_SIZE
    with pytest.raises(RenderError, match="nothing to render"):
        r.kind = "values"
        r.render({"x": 0.9999})


def test_a_callable_is_tried_on_a_design_at_start_up(tmp_path):
    (tmp_path / "badret.py").write_text(
        "def text(values):\n    return 'not bytes'\n"
        "def boom(values):\n    raise ValueError('no')\n"
    )
    for name, message in [("text", "must return"), ("boom", "failed on")]:
        data = {
            "space": POOL,
            "display": {"kind": "callable", "function": f"badret:{name}"},
        }
        study = study_from_dict(data, root=tmp_path, name="study.toml")
        with pytest.raises(
            StudyFileError, match=f"^study.toml: display.function .*{message}"
        ):
            Renderer(study)


def _callable_study(tmp_path, module, source):
    (tmp_path / f"{module}.py").write_text(source)
    display = {"kind": "callable", "function": f"{module}:f"}
    data = {"space": POOL, "display": display}
    return study_from_dict(data, root=tmp_path, name="study.toml")


@pytest.mark.parametrize(
    "module, source, error",
    [
        (
            "render_syntax",
            "def f(values):\n    return (\n",
            "SyntaxError: '(' was never closed (render_syntax.py, line 2)",
        ),
        (
            "render_raises",
            "x = 1\ny = x / 0\n",
            "ZeroDivisionError: division by zero (render_raises.py line 2)",
        ),
        (
            "render_needs",
            "import no_such_package_here\n",
            "ModuleNotFoundError: No module named 'no_such_package_here' "
            "(render_needs.py line 1)",
        ),
        ("render_absent", None, "ModuleNotFoundError: No module named 'render_absent'"),
    ],
)
def test_a_callable_that_cannot_be_imported_is_one_line(
    tmp_path, module, source, error
):
    if source is None:
        display = {"kind": "callable", "function": f"{module}:f"}
        config = study_from_dict(
            {"space": POOL, "display": display}, root=tmp_path, name="study.toml"
        )
    else:
        config = _callable_study(tmp_path, module, source)
    with pytest.raises(StudyFileError) as caught:
        Renderer(config)
    assert str(caught.value) == (
        f"study.toml: display.function '{module}:f' cannot be loaded: {error}"
    )


def test_a_callable_that_hangs_stops_the_start_up(tmp_path, monkeypatch):
    monkeypatch.setattr(render, "SAMPLE_SECONDS", 0.2)
    config = _callable_study(
        tmp_path,
        "render_slow",
        "import time\ndef f(values):\n    time.sleep(5)\n    return b'x', 'a/b'\n",
    )
    message = (
        "study.toml: display.function 'render_slow:f' did not return within "
        "0.2 s on {'dish': "
    )
    with pytest.raises(StudyFileError, match="^" + re.escape(message)):
        Renderer(config)


def test_a_callable_that_exits_is_named(tmp_path):
    config = _callable_study(
        tmp_path, "render_exits", "import sys\ndef f(values):\n    sys.exit(4)\n"
    )
    message = "study.toml: display.function 'render_exits:f' failed on {"
    with pytest.raises(StudyFileError, match="^" + re.escape(message)) as caught:
        Renderer(config)
    assert "SystemExit(4)" in str(caught.value)


def test_a_callable_that_hangs_at_run_time_fails_that_design_once(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(render, "RENDER_SECONDS", 0.2)
    config = _callable_study(
        tmp_path,
        "render_sometimes_slow",
        "import time\ncalls = []\ndef f(values):\n"
        "    calls.append(values['dish'])\n"
        "    if values['dish'] == 'b':\n        time.sleep(3)\n"
        "    return b'x', 'a/b'\n",
    )
    r = Renderer(config)
    import render_sometimes_slow as module

    for _ in range(3):  # the first waits RENDER_SECONDS, the others not at all
        with pytest.raises(RenderError, match=r"did not return within 0\.2 s"):
            r.render({"dish": "b"})
    assert module.calls.count("b") == 1  # never called again meanwhile
    assert r.render({"dish": "a"}) == (b"x", "a/b")  # others still render


def test_a_callable_that_exits_at_run_time_is_a_render_error(tmp_path):
    config = _callable_study(
        tmp_path,
        "render_exits_later",
        "import sys\ndef f(values):\n"
        "    if values['dish'] == 'b':\n        sys.exit(3)\n"
        "    return b'x', 'a/b'\n",
    )
    r = Renderer(config)
    with pytest.raises(RenderError, match="SystemExit"):
        r.render({"dish": "b"})


def test_a_module_that_exits_at_import_is_one_line(tmp_path):
    (tmp_path / "render_exit_import.py").write_text("import sys\nsys.exit(0)\n")
    with pytest.raises(StudyFileError, match="cannot be loaded: SystemExit"):
        load_callable("render_exit_import:f", tmp_path, "study.toml")


def test_a_wrong_return_names_what_came(tmp_path):
    config = _callable_study(
        tmp_path,
        "render_wrong_pair",
        "def f(values):\n    if values['dish'] == 'b':\n"
        "        return 'not bytes', 'text/plain'\n    return b'x', 'a/b'\n",
    )
    r = Renderer(config)
    with pytest.raises(RenderError, match=r"got \(str, str\)"):
        r.render({"dish": "b"})


def test_calls_that_never_return_break_the_display_after_max_stuck(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(render, "RENDER_SECONDS", 0.05)
    monkeypatch.setattr(render, "MAX_STUCK", 3)
    (tmp_path / "render_stuck.py").write_text(
        "import threading\nrelease = threading.Event()\nhang = False\n"
        "def f(values):\n"
        "    if hang and values['dish'] != 'a':\n        release.wait(30)\n"
        "    return b'x', 'a/b'\n"
    )
    space = [
        {
            "name": "dish",
            "type": "items",
            "ids": list("abcdef"),
            "features": [[float(i)] for i in range(6)],
        }
    ]
    display = {"kind": "callable", "function": "render_stuck:f"}
    config = study_from_dict(
        {"space": space, "display": display}, root=tmp_path, name="study.toml"
    )
    r = Renderer(config)
    import render_stuck

    render_stuck.hang = True
    r._cache.clear()  # the start-up's sample design renders again
    try:
        for dish in "bcd":  # each call timed from its own start, not queued
            with pytest.raises(RenderError, match=r"within 0\.05 s"):
                r.render({"dish": dish})
        assert r.health() == {"ok": False, "stuck": 3}
        with pytest.raises(RenderError, match="stuck: 3 calls"):
            r.render({"dish": "e"})  # broken: fails at once
    finally:
        render_stuck.release.set()
    assert _wait_for(lambda: r.stuck == 0)
    assert r.health() == {"ok": True, "stuck": 0}
    assert r.render({"dish": "f"}) == (b"x", "a/b")


def _wait_for(condition, timeout=5.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.mark.parametrize(
    "raised", ["GeneratorExit()", "type('E', (BaseException,), {})()"]
)
def test_any_exception_at_import_is_one_line(tmp_path, raised):
    (tmp_path / "render_raises.py").write_text(f"raise {raised}\n")
    with pytest.raises(StudyFileError, match="cannot be loaded"):
        load_callable("render_raises:f", tmp_path, "study.toml")
