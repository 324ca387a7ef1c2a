"""``benchmarks/harness/problems.py``: the standardised problems and the
smooth pairwise data set."""

from __future__ import annotations

import pytest
import torch

from benchmarks.harness.problems import PROBLEMS, Utility, smooth_pairwise_data


@pytest.mark.parametrize("name", ["Branin", "Hartmann6", "Rosenbrock4"])
def test_utilities_are_standardised_over_the_box(name):
    u = Utility(name)
    # other uniform points than the standardisation's: mean 0, sd 1 (to
    # the accuracy of 20,000 points on heavy-tailed Hartmann6, Rosenbrock4)
    gen = torch.Generator().manual_seed(123)
    U = torch.rand(20_000, u.dim, generator=gen, dtype=torch.float64)
    v = u(u.from_unit(U))
    assert v.mean().item() == pytest.approx(0.0, abs=0.05)
    assert v.std().item() == pytest.approx(1.0, abs=0.1)
    # BoTorch's optimisers reach the optimal value; nothing exceeds it
    x_star = u.f.optimizers.to(torch.float64)
    assert u.regret(x_star[0]) == pytest.approx(0.0, abs=1e-4)  # 6 digits
    assert v.max().item() <= u.optimal_value + 1e-9
    torch.testing.assert_close(u.to_unit(u.from_unit(U[:5])), U[:5])


def test_the_six_problems_and_their_dimensions():
    dims = {name: Utility(name).dim for name in PROBLEMS}
    assert dims == {
        "Branin": 2,
        "Hartmann3": 3,
        "Hartmann6": 6,
        "Ackley5": 5,
        "Levy4": 4,
        "Rosenbrock4": 4,
    }


def test_smooth_data_follow_the_probit_model():
    data, u = smooth_pairwise_data(20_000, 50, seed=1)
    assert data.datapoints.shape == (50, 4) and u.shape == (50,)
    w, l = data.comparisons[:, 0], data.comparisons[:, 1]
    assert (w != l).all()
    # P(answer agrees with the utility) = E[Φ(|Δ|/√2)] over the random pairs
    agree = ((u[w] - u[l]) > 0).double().mean()
    i = torch.cat([w, l])
    j = torch.cat([l, w])
    expected = torch.special.ndtr((u[i] - u[j]).abs() / 2**0.5).mean()
    assert abs(float(agree - expected)) < 0.02
    again, _ = smooth_pairwise_data(20_000, 50, seed=1)
    assert torch.equal(again.comparisons, data.comparisons)  # seeded
