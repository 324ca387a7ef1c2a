import math

import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.test_functions import Branin, UtilityProblem


def _branin_textbook(x1, x2):
    """Branin on its usual domain [-5, 10] x [0, 15], written out independently."""
    a, b, c = 1.0, 5.1 / (4 * math.pi**2), 5 / math.pi
    r, s, t = 6.0, 10.0, 1 / (8 * math.pi)
    return a * (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * torch.cos(x1) + s


def test_branin_attributes():
    problem = Branin()
    assert isinstance(problem, UtilityProblem)
    assert problem.dim == 2
    assert problem.bounds.shape == (2, 2)
    assert torch.equal(problem.bounds, torch.tensor([[0.0, 0.0], [1.0, 1.0]]).double())
    assert problem.optimizers.shape == (3, 2)
    assert problem.name == "Branin"


def test_branin_optimum_matches_dense_grid():
    problem = Branin()
    at_opt = problem(problem.optimizers)
    torch.testing.assert_close(
        at_opt,
        torch.full((3,), problem.optimal_value, dtype=torch.float64),
        rtol=0,
        atol=1e-6,
    )
    g = torch.linspace(0, 1, 801, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(g, g, indexing="ij"), dim=-1)  # 801 x 801 x 2
    values = problem(grid)
    assert values.shape == (801, 801)
    # the grid never beats the stated optimum, and comes within grid resolution
    assert values.max().item() <= problem.optimal_value + 1e-9
    assert values.max().item() >= problem.optimal_value - 1e-3
    # the standardisation: roughly zero mean and unit scale over the square
    assert abs(values.mean().item()) < 0.1
    assert 0.8 < values.std().item() < 1.2


def test_branin_matches_textbook_formula():
    problem = Branin()
    X = torch.rand(50, 2, dtype=torch.float64)
    expected = -(_branin_textbook(15 * X[:, 0] - 5, 15 * X[:, 1]) - 54.81) / 51.95
    torch.testing.assert_close(problem(X), expected)
    # the textbook minimum 0.397887 at (-pi, 12.275)
    x = torch.tensor([-math.pi, 12.275], dtype=torch.float64)
    assert _branin_textbook(x[0], x[1]).item() == pytest.approx(0.397887, abs=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_branin_batch_shapes_and_dtype(dtype):
    problem = Branin()
    X = torch.rand(3, 4, 2, dtype=dtype)
    out = problem(X)
    assert out.shape == (3, 4) and out.dtype == dtype
    assert problem(X[0, 0]).shape == ()


def test_branin_wrong_last_dim_raises():
    problem = Branin()
    with pytest.raises(InputDataError, match=r"X must have d=2 features.*\(5, 3\)"):
        problem(torch.rand(5, 3, dtype=torch.float64))
    with pytest.raises(InputDataError, match="X must have d=2 features"):
        problem.evaluate_true(torch.tensor(0.5, dtype=torch.float64))


def test_branin_non_float_input_raises():
    with pytest.raises(InputTypeError, match="X must be a floating torch.Tensor"):
        Branin()(torch.ones(4, 2, dtype=torch.long))
    with pytest.raises(InputTypeError, match="got list"):
        Branin()([[0.1, 0.2]])
