import pytest
import torch

from prefbo.exceptions import NumericalError
from prefbo.inference.ep_stopping import (
    FLOAT32_MAX_STIFFNESS,
    StoppingTest,
    check_holdable,
    rounding_floor,
    site_change,
)


def test_site_change_is_the_largest_relative_move():
    tau = torch.tensor([[1.0, 3.0], [0.0, 0.0]], dtype=torch.float64)
    nu = torch.tensor([[-1.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
    d_tau = torch.tensor([[0.2, 0.4], [0.0, 0.0]], dtype=torch.float64)
    d_nu = torch.tensor([[0.0, 0.0], [-0.3, 0.05]], dtype=torch.float64)
    # 0.4 / 4 against 0.2 / 2: both 0.1; -0.3 / 3 = 0.1 and 0.05
    torch.testing.assert_close(
        site_change(d_tau, d_nu, tau, nu), torch.tensor([0.1, 0.1]).double()
    )


@pytest.mark.parametrize("gain", [0.5, 1e4, 1e8])
def test_rounding_floor_is_the_maps_amplification_of_a_few_ulps(gain):
    # a sweep that multiplies the site precisions by `gain`: moving them by
    # 4 ulps moves the image by gain * 4 ε τ̃, so the floor (relative to
    # 1 + τ̃) is 4 ε gain for large τ̃
    eps = torch.finfo(torch.float64).eps
    tau = torch.tensor([[1e6, 2e6, 3e6]], dtype=torch.float64)
    nu = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)

    def sweep(t, n):
        return gain * t, n

    floor = rounding_floor(sweep, tau, nu, *sweep(tau, nu))
    assert floor.shape == (1,)
    # (the image's own rounding, ε gain τ̃, blurs it by up to a quarter)
    assert floor.item() == pytest.approx(4 * eps * gain, rel=0.3)


def test_check_holdable_refuses_float32_sites_beyond_its_resolution():
    comps = torch.tensor([[0, 1], [1, 0]])
    prior_diag = torch.ones(2)
    ok = torch.full((2,), 0.4 * FLOAT32_MAX_STIFFNESS)  # stiffness 0.8 x limit
    check_holdable(ok, comps, prior_diag, 1e-3)
    with pytest.raises(NumericalError, match=r"noise_std=1e-05 .*float64"):
        check_holdable(ok * 2, comps, prior_diag, 1e-5)
    # float64 sites are held at any size (the projector form)
    check_holdable(ok.double() * 1e20, comps, prior_diag.double(), 1e-11)


@pytest.mark.parametrize("tol, stops_at", [(1e-9, 7), (0.0, None)])
def test_stopping_test_takes_a_stalled_change_at_the_floor(tol, stops_at):
    # a sweep whose image moves by 1e-7 of the sites' size for 4 ulps: a
    # change stalled at 3e-7 (within 8 floors) converges once stalled for
    # STALL sweeps; tol = 0 asks for the budget and never stops there
    tau = torch.tensor([[1.0e3, 2.0e3]], dtype=torch.float64)
    nu = torch.zeros_like(tau)
    gain = 1e-7 / (4 * torch.finfo(torch.float64).eps)

    def sweep(t, n):
        return gain * t, n

    test = StoppingTest(tol, change=torch.full((1,), float("inf")).double())
    image = sweep(tau, nu)
    stopped = None
    for it in range(1, 12):
        change = torch.tensor([3e-7 if it > 1 else 1.0], dtype=torch.float64)
        if bool(test(change, sweep, tau, nu, *image)):
            stopped = it
            break
    # halved last at sweep 2, then STALL = 5 sweeps without halving
    assert stopped == stops_at
