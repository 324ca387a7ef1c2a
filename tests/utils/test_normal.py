import mpmath
import numpy as np
import pytest
import torch
from scipy import stats

from prefbo.utils.normal import logit_terms, ndtri_exp, probit_terms

mpmath.mp.dps = 60


def _reference(z: float) -> tuple[float, float, float, float]:
    """log Φ, λ, w, w' at z with 60-digit arithmetic (independent of torch)."""
    zz = mpmath.mpf(z)
    Phi = mpmath.ncdf(zz)
    lam = mpmath.npdf(zz) / Phi
    w = lam * (zz + lam)
    dw = lam - w * (zz + 2 * lam)
    return float(mpmath.log(Phi)), float(lam), float(w), float(dw)


@pytest.mark.parametrize(
    "z",
    [8.0, 3.0, 0.5, 0.0, -2.0, -4.99, -5.01, -7.5, -30.0, -99.9, -100.1, -1e3, -1e5],
)
def test_probit_terms_match_high_precision_reference(z):
    logcdf, lam, w, dw = (
        t.item() for t in probit_terms(torch.tensor([z], dtype=torch.float64))
    )
    ref = _reference(z)
    assert logcdf == pytest.approx(ref[0], rel=1e-13, abs=1e-300)
    assert lam == pytest.approx(ref[1], rel=1e-12)
    assert w == pytest.approx(ref[2], rel=1e-9)
    # the third derivative only enters gradients; it is still accurate
    assert dw == pytest.approx(ref[3], rel=1e-6, abs=1e-12)


def test_probit_terms_float32_keeps_precision_in_far_tail():
    z = torch.tensor([-1e4, -300.0, -20.0], dtype=torch.float32)
    _, lam, w, _ = probit_terms(z)
    for i, zi in enumerate(z.tolist()):
        ref = _reference(zi)
        assert lam[i].item() == pytest.approx(ref[1], rel=1e-6)
        assert w[i].item() == pytest.approx(ref[2], rel=1e-6)
    assert lam.dtype == torch.float32


def test_probit_derivatives_are_consistent_by_autograd():
    z = torch.linspace(-8, 8, 41, dtype=torch.float64, requires_grad=True)
    logcdf, lam, w, _ = probit_terms(z)
    (g1,) = torch.autograd.grad(torch.special.log_ndtr(z).sum(), z, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), z)
    torch.testing.assert_close(lam, g1.detach(), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(w, -g2, rtol=1e-8, atol=1e-12)


def test_probit_third_derivative_by_finite_differences():
    z = torch.linspace(-20, 6, 27, dtype=torch.float64)
    h = 1e-5
    _, _, w_plus, _ = probit_terms(z + h)
    _, _, w_minus, _ = probit_terms(z - h)
    _, _, _, dw = probit_terms(z)
    torch.testing.assert_close(dw, (w_plus - w_minus) / (2 * h), rtol=1e-5, atol=1e-9)


def test_logit_terms_by_autograd():
    z = torch.linspace(-30, 30, 61, dtype=torch.float64, requires_grad=True)
    logp, d1, w, dw = logit_terms(z)
    lp = torch.nn.functional.logsigmoid(z)
    (g1,) = torch.autograd.grad(lp.sum(), z, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), z, create_graph=True)
    (g3,) = torch.autograd.grad(g2.sum(), z)
    torch.testing.assert_close(d1, g1.detach(), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(w, -g2.detach(), rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(dw, -g3, rtol=1e-8, atol=1e-14)


def test_probit_terms_fast_path_equals_general_path():
    # on the CPU a tensor with no z in the tail takes a shortcut; appending one
    # tail value forces the general path, whose entries must be identical
    z = torch.linspace(-4.999, 9.0, 301, dtype=torch.float64)
    fast = probit_terms(z)
    general = probit_terms(torch.cat([z, torch.tensor([-7.0], dtype=z.dtype)]))
    for a, b in zip(fast, general):
        torch.testing.assert_close(a, b[:-1], rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_ndtri_exp_matches_scipy(dtype):
    from scipy import special

    y = torch.tensor(
        [-1e4, -800.0, -700.0, -100.0, -3.0, -0.7, -0.69, -0.1, -1e-5, -1e-12],
        dtype=dtype,
    )
    got = ndtri_exp(y)
    ref = special.ndtri_exp(y.double().numpy())
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    np.testing.assert_allclose(got.double().numpy(), ref, rtol=tol)
    yy = y.double().requires_grad_(True)
    (grad,) = torch.autograd.grad(ndtri_exp(yy).sum(), yy)
    # dx/dy = Φ(x)/φ(x)
    expected = np.exp(special.log_ndtr(ref) - stats.norm.logpdf(ref))
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-9)
