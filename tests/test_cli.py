import io
import json
import re

import pytest

from prefbo import cli
from prefbo.exceptions import SessionLogLockedError
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.session import read_session_log
from prefbo.space import KINDS


@pytest.fixture
def space(tmp_path):
    path = tmp_path / "space.json"
    variables = [
        {"name": "sugar", "lower": 0, "upper": 10},
        {"name": "salt", "lower": -1, "upper": 1},
    ]
    path.write_text(json.dumps({"variables": variables}))
    return path


def _session(argv, text):
    out = io.StringIO()
    rc = cli.main(argv, stdin=io.StringIO(text), stdout=out)
    return rc, out.getvalue()


def test_interactive_session_new_undo_quit_and_resume(tmp_path, space):
    log = tmp_path / "s.jsonl"
    argv = ["session", "new", str(log), "--space", str(space), "--strategy", "random"]
    rc, out = _session(argv, "1\n2\nx\nu\n2\nq\n")
    assert rc == 0
    assert "[1] sugar=" in out and "salt=" in out
    assert "unrecognised answer 'x'" in out and "last answer withdrawn." in out
    assert out.count("current best: sugar=") == 4  # after 1, 2, u, 2
    assert "ordered only through the kernel" in out  # disjoint pairs
    assert out.rstrip().endswith("session saved.")
    _, records = read_session_log(log)
    assert [(r["type"], r.get("answer")) for r in records] == [
        ("tell", 0),
        ("tell", 1),
        ("undo", None),
        ("tell", 1),
    ]
    expected = PreferentialOptimizer.resume(log).ask()
    rc, out = _session(["session", "resume", str(log)], "1\n")
    assert rc == 0 and "2 answer(s) so far" in out
    shown = out.split("question 3")[1].split("\n")[1]
    assert f"sugar={expected[0, 0].item():.4g}" in shown
    assert "end of input; session saved." in out
    assert len(PreferentialOptimizer.resume(log).history) == 3


def test_keep_winner_session_is_connected(tmp_path, space):
    log = tmp_path / "s.jsonl"
    argv = ["session", "new", str(log), "--space", str(space), "--strategy", "random"]
    rc, out = _session([*argv, "--keep-winner"], "2\n1\n1\nq\n")
    assert rc == 0
    graph = [line for line in out.splitlines() if line.startswith("comparison graph")]
    # one edge (λ2 = 2), a 3-path (0, 1, 3), a 3-leaf star (0, 1, 1, 4)
    assert graph == [
        f"comparison graph: 1 component(s), algebraic connectivity {lam}"
        for lam in ("2", "1", "1")
    ]
    assert "star-shaped group(s) around design(s) [1]" in out  # 1 won thrice


def test_bad_space_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "space.json"
    bad.write_text('{"variables": [{"name": "x", "lower": 1, "upper": 0}]}')
    rc = cli.main(["session", "new", str(tmp_path / "s.jsonl"), "--space", str(bad)])
    assert rc == 2
    assert "needs at least one variable and lower < upper" in capsys.readouterr().err


def test_benchmarks_are_not_a_subcommand(capsys):
    # benchmarks/ is not in the installed package: run the scripts directly
    with pytest.raises(SystemExit):
        cli.main(["benchmark", "laplace_vs_botorch"])
    assert "invalid choice: 'benchmark'" in capsys.readouterr().err


def test_session_choices_are_the_registered_kinds_and_strategies(capsys):
    with pytest.raises(SystemExit):
        cli.main(["session", "new", "s.jsonl", "--space", "x", "--strategy", "kg"])
    err = capsys.readouterr().err
    assert "'eubo', 'qeubo', 'bald', 'mes', 'ts', 'random'" in err


def test_demo_forwards_its_arguments(monkeypatch):
    seen = {}
    from prefbo.loop import demo

    monkeypatch.setattr(demo, "main", lambda argv: seen.setdefault("argv", argv))
    assert cli.main(["demo", "--smoke", "--seed", "3"]) == 0
    assert seen["argv"] == ["--smoke", "--seed", "3"]


def test_resuming_a_missing_log_is_a_clear_error(tmp_path, capsys):
    rc = cli.main(["session", "resume", str(tmp_path / "missing.jsonl")])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("prefbo: error: ") and "missing.jsonl" in err
    assert "Traceback" not in err


def test_a_new_session_on_a_directory_is_a_clear_error(tmp_path, space, capsys):
    rc = cli.main(["session", "new", str(tmp_path), "--space", str(space)])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("prefbo: error: ") and "is a directory" in err


def test_a_session_the_cli_holds_is_refused_and_released_after(tmp_path, space):
    log = tmp_path / "s.jsonl"
    argv = ["session", "new", str(log), "--space", str(space), "--strategy", "random"]
    seen = {}

    class Input(io.StringIO):
        def readline(self):  # while the session runs, a second opener is refused
            try:
                PreferentialOptimizer.resume(log)
            except SessionLogLockedError as e:
                seen["error"] = str(e)
            return super().readline()

    rc = cli.main(argv, stdin=Input("1\nq\n"), stdout=io.StringIO())
    assert rc == 0 and "is open in another optimiser" in seen["error"]
    PreferentialOptimizer.resume(log).close()  # released when the CLI returns


def test_the_documented_space_types_are_the_ones_read():
    # every "type" the module docstring names is a kind of prefbo.space
    named = set(re.findall(r'``"(\w+)"``', cli.__doc__.split("space.json")[1]))
    assert named - {"type", "name", "font", "serif", "sans", "log", "choices"} <= set(
        KINDS
    ), named
