"""``prefbo.loop.replay``: a resumed log's records are checked, not trusted."""

import re

import pytest

from prefbo.exceptions import SessionLogError, SessionLogWarning
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.session import encode_record, read_session_log

BOUNDS = [[0.0, 0.0], [1.0, 1.0]]


def _random_session(path, n):
    with PreferentialOptimizer(BOUNDS, strategy="random", log_path=path) as opt:
        for k in range(n):
            opt.ask()
            opt.tell(k % 2)


def _write_records(path, records):
    path.write_text("".join(encode_record(r) for r in records))


def _edited_log(tmp_path, edit):
    path = tmp_path / "s.jsonl"
    _random_session(path, 2)
    header, records = read_session_log(path)
    records = [header, *records]
    edit(records)
    _write_records(path, records)
    return path


def _set(i, key, value):
    def edit(records):
        if value is KeyError:
            del records[i][key]
        else:
            records[i][key] = value

    return edit


@pytest.mark.parametrize(
    "edit, match",
    [
        (_set(1, "options", [[0.5], [0.25]]), r"line 2 .*d=2; got shape \(2, 1\)"),
        (_set(2, "options", [[0.5, 2.0], [0.2, 0.3]]), r"line 3 .*outside \[0\.0, 1"),
        (_set(1, "options", [[0.5, 0.5], [0.5, 0.5]]), r"line 2 .*the same point"),
        (_set(1, "options", KeyError), r"line 2 .*no 'options'"),
        (_set(1, "options", "x"), r"line 2 .*options must be"),
        (_set(1, "answer", 5), r"line 2 .*\(0\.\.1\); got answer=5"),
        (_set(1, "answer", "x"), r"line 2 .*an int index of the options; got str"),
        (_set(1, "answer", 1.0), r"line 2 .*answer must be an int"),
        (_set(1, "answer", True), r"line 2 .*answer must be an int"),
        (_set(1, "answer", KeyError), r"line 2 .*no 'answer'"),
        (_set(0, "config", KeyError), r"line 1 .*no 'config'"),
        (_set(0, "config", [1, 2]), r"line 1 .*config must be a dict"),
        (
            lambda r: r[0]["config"].update(colour="red"),
            r"line 1 .*unknown key\(s\) \['colour'\]",
        ),
        (
            lambda r: r[0]["config"].pop("bounds"),
            r"line 1 .*config has no setting 'bounds'",
        ),
        (
            lambda r: r[0]["config"].update(strategy="kg"),
            r"line 1 .*strategy must be one of",
        ),
        (
            lambda r: r[0]["config"].update(bounds=[[1.0], [0.0]]),
            r"line 1 .*bounds must have lower < upper",
        ),
        # keys a record of its type never has (prefbo writes none of them)
        (_set(1, "foo", 1), r"line 2 \(tell\) has unknown key\(s\) \['foo'\]"),
        (_set(0, "note", "x"), r"line 1 \(header\) has unknown key\(s\) \['note'\]"),
        (
            lambda r: r.append({"type": "undo", "seq": 3, "answer": 3}),
            r"line 4 \(undo\) has unknown key\(s\) \['answer'\]",
        ),
    ],
)
def test_resume_checks_what_each_record_holds(tmp_path, edit, match):
    path = _edited_log(tmp_path, edit)
    text = path.read_text()
    with pytest.raises(SessionLogError, match=match):
        PreferentialOptimizer.resume(path)
    assert path.read_text() == text
    line = int(re.search(r"line (\d+)", match).group(1))
    if line == 1:  # a header the optimiser refuses: no view either
        with pytest.raises(SessionLogError, match=match):
            PreferentialOptimizer.resume(path, read_only=True)
    else:  # a view shows the answers before the refused record
        with pytest.warns(SessionLogWarning, match=match):
            view = PreferentialOptimizer.resume(path, read_only=True)
        assert len(view.history) <= line - 2
    assert path.read_text() == text


def test_a_header_naming_an_unregistered_strategy_is_not_to_be_cut(tmp_path):
    # the header holds the settings: the remedy is to register what it
    # names, never to cut the log before its first line
    path = tmp_path / "s.jsonl"
    _random_session(path, 2)
    header, records = read_session_log(path)
    header["config"]["strategy"] = "mine"
    _write_records(path, [header, *records])
    with pytest.raises(SessionLogError) as info:
        PreferentialOptimizer.resume(path)
    message = str(info.value)
    assert "register" in message and "cut it" not in message
    assert ".;" not in message
