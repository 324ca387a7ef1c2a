"""``prefbo.loop.box``: the designs' box and the models' coordinates."""

import torch

from prefbo.loop.box import DesignBox
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.options import SEED_MOD
from prefbo.loop.spaces import unit_box
from prefbo.space import Categorical, Space
from prefbo.utils.seeds import question_seed

D = {"dtype": torch.float64}
BOUNDS = torch.tensor([[0.0, -5.0], [2.0, 5.0]], **D)


def test_the_unit_cube_map_and_its_inverse():
    box = DesignBox(BOUNDS)
    X = torch.tensor([[1.0, 0.0], [2.0, -5.0]], **D)
    Z = box.to_model(X)
    torch.testing.assert_close(Z, torch.tensor([[0.5, 0.5], [1.0, 0.0]], **D))
    torch.testing.assert_close(box.from_model(Z), X)
    # outside the cube: onto the faces
    outside = box.from_unit(torch.tensor([[-0.5, 1.5]], **D))
    assert torch.equal(outside, torch.tensor([[0.0, 5.0]], **D))
    assert torch.equal(box.model_bounds, torch.tensor([[0.0, 0.0], [1.0, 1.0]], **D))
    assert box.dim == 2


def test_without_the_unit_cube_the_models_see_the_box():
    box = DesignBox(BOUNDS, unit_cube=False)
    X = torch.tensor([[1.0, 0.0]])  # float32: as float64
    assert torch.equal(box.to_model(X), X.double())
    assert box.from_model(X) is X
    assert box.model_bounds is BOUNDS


def test_uniform_designs_are_seeded_and_in_the_box():
    box = DesignBox(BOUNDS)
    X = box.uniform(50, seed=7)
    assert X.shape == (50, 2) and X.dtype == torch.float64
    assert ((X >= BOUNDS[0]) & (X <= BOUNDS[1])).all()
    assert torch.equal(X, box.uniform(50, seed=7 + SEED_MOD))
    assert not torch.equal(X, box.uniform(50, seed=8))
    # a space's designs: distinct, none the one avoided
    space = Space([Categorical("c", ["a", "b", "c"])])
    on = DesignBox(unit_box(space), space)
    avoid = space.encode([{"c": "a"}])[0]
    for seed in range(5):
        two = on.uniform(2, seed, avoid)
        assert not torch.equal(two[0], two[1])
        assert not any(torch.equal(x, avoid) for x in two)


def test_the_optimizer_and_its_box_agree():
    opt = PreferentialOptimizer(BOUNDS, strategy="random", seed=3)
    X = opt.ask()
    assert torch.equal(opt.box.bounds, opt.bounds)
    assert torch.equal(opt.to_unit(X), opt.box.to_model(X))
    # a random question: the box's uniform designs under the question's seed
    assert torch.equal(X, opt.box.uniform(2, question_seed(3, 0)))


def test_same_question_is_up_to_a_billionth_of_the_box_s_width():
    box = DesignBox(torch.tensor([[0.0, -5.0], [10.0, 5.0]], dtype=torch.float64))
    Q = torch.tensor([[1.0, 2.0], [7.0, -3.0]], dtype=torch.float64)
    assert box.same_question(Q, Q + 5e-9)  # 5e-10 of the width of 10
    assert not box.same_question(Q, Q + 5e-8)
    assert not box.same_question(Q, Q.flip(0))  # the options' order counts
    assert not box.same_question(Q, Q[:1])
