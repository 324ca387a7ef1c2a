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
