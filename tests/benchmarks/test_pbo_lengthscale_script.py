"""``benchmarks/pbo_lengthscale.py``: other lengthscale priors in the loop's kernel."""

from __future__ import annotations

import math

import pytest
import torch


def test_default_prior_through_the_factory_is_the_default_loop(variant_regrets):
    mine, default = variant_regrets("pbo_lengthscale", "ls-gamma-default")
    assert mine == default


@pytest.mark.parametrize("dim", [2, 6])
def test_dim_scaled_prior_is_botorchs(load_benchmark, dim):
    # the independent reference: BoTorch's own dimension-scaled kernel
    from botorch.models.utils.gpytorch_modules import (
        get_covar_module_with_dim_scaled_prior,
    )

    bench = load_benchmark("pbo_lengthscale")
    mine = bench.dim_scaled(dim).base_kernel
    ref = get_covar_module_with_dim_scaled_prior(ard_num_dims=dim)
    assert float(mine.lengthscale_prior.loc) == pytest.approx(
        float(ref.lengthscale_prior.loc)
    )
    assert float(mine.lengthscale_prior.scale) == pytest.approx(
        float(ref.lengthscale_prior.scale)
    )
    assert mine.raw_lengthscale_constraint.lower_bound == pytest.approx(
        ref.raw_lengthscale_constraint.lower_bound
    )
    assert torch.allclose(mine.lengthscale.double(), ref.lengthscale.double())


def test_lognormal_prior_starts_at_its_mode_and_keeps_the_outputscale_box(
    load_benchmark,
):
    from prefbo.kernels.defaults import default_preference_covar_module

    bench = load_benchmark("pbo_lengthscale")
    kern = bench.lognormal(0.5, 0.5)(4)
    prior = kern.base_kernel.lengthscale_prior
    grid = torch.linspace(0.05, 2.0, 20_001, dtype=torch.float64)
    mode = float(grid[prior.log_prob(grid).argmax()])
    assert kern.base_kernel.lengthscale.flatten().tolist() == pytest.approx(
        [mode] * 4, abs=1e-4
    )
    assert mode == pytest.approx(0.5 * math.exp(-0.25), abs=1e-4)
    default = default_preference_covar_module(4)
    box, ref = kern.outputscale_prior, default.outputscale_prior
    assert (float(box.a), float(box.b)) == (float(ref.a), float(ref.b))
    torch.testing.assert_close(
        kern.outputscale.detach().double(), default.outputscale.detach()
    )
