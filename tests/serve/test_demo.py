import colorsys
import re

from prefbo.serve.config import study_from_dict
from prefbo.serve.demo import DEMO_STUDY, swatch
from prefbo.space import Circular


def test_the_demo_study_is_valid_and_renders_its_colour(tmp_path):
    config = study_from_dict(DEMO_STUDY, root=tmp_path)
    assert config.q == 2 and config.display["kind"] == "callable"
    svg, mime = swatch({"hue": 120.0, "saturation": 1.0, "lightness": 0.25})
    assert mime == "image/svg+xml"
    colour = re.search(rb'fill="#([0-9a-f]{6})"', svg).group(1).decode()
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (0, 2, 4))
    h, light, s = colorsys.rgb_to_hls(r, g, b)
    assert round(h * 360) == 120 and abs(light - 0.25) < 0.01 and abs(s - 1.0) < 0.01


def test_the_demos_hue_is_circular(tmp_path):
    config = study_from_dict(DEMO_STUDY, root=tmp_path)
    assert config.space.variables[0] == Circular("hue", 0.0, 360.0)
    # red at either end of the hue is one colour, one design
    X = config.space.encode(
        [
            {"hue": 0.0, "saturation": 0.5, "lightness": 0.5},
            {"hue": 360.0, "saturation": 0.5, "lightness": 0.5},
        ]
    )
    assert bool((X[0] == X[1]).all())
    assert swatch(config.space.decode(X)[1]) == swatch(config.space.decode(X)[0])


def test_the_demo_asks_a_lone_participant_and_a_newcomer_from_its_model(tmp_path):
    import torch

    from prefbo.serve.collaborative import CollaborativeEngine
    from prefbo.serve.rows import QuestionRow

    config = study_from_dict(DEMO_STUDY, root=tmp_path)
    assert config.model_kind == "collaborative"
    space = config.space
    engine = CollaborativeEngine(config, background=False)
    rows = []
    for seq, seed in enumerate((1, 2, 3)):
        X = space.sample(2, seed=seed).double()
        choice = int(X[:, -1].argmax())  # the lighter colour
        rows.append(
            QuestionRow(
                id=f"q{seq}",
                participant_id=0,
                seq=seq,
                options=X.tolist(),
                origin="random",
                based_on=seq,
                created_at=float(seq),
                answered_at=float(seq),
                choice=choice,
            )
        )
    engine.update(0, rows)
    engine.maintain()
    asked = engine.propose({0: space.sample(2, seed=4).double().tolist(), 1: None})
    for pid in (0, 1):
        values = space.decode(asked[pid])
        assert len(values) == 2 and values[0] != values[1]
        for v in values:
            assert 0.0 <= v["hue"] < 360.0 and 0.2 <= v["saturation"] <= 1.0
    # the lone participant's question carries comparisons on the two
    # continuous variables' faces only, never the circular hue's
    virtual = engine.carried.get(0)
    if virtual is not None:
        hue = space.slices[0]
        assert torch.equal(virtual[:, 0, hue], virtual[:, 1, hue])
