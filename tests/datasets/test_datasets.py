import csv

import pytest

from prefbo.datasets import NAMES, open_dataset, read_csv
from prefbo.exceptions import InputDataError


def test_shipped_files_have_their_documented_sizes():
    sizes = {name: len(read_csv(name)) for name in NAMES}
    assert sizes == {
        "ModeCanada.csv": 15520,
        "Game.csv": 91,
        "ellipse/data.csv": 50,
        "ellipse/choices.csv": 160,
    }
    cases = {row["case"] for row in read_csv("ModeCanada.csv")}
    assert len(cases) == 4324


def test_prefbo_data_folder_overrides_the_shipped_copy(tmp_path, monkeypatch):
    with (tmp_path / "Game.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["", "age"], ["1", "33"]])
    monkeypatch.setenv("PREFBO_DATA", str(tmp_path))
    assert read_csv("Game.csv") == [{"": "1", "age": "33"}]
    # files the folder lacks still come from the shipped copy
    assert len(read_csv("ellipse/choices.csv")) == 160


def test_unknown_names_are_refused():
    with pytest.raises(InputDataError, match="name must be one of"):
        open_dataset("Iris.csv")


def test_repeated_header_names_keep_every_column():
    # ellipse/data.csv names its 625 pixel columns "pix_": a dict reader kept
    # only the last of them
    with open_dataset("ellipse/data.csv") as f:
        raw = list(csv.reader(f))
    header, first = raw[0], raw[1]
    rows = read_csv("ellipse/data.csv")
    assert len(rows[0]) == len(header) == len(first)
    pixels = [first[i] for i, name in enumerate(header) if name == "pix_"]
    assert len(pixels) == 625
    assert [rows[0]["pix_"]] + [rows[0][f"pix_.{k}"] for k in range(1, 625)] == pixels


def test_a_ragged_row_is_an_error(tmp_path, monkeypatch):
    with (tmp_path / "Game.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["", "age"], ["1", "33"], ["2"]])
    monkeypatch.setenv("PREFBO_DATA", str(tmp_path))
    with pytest.raises(InputDataError, match=r"line 3 has 1 fields where the header"):
        read_csv("Game.csv")
