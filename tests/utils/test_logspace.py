import itertools

import mpmath
import pytest
import torch

from prefbo.utils.logspace import (
    log1m_prod_ndtr,
    log1mexp,
    log_any,
    log_ndtr_diff,
    log_pareto_conflict,
)

mpmath.mp.dps = 80


def _t(*values):
    return torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize("x", [-1e-20, -1e-8, -0.3, -0.6931, -0.7, -5.0, -50.0, -800.0])
def test_log1mexp_matches_mpmath(x):
    ref = float(mpmath.log(1 - mpmath.exp(mpmath.mpf(x))))
    assert log1mexp(_t(x)).item() == pytest.approx(ref, rel=1e-13)


def test_log1mexp_at_zero_is_minus_inf():
    assert log1mexp(_t(0.0)).item() == float("-inf")


@pytest.mark.parametrize(
    "a, b",
    [
        (1.0, -1.0),
        (0.3, 0.1),
        (40.0, 39.0),
        (-39.0, -40.0),
        (45.0, 44.999),
        (1e-9, -1e-9),
        (2.0, 2.0 - 1e-7),
        (-30.0, -30.0001),
        (0.5, 0.4995),
        (3.0, -30.0),
    ],
)
def test_log_ndtr_diff_matches_mpmath(a, b):
    with mpmath.workdps(1000):
        ref = float(mpmath.log(mpmath.ncdf(mpmath.mpf(a)) - mpmath.ncdf(mpmath.mpf(b))))
    assert log_ndtr_diff(_t(a), _t(b)).item() == pytest.approx(ref, rel=1e-12)


def _conflict_reference(z):
    """Sum over the 2^d − 2 mixed sign patterns, in 80-digit arithmetic."""
    total = mpmath.mpf(0)
    for signs in itertools.product([1, -1], repeat=len(z)):
        if all(s == 1 for s in signs) or all(s == -1 for s in signs):
            continue
        total += mpmath.fprod(mpmath.ncdf(s * mpmath.mpf(v)) for s, v in zip(signs, z))
    return float(mpmath.log(total))


@pytest.mark.parametrize(
    "z",
    [
        (0.0, 0.0),
        (1.0, -2.0),
        (30.0, 31.0),
        (-35.0, -30.0),
        (50.0, -0.5),
        (0.3, 2.0, -1.0),
        (20.0, 25.0, 30.0),
    ],
)
def test_log_pareto_conflict_matches_sign_pattern_sum(z):
    assert log_pareto_conflict(_t(*z)).item() == pytest.approx(
        _conflict_reference(z), rel=1e-10
    )


def test_log_pareto_conflict_is_impossible_with_one_utility():
    assert log_pareto_conflict(_t(0.5).unsqueeze(-1)).item() == float("-inf")


@pytest.mark.parametrize("z", [(0.0, 1.0), (40.0, 45.0, 50.0), (-3.0, 2.0), (60.0,)])
def test_log1m_prod_ndtr_matches_mpmath(z):
    with mpmath.workdps(1000):
        ref = float(mpmath.log(1 - mpmath.fprod(mpmath.ncdf(mpmath.mpf(v)) for v in z)))
    assert log1m_prod_ndtr(_t(*z)).item() == pytest.approx(ref, rel=1e-10)


def test_log_any_with_mask_skips_events():
    p = _t(0.2, 0.5, 0.9)
    mask = torch.tensor([True, False, True])
    out = log_any(p.log(), (1 - p).log(), mask)
    assert out.exp().item() == pytest.approx(1 - 0.8 * 0.1, rel=1e-12)


def test_gradients_are_finite_in_the_tails():
    z = _t(35.0, 36.0, 40.0).requires_grad_(True)
    (log_pareto_conflict(z) + log1m_prod_ndtr(z)).backward()
    assert bool(torch.isfinite(z.grad).all())
    a = _t(60.0, -0.1).requires_grad_(True)
    log_ndtr_diff(a, a - 1e-3).sum().backward()
    assert bool(torch.isfinite(a.grad).all())


@pytest.mark.parametrize("mid", [-30.0, -20.0, -10.0, 3.0, 10.0])
@pytest.mark.parametrize("half", [1e-5, 1e-4, 5e-4, 2e-3, 1e-2])
def test_log_ndtr_diff_float32_keeps_precision_above_the_series_band(mid, half):
    a = torch.tensor(mid + half, dtype=torch.float32)
    b = torch.tensor(mid - half, dtype=torch.float32)
    got = log_ndtr_diff(a, b)
    assert got.dtype == torch.float32
    ref = mpmath.log(
        mpmath.ncdf(mpmath.mpf(a.item())) - mpmath.ncdf(mpmath.mpf(b.item()))
    )
    assert got.item() == pytest.approx(float(ref), rel=2e-7, abs=1e-4)
