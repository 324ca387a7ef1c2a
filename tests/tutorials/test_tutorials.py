import os
import runpy
import warnings
from pathlib import Path

import pytest

TUTORIALS = sorted((Path(__file__).parents[2] / "tutorials").glob("*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs_in_smoke_mode(path, tmp_path, monkeypatch):
    monkeypatch.setenv("SMOKE_TEST", "1")
    monkeypatch.setenv("TUTORIAL_OUTPUT", str(tmp_path))
    with warnings.catch_warnings():
        # tiny smoke data make BoTorch's optimisers stop early; that is expected
        from botorch.exceptions.warnings import OptimizationWarning

        warnings.simplefilter("ignore", OptimizationWarning)
        runpy.run_path(str(path), run_name="__main__")
    assert any(tmp_path.iterdir()), "the tutorial wrote no output"
    assert os.environ["SMOKE_TEST"] == "1"
