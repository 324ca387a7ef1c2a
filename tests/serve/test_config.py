import json
import re

import pytest

from prefbo.serve.config import StudyFileError, load_study, study_from_dict
from prefbo.space import Continuous, Integer

SPACE = [{"name": "x", "type": "continuous", "lower": 0.0, "upper": 1.0}]


def test_a_toml_study_reads_every_field(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(
        """
title = "Pick one"
q = 2
answers_per_participant = 7
max_participants = 3
no_preference = true
seed = 5

[model]
kind = "population"
inference = "laplace"
strategy = "random"
initial_random = 3

[[space]]
name = "sweetness"
type = "continuous"
lower = 0
upper = 10

[[space]]
name = "size"
type = "integer"
lower = 1
upper = 5
"""
    )
    c = load_study(path)
    assert (c.title, c.q, c.answers_per_participant, c.max_participants) == (
        "Pick one",
        2,
        7,
        3,
    )
    assert c.no_preference and c.seed == 5 and c.initial_random == 3
    assert (c.model_kind, c.inference, c.strategy) == (
        "population",
        "laplace",
        "random",
    )
    assert [type(v) for v in c.space.variables] == [Continuous, Integer]
    assert c.display == {"kind": "values"} and c.root == tmp_path
    # what the database stores: the file as read, plain JSON
    assert json.loads(json.dumps(c.source)) == c.source


def test_a_collaborative_study(tmp_path):
    (tmp_path / "study.json").write_text(
        json.dumps({"space": SPACE, "model": {"kind": "collaborative"}})
    )
    c = load_study(tmp_path / "study.json")
    assert (c.model_kind, c.strategy, c.q) == ("collaborative", "eubo", 2)


def test_the_default_kind_is_collaborative_at_q_2_and_individual_above(tmp_path):
    two = study_from_dict({"space": SPACE}, root=tmp_path, name="study.toml")
    assert (two.model_kind, two.strategy) == ("collaborative", "eubo")
    three = study_from_dict({"space": SPACE, "q": 3}, root=tmp_path, name="study.toml")
    assert (three.model_kind, three.strategy) == ("individual", "qeubo")
    assert three.boundary_step == 0.1


def test_a_json_study_and_a_space_file(tmp_path):
    (tmp_path / "space.json").write_text(json.dumps({"variables": SPACE}))
    (tmp_path / "study.json").write_text(
        json.dumps({"space": "space.json", "q": 3, "model": {"kind": "individual"}})
    )
    c = load_study(tmp_path / "study.json")
    assert c.space.names == ["x"] and c.q == 3 and c.strategy == "qeubo"


@pytest.mark.parametrize(
    "fields, where",
    [
        ({"q": 5}, "q must be in [2, 4]; got 5"),
        ({"q": "2"}, "q must be an integer"),
        (
            {"q": 3, "model": {"kind": "population"}},
            "q must be 2 with model.kind = 'population'",
        ),
        (
            {"q": 3, "model": {"kind": "collaborative"}},
            "q must be 2 with model.kind = 'collaborative'",
        ),
        (
            {"model": {"kind": "collaborative", "strategy": "qnei"}},
            "model.strategy must be one of ['eubo', 'thompson', 'random']",
        ),
        (
            {"model": {"kind": "collaborative", "inference": "ep"}},
            "model.inference applies to model.kind = 'population' or 'individual' only",
        ),
        ({"answers_per_participant": 0}, "answers_per_participant must be in"),
        ({"no_preference": "yes"}, "no_preference must be true or false"),
        ({"colour": 1}, "colour is not a study field"),
        ({"model": {"kind": "everyone"}}, "model.kind must be one of"),
        (
            {"model": {"kind": "population", "inference": "mcmc"}},
            "model.inference must be one of",
        ),
        (
            {"model": {"inference": "laplace"}},
            "model.inference applies to model.kind = 'population' or "
            "'individual' only; the collaborative model (the default kind at "
            "q = 2) has its own",
        ),
        ({"model": {"strategy": "ts"}}, "model.strategy must be one of"),
        ({"model": {"knd": "population"}}, "model.knd is not a model field"),
        (
            {"model": {"kind": "population", "boundary_step": 0.1}},
            "model.boundary_step applies to model.kind = 'individual' or "
            "'collaborative' only",
        ),
        (
            {"model": {"kind": "individual", "boundary_step": 2.0}},
            "model.boundary_step must be a number in [0.001, 0.5] or false; got 2.0",
        ),
        (
            {"model": {"kind": "individual", "boundary_step": "off"}},
            "model.boundary_step must be a number in [0.001, 0.5] or false",
        ),
        (
            {"model": {"kind": "individual", "boundary_step": True}},
            "model.boundary_step must be a number in [0.001, 0.5] or false",
        ),
        ({"space": []}, "space must be a non-empty list"),
        ({"space": [{"name": "x", "type": "spline"}]}, "space[0] is not a variable"),
        ({"space": "missing.json"}, "space = 'missing.json': cannot read"),
        ({"display": {"kind": "smell"}}, "display.kind must be one of"),
        ({"display": {"kind": "files", "folder": "nope"}}, "display.folder must"),
        ({"display": {"kind": "callable", "function": "f"}}, "display.function must"),
        (
            {"display": {"kind": "values", "colour": "red"}},
            "display.colour is not a field of display.kind = 'values' "
            "(known: ['kind']); got 'red'.",
        ),
        (
            {"display": {"kind": "callable", "function": "m:f", "folder": "img"}},
            "display.folder is not a field of display.kind = 'callable' "
            "(known: ['function', 'kind']); got 'img'.",
        ),
        (
            {"display": {"kind": "files", "folder": "img", "patern": "{x}.png"}},
            "display.patern is not a field of display.kind = 'files' "
            "(known: ['folder', 'kind', 'pattern']); got '{x}.png'.",
        ),
        (
            {"display": {"colour": "red"}},  # kind "values" by default
            "display.colour is not a field of display.kind = 'values'",
        ),
    ],
)
def test_errors_name_the_field(tmp_path, fields, where):
    data = {"space": SPACE, **fields}
    with pytest.raises(StudyFileError, match=r"^study.toml: " + re.escape(where)):
        study_from_dict(data, root=tmp_path, name="study.toml")


def test_files_display_checks_every_item_has_its_file(tmp_path):
    (tmp_path / "img").mkdir()
    pool = [
        {
            "name": "dish",
            "type": "items",
            "ids": ["a", "b", "c"],
            "features": [[0.0], [0.5], [1.0]],
        }
    ]
    display = {"kind": "files", "folder": "img", "pattern": "{dish}.png"}
    for name in "ab":
        (tmp_path / "img" / f"{name}.png").write_bytes(b"x")
    with pytest.raises(StudyFileError, match=r"display.pattern names .*c.png"):
        study_from_dict({"space": pool, "display": display}, root=tmp_path)
    (tmp_path / "img" / "c.png").write_bytes(b"x")
    c = study_from_dict({"space": pool, "display": display}, root=tmp_path)
    assert c.display["pattern"] == "{dish}.png"
    bad = {**display, "pattern": "{flavour}.png"}
    with pytest.raises(StudyFileError, match="does not fit the space"):
        study_from_dict({"space": pool, "display": bad}, root=tmp_path)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(StudyFileError, match="cannot read the study file"):
        load_study(tmp_path / "none.toml")
    (tmp_path / "bad.toml").write_text("q = = 2")
    with pytest.raises(StudyFileError, match="not valid TOML"):
        load_study(tmp_path / "bad.toml")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(StudyFileError, match="must be a table"):
        load_study(tmp_path / "list.json")


def test_an_individual_strategy_must_fit_q(tmp_path):
    individual = {"kind": "individual", "strategy": "eubo"}
    with pytest.raises(StudyFileError, match=r"model.strategy = 'eubo' does not fit"):
        study_from_dict({"space": SPACE, "q": 3, "model": individual}, root=tmp_path)
    c = study_from_dict(
        {"space": SPACE, "q": 3, "model": {"kind": "individual"}}, root=tmp_path
    )
    assert c.strategy == "qeubo"  # the default for q > 2
    c = study_from_dict({"space": SPACE, "model": {"kind": "individual"}})
    assert c.strategy == "eubo"


def test_a_replay_needs_no_display_files(tmp_path):
    pool = [
        {"name": "dish", "type": "items", "ids": ["a", "b"], "features": [[0.0], [1.0]]}
    ]
    display = {"kind": "files", "folder": "gone", "pattern": "{dish}.png"}
    with pytest.raises(StudyFileError, match="display.folder"):
        study_from_dict({"space": pool, "display": display}, root=tmp_path)
    c = study_from_dict(
        {"space": pool, "display": display}, root=tmp_path, check_files=False
    )
    assert c.display["folder"] == "gone"


def test_individual_models_keep_off_the_faces_unless_told_not_to(tmp_path):
    # the library loop's default (virtual comparisons a tenth of the range
    # inside each face); false where a participant's best may lie on a face
    individual = {"space": SPACE, "model": {"kind": "individual"}}
    assert study_from_dict(individual, root=tmp_path).boundary_step == 0.1
    individual["model"]["boundary_step"] = 0.05
    assert study_from_dict(individual, root=tmp_path).boundary_step == 0.05
    individual["model"]["boundary_step"] = False
    assert study_from_dict(individual, root=tmp_path).boundary_step is None
    exact = {"space": SPACE, "model": {"kind": "population"}}
    population = study_from_dict(exact, root=tmp_path)
    assert population.boundary_step is None  # a population study makes none


def test_a_study_knows_its_file_name(tmp_path):
    (tmp_path / "study.toml").write_text(
        '[[space]]\nname = "x"\nlower = 0\nupper = 1\n'
    )
    assert load_study(tmp_path / "study.toml").name == str(tmp_path / "study.toml")
    assert study_from_dict({"space": SPACE}, name="demo study").name == "demo study"


def test_the_collaborative_kind_takes_a_boundary_step(tmp_path):
    from prefbo.serve.collaborative import CollaborativeEngine

    default = study_from_dict({"space": SPACE}, root=tmp_path, name="study.toml")
    assert default.boundary_step == 0.1
    assert CollaborativeEngine(default, background=False).questions.inset == 0.1
    data = {"space": SPACE, "model": {"boundary_step": False}}
    off = study_from_dict(data, root=tmp_path, name="study.toml")
    assert (off.model_kind, off.boundary_step) == ("collaborative", None)
    assert CollaborativeEngine(off, background=False).questions.inset is None
    centre = {"space": SPACE, "model": {"boundary_step": 0.5}}
    with pytest.raises(StudyFileError, match=r"boundary_step must be .* below 0.5"):
        study_from_dict(centre, root=tmp_path, name="study.toml")
    exact = {"space": SPACE, "model": {"kind": "population", "boundary_step": 0.2}}
    with pytest.raises(StudyFileError, match="model.boundary_step applies to"):
        study_from_dict(exact, root=tmp_path, name="study.toml")
