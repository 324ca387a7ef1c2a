"""The loop's models: the unit cube of the box, predictions, the recommendation."""

import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.test_functions import Branin

SMALL = {"num_restarts": 2, "raw_samples": 32, "maxiter": 20, "mc_samples": 32}
BOUNDS = Branin().bounds


@pytest.mark.parametrize("model, strategy", [("ep", "eubo"), ("laplace", "ts")])
def test_box_units_do_not_change_the_questions(model, strategy):
    # the same person on the unit square and on Branin's usual box
    # [-5, 10] x [0, 15]: the models see the unit cube, so the questions are
    # the same up to the map between the boxes (and the rounding of it)
    box = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=torch.float64)
    p = Branin()
    kw = dict(model=model, strategy=strategy, acqf_options=SMALL, seed=5)
    unit = PreferentialOptimizer(BOUNDS, **kw)
    wide = PreferentialOptimizer(box, **kw)
    for _ in range(5):
        X, Y = unit.ask(), wide.ask()
        torch.testing.assert_close(wide.to_unit(Y), X, atol=1e-6, rtol=0)
        assert ((Y >= box[0]) & (Y <= box[1])).all()
        a = int(p(X).argmax())
        unit.tell(a)
        wide.tell(a)
    xu, mu, su = unit.best()
    xw, mw, sw = wide.best()
    torch.testing.assert_close(wide.to_unit(xw), xu, atol=1e-6, rtol=0)
    assert mw == pytest.approx(mu, abs=1e-5) and sw == pytest.approx(su, abs=1e-5)
    mean, sd = wide.predict(wide.from_unit(torch.rand(4, 2, dtype=torch.float64)))
    assert mean.shape == sd.shape == (4,) and (sd > 0).all()


def test_unit_cube_maps_round_trip_inside_the_box():
    box = torch.tensor([[-5.0, 1e-3], [10.0, 2e-3]], dtype=torch.float64)
    opt = PreferentialOptimizer(box)
    Z = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.3, 0.7]], dtype=torch.float64)
    X = opt.from_unit(Z)
    assert ((X >= box[0]) & (X <= box[1])).all()
    torch.testing.assert_close(opt.to_unit(X), Z, atol=1e-12, rtol=0)
    with pytest.raises(InputDataError, match="predict"):
        opt.predict(X)


def test_logs_from_before_the_unit_cube_resume_on_the_box_as_written(tmp_path):
    from prefbo.loop.session import encode_record, read_session_log

    box = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=torch.float64)
    path = tmp_path / "old.jsonl"
    opt = PreferentialOptimizer(box, strategy="random", log_path=path)
    for _ in range(3):
        opt.ask()
        opt.tell(0)
    header, _ = read_session_log(path)
    del header["config"]["version"]  # an older layout has none
    del header["config"]["unit_cube"]
    del header["config"]["avoid_resolved"]
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(encode_record(header) + "".join(lines[1:]))
    opt.close()
    resumed = PreferentialOptimizer.resume(path, read_only=True)
    assert resumed.unit_cube is False and resumed.avoid_resolved is False
    designs, _ = resumed.data()
    # the model sees the designs in the box's units, as the old loop did
    torch.testing.assert_close(resumed.model.datapoints, designs)
    fresh = PreferentialOptimizer(box, strategy="random")
    assert fresh.unit_cube and fresh.avoid_resolved
    fresh.tell(0, options=designs[:2])
    torch.testing.assert_close(fresh.model.datapoints, fresh.to_unit(designs[:2]))


def test_predict_checks_its_designs():
    box = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=torch.float64)
    opt = PreferentialOptimizer(box, strategy="random")
    opt.tell(0, options=torch.tensor([[0.0, 1.0], [5.0, 9.0]], dtype=torch.float64))
    with pytest.raises(InputDataError, match=r"X must lie in the box.*row 0 has x"):
        opt.predict(torch.tensor([[20.0, 1.0]]))
    with pytest.raises(InputDataError, match=r"X must have shape n x 2.*\(2, 3\)"):
        opt.predict(torch.zeros(2, 3))
    with pytest.raises(InputDataError, match=r"X must have shape n x 2.*\(2,\)"):
        opt.predict(torch.zeros(2))
    with pytest.raises(InputDataError, match=r"row 0 has x\[1\] = nan"):
        opt.predict(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(InputTypeError, match="X must be a real torch.Tensor; got list"):
        opt.predict([[0.0, 1.0]])
    mean, sd = opt.predict(torch.tensor([[0, 1], [5, 9]]))  # integers are designs
    assert mean.dtype == sd.dtype == torch.float64
    assert mean[0] > mean[1]  # the told winner


def test_released_fits_change_no_question():
    # release_fits keeps the latest fit only: the next questions, and those
    # after an undo below it (the chain refitted), are the same
    p = Branin()
    kept, released = (PreferentialOptimizer(p.bounds, seed=2) for _ in range(2))
    for opt in (kept, released):
        for _ in range(5):
            X = opt.ask()
            opt.tell(int(p(X[0]) < p(X[1])))
        opt.ask()
    released.release_fits()
    assert list(released.models.fits) == [5] and len(kept.models.fits) > 1
    torch.testing.assert_close(released.ask(), kept.ask(), atol=0, rtol=0)
    for opt in (kept, released):
        X = opt.ask()
        opt.tell(0)
    torch.testing.assert_close(released.ask(), kept.ask(), atol=0, rtol=0)
    for opt in (kept, released):
        opt.undo()
        opt.undo()
        opt.undo()
    torch.testing.assert_close(released.ask(), kept.ask(), atol=0, rtol=0)
    torch.testing.assert_close(released.best()[0], kept.best()[0], atol=0, rtol=0)


def test_the_models_of_answers_are_a_part_of_their_own(ask_and_tell):
    from prefbo.loop.fitted import FittedModels

    opt = PreferentialOptimizer(
        BOUNDS, model="laplace", strategy="random", refit_every=2, seed=1
    )
    ask_and_tell(opt, [0, 1, 1], problem=Branin())
    models = FittedModels(opt.settings, opt.box)
    for answer in opt.history:
        models.add(answer)
    assert models.work_size == opt.work_size == 2 * 4
    design, mean, sd = models.best()
    assert torch.equal(design, opt.best()[0]) and (mean, sd) == opt.best()[1:]
    assert sorted(models.fits) == [2]  # the chain's fit at 2 answers
    # a virtual comparison is part of the model until cleared
    pair = opt.history[0].options
    models.propose([pair])
    assert models.model.comparisons.shape[0] == 4
    models.clear_proposed()
    assert models.model.comparisons.shape[0] == 3
    # withdrawn: the fits it was part of go with it
    assert models.withdraw().seq == opt.history[-1].seq
    assert models.withdraw().seq == opt.history[1].seq
    assert sorted(models.fits) == [] and len(models.answers) == 1
