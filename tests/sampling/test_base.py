"""Shared set-up of the truncated-Gaussian samplers: validation, feasible start."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.sampling import (
    GibbsSampler,
    InfeasibleConstraintsError,
    LinESS,
    find_interior_point,
)

SAMPLERS = [LinESS, GibbsSampler]


def _problem(**tkwargs):
    A = torch.tensor([[-1.0, 0.0], [0.0, -1.0], [1.0, 1.0]], **tkwargs)
    b = torch.tensor([0.0, 0.0, 3.0], **tkwargs)
    cov = torch.tensor([[1.0, 0.3], [0.3, 2.0]], **tkwargs)
    return A, b, cov


@pytest.mark.parametrize("cls", SAMPLERS)
def test_contradictory_bounds_raise_infeasible(tkwargs, cls):
    A = torch.tensor([[1.0], [-1.0]], **tkwargs)  # x <= -1 and x >= 1
    b = torch.tensor([-1.0, -1.0], **tkwargs)
    with pytest.raises(InfeasibleConstraintsError, match="admit no point"):
        cls(A, b)


def test_cycle_of_strict_preferences_raises_infeasible(tkwargs):
    # f_0 > f_1 > f_2 > f_0 as -D f <= 0: only D f = 0 satisfies it, no interior
    D = torch.tensor([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0], [-1.0, 0.0, 1.0]], **tkwargs)
    with pytest.raises(InfeasibleConstraintsError, match="cycle of strict"):
        LinESS(-D, torch.zeros(3, **tkwargs))
    assert issubclass(InfeasibleConstraintsError, InputDataError)
    assert issubclass(InfeasibleConstraintsError, ValueError)


def test_flat_domain_and_impossible_zero_row_raise(tkwargs):
    A = torch.tensor([[1.0], [-1.0]], **tkwargs)  # x <= 0 and x >= 0
    with pytest.raises(InfeasibleConstraintsError, match=r"confine x\[0\] to \[0, 0\]"):
        LinESS(A, torch.zeros(2, **tkwargs))
    A = torch.tensor([[0.0, 0.0], [1.0, 0.0]], **tkwargs)
    with pytest.raises(InfeasibleConstraintsError, match=r"0 <= b\[0\] = -1"):
        LinESS(A, torch.tensor([-1.0, 0.0], **tkwargs))


@pytest.mark.parametrize("cls", SAMPLERS)
def test_zero_rows_are_dropped(tkwargs, cls):
    # a zero row through the mean would otherwise cut LinESS's cone arc in half
    A = torch.tensor([[-1.0], [0.0]], **tkwargs)
    sampler = cls(A, torch.zeros(2, **tkwargs), num_chains=64, burnin=20, seed=0)
    assert sampler.A.shape == (1, 1)
    draws = sampler.draw(200)
    assert abs(draws.double().mean().item() - math.sqrt(2 / math.pi)) < 0.05
    with pytest.raises(InputDataError, match="A must have a non-zero row"):
        cls(torch.zeros(2, 1, **tkwargs), torch.zeros(2, **tkwargs))


def test_find_interior_point_is_half_the_best_margin_inside_and_near_the_mean(
    tkwargs,
):
    # a cone with diagonal covariance: the answer is half a standard deviation
    x = find_interior_point(
        -torch.eye(2, **tkwargs),
        torch.zeros(2, **tkwargs),
        torch.zeros(2, **tkwargs),
        torch.diag(torch.tensor([2.0, 3.0], **tkwargs)),
    )
    torch.testing.assert_close(x, torch.tensor([1.0, 1.5], **tkwargs))
    # an orthant with correlation: half a standard deviation inside each face
    cov = torch.tensor([[4.0, 3.0], [3.0, 9.0]], **tkwargs)
    x = find_interior_point(
        -torch.eye(2, **tkwargs),
        torch.zeros(2, **tkwargs),
        torch.zeros(2, **tkwargs),
        torch.linalg.cholesky(cov),
    )
    torch.testing.assert_close(x, torch.tensor([1.0, 1.5], **tkwargs))
    # a box around a far mean: the mean is clipped to a quarter of the width
    box = torch.cat([torch.eye(2, **tkwargs), -torch.eye(2, **tkwargs)])
    x = find_interior_point(
        box,
        torch.tensor([1.0, 1.0, 1.0, 1.0], **tkwargs),
        torch.tensor([5.0, 0.2], **tkwargs),
        torch.eye(2, **tkwargs),
    )
    torch.testing.assert_close(x, torch.tensor([0.5, 0.2], **tkwargs))
    # a correlated 2-D polytope (LP path): whitened margin >= radius / 2
    A, b, cov = _problem(**tkwargs)
    root = torch.linalg.cholesky(cov)
    mean = torch.tensor([0.5, -0.5], **tkwargs)
    x = find_interior_point(A, b, mean, root)
    norms = torch.linalg.vector_norm(A @ root, dim=-1)
    margin = ((b - A @ x) / norms).min()
    # the largest margin by brute force on a grid (capped at 1 sd, as the LP)
    g = torch.linspace(-1.0, 4.0, 501, **tkwargs)
    grid = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    best = ((b - grid @ A.mT) / norms).amin(-1).max().clamp(max=1.0)
    assert 0.5 * float(best) - 1e-2 <= float(margin) <= float(best) + 1e-6


@pytest.mark.parametrize("cls", SAMPLERS)
def test_given_start_covariance_root_and_state(tkwargs, cls):
    A, b, cov = _problem(**tkwargs)
    start = torch.tensor([[0.5, 0.5], [1.0, 0.2], [0.1, 2.0]], **tkwargs)
    sampler = cls(A, b, covariance_matrix=cov, start=start, num_chains=3, seed=0)
    torch.testing.assert_close(sampler.state, start)
    by_root = cls(
        A,
        b,
        covariance_root=torch.linalg.cholesky(cov),
        start=start,
        num_chains=3,
        seed=0,
    )
    torch.testing.assert_close(sampler.draw(4), by_root.draw(4))
    assert sampler.draw(2).shape == (2, 3, 2) and sampler.lifetime_steps == 6


def test_botorch_shaped_b_and_mean_are_accepted(tkwargs):
    A, b, cov = _problem(**tkwargs)
    sampler = LinESS(A, b[:, None], torch.zeros(2, 1, **tkwargs), cov, seed=0)
    assert sampler.draw(3).shape == (3, 1, 2)


def _bad(**tkwargs):
    A, b, cov = _problem(**tkwargs)
    nan_A = A.clone()
    nan_A[1, 0] = math.nan
    return [
        ({"A": A[0]}, InputDataError, r"A must be a k x d matrix .* got shape \(2,\)"),
        ({"A": A.long()}, InputTypeError, "A must be a float32 or float64 tensor"),
        ({"A": nan_A}, InputDataError, r"A must be finite; got 1 non-finite"),
        ({"b": b[:2]}, InputDataError, r"b must have shape \(k,\) .* k=3 .* \(2,\)"),
        (
            {"b": b.float() if b.dtype == torch.float64 else b.double()},
            InputTypeError,
            "b must have the dtype of A",
        ),
        (
            {"mean": torch.zeros(3, **tkwargs)},
            InputDataError,
            r"mean must have shape \(d,\) or \(d, 1\) with d=2",
        ),
        (
            {"covariance_matrix": cov[:1]},
            InputDataError,
            r"covariance_matrix must have shape \(d, d\) with d=2 .*; got \(1, 2\)",
        ),
        (
            {
                "covariance_matrix": cov
                + torch.tensor([[0.0, 0.1], [0.0, 0.0]], **tkwargs)
            },
            InputDataError,
            "covariance_matrix must be symmetric",
        ),
        (
            {"covariance_matrix": torch.tensor([[1.0, 2.0], [2.0, 1.0]], **tkwargs)},
            InputDataError,
            "covariance_matrix must be positive definite",
        ),
        (
            {"covariance_matrix": None, "covariance_root": cov},
            InputDataError,
            "covariance_root must be lower triangular",
        ),
        (
            {"covariance_root": torch.eye(2, **tkwargs)},
            InputDataError,
            "Pass covariance_matrix or covariance_root, not both",
        ),
        (
            {"start": torch.tensor([-1.0, 1.0], **tkwargs)},
            InputDataError,
            r"start must satisfy A x < b strictly; got max\(A x - b\) = 1",
        ),
        (
            {"start": torch.zeros(3, **tkwargs)},
            InputDataError,
            r"start must have shape \(d,\) or \(num_chains, d\) = \(1, 2\)",
        ),
        (
            {"num_chains": 0},
            InputDataError,
            "num_chains must be an int >= 1; got num_chains=0",
        ),
        (
            {"thinning": -1},
            InputDataError,
            "thinning must be an int >= 0; got thinning=-1",
        ),
        ({"burnin": 1.5}, InputTypeError, "burnin must be an int >= 0; got float 1.5"),
        (
            {"seed": 0, "generator": torch.Generator()},
            InputDataError,
            "Pass seed or generator, not both",
        ),
        ({"seed": "a"}, InputTypeError, "seed must be None or an int; got str 'a'"),
        ({"seed": 1.5}, InputTypeError, "seed must be None or an int; got float"),
        ({"seed": True}, InputTypeError, "seed must be None or an int; got bool"),
        ({"seed": 2**64}, InputDataError, r"seed must be in \[-2\*\*63, 2\*\*64 - 1\]"),
        (
            {"generator": "x"},
            InputTypeError,
            "generator must be a torch.Generator or None; got str",
        ),
    ]


@pytest.mark.parametrize("cls", SAMPLERS)
def test_invalid_arguments_raise_typed_errors_naming_them(tkwargs, cls):
    A, b, cov = _problem(**tkwargs)
    for change, error, message in _bad(**tkwargs):
        kwargs = {"A": A, "b": b, "covariance_matrix": cov} | change
        with pytest.raises(error, match=message):
            cls(**kwargs)
    with pytest.raises(InputDataError, match="n must be an int >= 1; got n=0"):
        cls(A, b, covariance_matrix=cov).draw(0)


@pytest.mark.parametrize("cls", SAMPLERS)
def test_integer_like_seeds_are_accepted(cls):
    """NumPy integers are valid seeds (converted, as torch.Generator needs)."""
    A, b, cov = _problem(dtype=torch.float64, device=torch.device("cpu"))
    x = cls(A, b, covariance_matrix=cov, seed=np.int64(3)).draw(2)
    y = cls(A, b, covariance_matrix=cov, seed=3).draw(2)
    assert torch.equal(x, y)


@pytest.mark.parametrize("cls", SAMPLERS)
@pytest.mark.parametrize("block_size", [None, 3])
def test_progress_reports_every_transition_and_changes_no_draw(cls, block_size):
    A, b, cov = _problem(dtype=torch.float64)
    kw = {"block_size": block_size} if cls is LinESS else {}
    if cls is GibbsSampler and block_size is not None:
        pytest.skip("block_size is LinESS's")
    steps: list[int] = []
    common = dict(covariance_matrix=cov, num_chains=3, burnin=7, thinning=2, seed=4)
    reported = cls(A, b, progress=steps.append, **common, **kw)
    draws = reported.draw(5)
    plain = cls(A, b, **common, **kw).draw(5)
    assert torch.equal(draws, plain)  # the hook observes, never changes the chain
    assert sum(steps) == 7 + 5 * 3 and all(s >= 1 for s in steps)
    with pytest.raises(InputTypeError, match="progress must be a callable"):
        cls(A, b, progress=1, **common, **kw)
