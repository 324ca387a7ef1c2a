import math

import torch
from scipy.stats import norm

from prefbo.inducing import (
    gumbel_max_moments,
    max_value_information_gain,
)


def test_information_gain_matches_closed_form():
    gamma = torch.tensor([-30.0, -5.5, -4.0, -1.0, 0.0, 0.7, 3.0, 8.0])
    g = gamma.double().numpy()
    expected = g * norm.pdf(g) / (2 * norm.cdf(g)) - norm.logcdf(g)
    torch.testing.assert_close(
        max_value_information_gain(gamma.double()),
        torch.from_numpy(expected),
        rtol=1e-9,
        atol=1e-12,
    )
    far = torch.tensor([-1e3, -1e6], dtype=torch.float64)  # log|γ| + ½log2π − ½
    asym = far.abs().log() + 0.5 * math.log(2 * math.pi) - 0.5 + 2 / far.square()
    torch.testing.assert_close(max_value_information_gain(far), asym)
    assert torch.isfinite(max_value_information_gain(torch.tensor([-1e30, 1e30]))).all()


def test_gumbel_moments_match_monte_carlo(tkwargs):
    # the same problem and draws on every device (drawn on the CPU, then moved):
    # the tolerances bound the approximation's error on this problem
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(2, 200, generator=g).to(**tkwargs)
    sd = (0.2 + torch.rand(2, 200, generator=g)).to(**tkwargs)
    mu, s = gumbel_max_moments(mean, sd)
    z = torch.randn(20000, 2, 200, generator=g).to(**tkwargs)
    f = (mean + sd * z).amax(-1)  # 20000 x 2
    torch.testing.assert_close(mu, f.mean(0), rtol=0.03, atol=0)
    torch.testing.assert_close(s, f.std(0), rtol=0.1, atol=0)
