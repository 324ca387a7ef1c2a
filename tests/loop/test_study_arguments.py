import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.loop import study_collaborative as sc
from prefbo.loop.boundary import DEFAULT_STEP, FACE_TOL
from prefbo.loop.study import PopulationStudy
from prefbo.loop.study_arguments import check_study

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
SMALL = {"num_restarts": 2, "raw_samples": 32, "maxiter": 20}


def test_the_kind_the_strategy_and_the_step_are_checked():
    assert check_study("collaborative", "eubo", DEFAULT_STEP) == DEFAULT_STEP
    assert check_study("collaborative", "ts", None) is None
    assert check_study("collaborative", "eubo", 0.2) == 0.2
    assert check_study("ep", "random", DEFAULT_STEP) == DEFAULT_STEP
    with pytest.raises(InputDataError, match="model must be one of"):
        check_study("svgp", "eubo", DEFAULT_STEP)
    with pytest.raises(InputDataError, match="strategy must be one of"):
        check_study("ep", "qnei", DEFAULT_STEP)
    with pytest.raises(UnsupportedError, match="needs model='collaborative'"):
        check_study("laplace", "ts", DEFAULT_STEP)
    with pytest.raises(InputDataError, match="boundary_step"):
        check_study("collaborative", "eubo", 0.9)
    # a step of half the range would put every candidate at the centre
    with pytest.raises(InputDataError, match="boundary_step"):
        check_study("collaborative", "eubo", 0.5)
    assert check_study("collaborative", "eubo", 0.49) == 0.49
    with pytest.raises(InputTypeError, match="boundary_step"):
        check_study("collaborative", "eubo", "0.1")
    # the exact kinds search the whole box without virtual comparisons
    with pytest.raises(UnsupportedError, match="boundary_step applies to"):
        check_study("ep", "eubo", None)


def _face(X):
    return bool(((X <= FACE_TOL) | (X >= 1 - FACE_TOL)).any())


def test_a_study_without_a_step_asks_on_the_faces_and_keeps_the_setting(
    tmp_path, monkeypatch
):
    # a person whose utility rises to the face x = 1: with a step, their
    # questions keep off the faces (virtual comparisons when alone, inset
    # candidates with others); without, they reach it, and carry nothing
    monkeypatch.setattr(sc, "FIT_STEPS", 30)
    monkeypatch.setattr(sc, "REFIT_STEPS", 10)
    study = PopulationStudy(
        BOUNDS,
        log_dir=tmp_path,
        seed=1,
        initial_random=3,
        acqf_options=SMALL,
        boundary_step=None,
    )
    assert study.config["boundary_step"] is None
    asked = []
    for name in ("ann", "ann", "ann", "ann", "ann", "bob", "ann", "bob"):
        X = study.ask(name)
        asked.append(X)
        study.tell(name, int(X[:, 0].argmax()))
    assert all(t.virtual is None for t in study.history("ann"))
    assert any(_face(X) for X in asked[3:])
    study.close()
    again = PopulationStudy.resume(tmp_path)
    assert again.config["boundary_step"] is None
    assert again.question_maker.inset is None
    again.close()
