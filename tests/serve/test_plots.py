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


def test_the_minutes_plot_has_ticks_on_both_axes():
    svg = answers_over_time([0.0] + [60.0 * t for t in (1.0, 2.5, 4.0, 7.0)])
    root = ElementTree.fromstring(svg)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert {"0", "2", "4", "6"} <= set(texts)  # minutes
    assert {"0", "5"} <= set(texts) or {"0", "2", "4"} <= set(texts)  # answers


def test_a_pool_slice_names_every_item_in_full():
    labels = [f"item{i}" for i in range(40)] + ["a very long item name"]
    entry = {
        "name": "photo",
        "labels": labels,
        "mean": [float(i) for i in range(41)],
        "sd": [0.1] * 41,
        "discrete": True,
    }
    svg = utility_slice(entry)
    root = ElementTree.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text for t in root.iter(f"{ns}title")]
    assert titles == labels  # every item, whole, as its tooltip
    shown = [t.tail for t in root.iter(f"{ns}title")]  # the text after it
    assert "item39" in shown and "a very long…" in shown
    # the slanted labels fit inside the picture
    assert float(root.get("height")) >= 180 + 5.5 * 11


def test_slices_have_utility_ticks_and_end_labels_inside():
    entry = {
        "name": "n",
        "labels": [3, 5_000_000, 10_000_000],
        "mean": [0.0, 1.0, 0.5],
        "sd": [0.1, 0.2, 0.1],
    }
    root = ElementTree.fromstring(utility_slice(entry))
    ns = "{http://www.w3.org/2000/svg}"
    texts = [(t.text, t.get("text-anchor")) for t in root.iter(f"{ns}text")]
    assert ("3", "start") in texts and ("10000000", "end") in texts  # not clipped
    assert {("0", "end"), ("1", "end")} <= set(texts)  # utility ticks


def test_a_long_first_pool_label_fits_left_of_the_plot():
    entry = {
        "name": "photo",
        "labels": ["=HYPERLINK(a, b)", "b"],
        "mean": [1.0, 0.0],
        "sd": [0.1, 0.1],
        "discrete": True,
    }
    root = ElementTree.fromstring(utility_slice(entry))
    left = -float(root.get("viewBox").split()[0])
    assert left > 0 and float(root.get("width")) == 360 + round(left)
