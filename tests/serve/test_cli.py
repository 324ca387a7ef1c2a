import io
import json

import pytest

from prefbo.cli import main as prefbo_main
from prefbo.serve import flow
from prefbo.serve.cli import main, open_study, replay
from prefbo.serve.config import StudyFileError, study_from_dict


def _study_db(tmp_path, make_config, answers=3):
    config = make_config()
    url = f"sqlite:///{tmp_path / 'study.db'}"
    store = open_study(config, url)
    for name in ("a", "b"):
        pid = store.add_participant(f"t{name}", name)
        q = flow.current(store, config, pid)
        for _ in range(answers):
            q = flow.answer(store, config, pid, q["question_id"], 0)
    return config, store


def test_a_database_serves_one_study(tmp_path, make_config):
    config, store = _study_db(tmp_path, make_config, answers=0)
    assert open_study(config, store.url).study_source() == config.source
    with pytest.raises(StudyFileError, match="holds another study"):
        open_study(make_config(seed=9), store.url)


def test_replay_and_export_need_only_the_database(tmp_path, make_config):
    _study_db(tmp_path, make_config)
    out = replay(str(tmp_path / "study.db"))
    assert out["answers"] == 6 and out["population"]["sd"] >= 0
    assert set(out["participants"]) == {"1", "2"}
    text = io.StringIO()
    assert main(["replay", str(tmp_path / "study.db")], out=text) == 0
    assert json.loads(text.getvalue())["answers"] == 6
    text = io.StringIO()
    assert main(["export", str(tmp_path / "study.db")], out=text) == 0
    assert len(text.getvalue().strip().splitlines()) == 7  # header + 6 answers
    text = io.StringIO()
    main(["export", str(tmp_path / "study.db"), "--format", "json"], out=text)
    assert len(json.loads(text.getvalue())["questions"]) == 8  # 6 + 2 current


def test_start_up_errors_name_the_field(tmp_path, capsys):
    bad = tmp_path / "study.toml"
    bad.write_text('q = 7\n[[space]]\nname = "x"\nlower = 0\nupper = 1\n')
    assert main([str(bad)]) == 2
    assert "q must be in [2, 4]; got 7" in capsys.readouterr().err
    assert prefbo_main(["serve", str(bad)]) == 2  # through the prefbo command
    assert "q must be in [2, 4]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["replay"])
    with pytest.raises(SystemExit):
        main([])


def test_export_and_replay_need_no_display_files(tmp_path):
    (tmp_path / "img").mkdir()
    for name in "ab":
        (tmp_path / "img" / f"{name}.png").write_bytes(b"x")
    pool = [
        {"name": "dish", "type": "items", "ids": ["a", "b"], "features": [[0.0], [1.0]]}
    ]
    display = {"kind": "files", "folder": "img", "pattern": "{dish}.png"}
    config = study_from_dict({"space": pool, "display": display}, root=tmp_path)
    store = open_study(config, f"sqlite:///{tmp_path / 'pool.db'}")
    pid = store.add_participant("t", "p")
    q = flow.current(store, config, pid)
    flow.answer(store, config, pid, q["question_id"], 0)
    for f in (tmp_path / "img").iterdir():
        f.unlink()
    (tmp_path / "img").rmdir()  # elsewhere, or the media gone
    text = io.StringIO()
    assert main(["export", str(tmp_path / "pool.db")], out=text) == 0
    assert "option0.dish" in text.getvalue()
    assert replay(str(tmp_path / "pool.db"))["answers"] == 1
