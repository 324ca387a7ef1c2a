"""``prefbo.test_functions.suite``: optimal values, optimisers and embeddings."""

from __future__ import annotations

import pytest
import torch
from botorch.test_functions import Ackley, Hartmann
from torch.quasirandom import SobolEngine

from prefbo.exceptions import InputDataError
from prefbo.test_functions import (
    Ackley5,
    Hartmann3,
    Hartmann6,
    Hartmann6in20,
    ThermalComfort,
)

# the literature's minima of the raw (minimised) functions
LITERATURE_MIN = {"Hartmann3": -3.86278, "Hartmann6": -3.32237, "Ackley5": 0.0}
PROBLEMS = [Hartmann3(), Hartmann6(), Hartmann6in20(), Ackley5(), ThermalComfort()]


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_optimizers_attain_the_optimal_value(problem):
    u = problem(problem.optimizers)
    assert u.shape == (1,)
    assert u.item() == pytest.approx(problem.optimal_value, abs=1e-4)
    assert problem.bounds.shape == (2, problem.dim)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_no_random_design_beats_the_optimal_value(problem):
    lo, hi = problem.bounds
    X = (
        lo
        + (hi - lo)
        * SobolEngine(problem.dim, scramble=True, seed=1).draw(2**14).double()
    )  # n x d
    u = problem(X)
    assert u.max().item() <= problem.optimal_value + 1e-9
    # standardised: mean ≈ 0 and standard deviation ≈ 1 over the box
    if not isinstance(problem, ThermalComfort):
        assert abs(u.mean().item()) < 0.05
        assert u.std().item() == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize(
    "problem, raw",
    [(Hartmann3(), Hartmann(dim=3)), (Hartmann6(), Hartmann(dim=6))],
    ids=["Hartmann3", "Hartmann6"],
)
def test_matches_the_literature_optimum_and_botorch(problem, raw):
    f_min = LITERATURE_MIN[problem.name]
    expected = (problem._MEAN - f_min) / problem._STD
    assert problem.optimal_value == pytest.approx(expected, abs=1e-4)
    X = torch.rand(16, problem.dim, dtype=torch.float64)
    expected_u = (problem._MEAN - raw(X)) / problem._STD
    torch.testing.assert_close(problem(X), expected_u)


@pytest.mark.parametrize("problem", [Hartmann3(), Hartmann6()], ids=lambda p: p.name)
def test_the_optimal_value_is_the_local_maximum_to_rounding(problem):
    # an independent local refinement (scipy) from the stated optimiser finds
    # nothing higher: regret can reach zero, and never goes negative
    from scipy.optimize import minimize

    def negative(z):
        return -problem(torch.tensor(z).unsqueeze(0)).item()

    start = problem.optimizers[0].numpy()
    res = minimize(
        negative,
        start,
        method="L-BFGS-B",
        bounds=[(0.0, 1.0)] * problem.dim,
        options={"ftol": 1e-15, "gtol": 1e-12},
    )
    assert -res.fun <= problem.optimal_value + 1e-12
    assert -res.fun == pytest.approx(problem.optimal_value, abs=1e-10)
    assert -negative(start) == pytest.approx(problem.optimal_value, abs=1e-9)


def test_ackley_maps_the_unit_cube_onto_minus_five_five():
    X = torch.rand(16, 5, dtype=torch.float64)
    f = Ackley(dim=5)(10 * X - 5)
    torch.testing.assert_close(Ackley5()(X), (10.2106 - f) / 1.4534)
    assert Ackley5().optimal_value == pytest.approx(10.2106 / 1.4534)


def test_thermal_comfort_dense_grid_maximum():
    problem = ThermalComfort()
    T = torch.linspace(10, 25, 200_001, dtype=torch.float64).unsqueeze(-1)
    u = problem(T)
    assert u.max().item() == pytest.approx(problem.optimal_value, abs=1e-8)
    assert T[u.argmax()].item() == pytest.approx(21.0, abs=0.01)
    # multi-modal: local maxima near 14 °C and ≈ 24.26 °C (the 24.5 °C bump,
    # pulled towards the main peak) as well
    inner = (u[1:-1] > u[:-2]) & (u[1:-1] > u[2:])
    peaks = T[1:-1][inner].squeeze(-1)
    assert len(peaks) == 3
    torch.testing.assert_close(
        peaks, torch.tensor([14.0, 21.0, 24.26], dtype=torch.float64), atol=0.02, rtol=0
    )


def test_embedded_hartmann_ignores_the_inactive_dims():
    p20, p6 = Hartmann6in20(), Hartmann6()
    X = torch.rand(32, 20, dtype=torch.float64)
    active = list(Hartmann6in20.ACTIVE_DIMS)
    torch.testing.assert_close(p20(X), p6(X[:, active]))
    inactive = [i for i in range(20) if i not in active]
    Y = X.clone()
    Y[:, inactive] = torch.rand(32, len(inactive), dtype=torch.float64)
    torch.testing.assert_close(p20(Y), p20(X))
    assert p20.optimal_value == p6.optimal_value


def test_batch_shapes_and_dtype():
    X = torch.rand(4, 3, 6)
    u = Hartmann6()(X)
    assert u.shape == (4, 3) and u.dtype == torch.float32


def test_wrong_dimension_is_rejected():
    with pytest.raises(InputDataError, match=r"d=5 features .* Ackley5; got shape"):
        Ackley5()(torch.rand(3, 4))
