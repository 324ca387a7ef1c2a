from xml.etree import ElementTree

from prefbo.serve.plots import answers_over_time, utility_slice


def test_answers_over_time_is_an_svg_of_the_count():
    svg = answers_over_time([100.0, 160.0, 220.0])
    root = ElementTree.fromstring(svg)
    assert root.tag.endswith("svg")
    assert "3 answers in 2.0 min" in svg
    assert answers_over_time([]) == "<p>No answers yet.</p>"


def test_a_slice_has_a_band_or_intervals():
    entry = {
        "name": "x",
        "labels": [0.0, 0.5, 1.0],
        "mean": [0.0, 1.0, 0.5],
        "sd": [0.1, 0.2, 0.1],
    }
    svg = utility_slice(entry)
    ElementTree.fromstring(svg)  # well formed
    assert "<polygon" in svg and "<polyline" in svg
    discrete = utility_slice({**entry, "labels": ["a", "b", "c"], "discrete": True})
    assert discrete.count("<circle") == 3 and "<polygon" not in discrete
    assert "&lt;x&gt;" in utility_slice({**entry, "name": "<x>"})  # escaped
