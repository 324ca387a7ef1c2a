import pytest
import torch
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal

from prefbo.exceptions import InputDataError, InputTypeError, NumericalError
from prefbo.likelihoods.quadrature import (
    difference_moments,
    distribution_moments,
    gauss_hermite,
    gaussian_expectation_1d,
    gaussian_expectation_qmc,
    latent_moments,
    sobol_normal,
)


def test_gauss_hermite_integrates_polynomials_exactly(tkwargs):
    x, w = gauss_hermite(5, **tkwargs)
    tol = 1e-12 if tkwargs["dtype"] == torch.float64 else 1e-4
    for k, moment in [(0, 1.0), (2, 1.0), (4, 3.0), (6, 15.0), (8, 105.0), (3, 0.0)]:
        assert (w * x**k).sum().item() == pytest.approx(moment, rel=tol, abs=tol)


def test_node_and_sample_counts_are_checked():
    with pytest.raises(InputDataError, match="num_points must be an int >= 1; got"):
        gauss_hermite(0, torch.float64)
    with pytest.raises(InputTypeError, match="num_points must be an int >= 1; got"):
        gauss_hermite(2.0, torch.float64)
    with pytest.raises(InputDataError, match="num_samples must be an int >= 1; got"):
        sobol_normal(0, 2)
    with pytest.raises(InputTypeError, match="num_samples must be an int >= 1; got"):
        sobol_normal(True, 2)


def test_sobol_normal_is_deterministic_and_standard(tkwargs):
    a = sobol_normal(4096, 3, seed=7, **tkwargs)
    torch.testing.assert_close(a, sobol_normal(4096, 3, seed=7, **tkwargs))
    assert a.shape == (4096, 3) and a.dtype == tkwargs["dtype"]
    torch.testing.assert_close(a.mean(0), torch.zeros(3, **tkwargs), atol=2e-3, rtol=0)
    torch.testing.assert_close(a.var(0), torch.ones(3, **tkwargs), atol=1e-2, rtol=0)


def test_difference_moments_match_the_comparison_matrix(tkwargs):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2, 4, 4, generator=g, dtype=torch.float64)
    cov = (a @ a.transpose(-1, -2)).to(**tkwargs)
    mean = torch.randn(2, 4, generator=g, dtype=torch.float64).to(**tkwargs)
    comp = torch.tensor([[0, 1], [3, 2], [1, 3]], device=tkwargs["device"])
    D = torch.zeros(3, 4, **tkwargs)
    rows = torch.arange(3, device=tkwargs["device"])
    D[rows, comp[:, 0]] = 1.0
    D[rows, comp[:, 1]] = -1.0
    md, vd = difference_moments(mean, cov, comp)
    torch.testing.assert_close(md, mean @ D.T)
    torch.testing.assert_close(vd, (D @ cov @ D.T).diagonal(dim1=-2, dim2=-1))
    var = cov.diagonal(dim1=-2, dim2=-1)
    _, vd_var = difference_moments(mean, var, comp)
    torch.testing.assert_close(vd_var, var[..., comp[:, 0]] + var[..., comp[:, 1]])


def test_latent_moments_layouts_and_padding():
    n, d = 3, 2
    g = torch.Generator().manual_seed(1)
    a = torch.randn(n * d, n * d, generator=g, dtype=torch.float64)
    joint = a @ a.T
    mean = torch.randn(n, d, generator=g, dtype=torch.float64)
    designs = torch.tensor([[2, 0, 0], [1, 1, 0]])
    outputs = torch.tensor([[1, 0, 1], [0, 1, 1]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    m, c = latent_moments(mean, joint, designs, outputs, mask)
    flat = designs * d + outputs
    torch.testing.assert_close(m[1], mean.reshape(-1)[flat[1]])
    torch.testing.assert_close(c[1], joint[flat[1]][:, flat[1]])
    assert (
        m[0, 2].item() == 0.0 and c[0, 2, 2].item() == 1.0 and c[0, 0, 2].item() == 0.0
    )
    blocks = torch.stack(
        [joint[i * d : (i + 1) * d, i * d : (i + 1) * d] for i in range(n)]
    )
    _, c_blocks = latent_moments(mean, blocks, designs, outputs)
    assert c_blocks[0, 0, 1].item() == 0.0  # different designs: independent
    assert c_blocks[1, 0, 1].item() == pytest.approx(joint[2, 3].item())  # same design


def test_latent_moments_errors():
    with pytest.raises(
        InputDataError, match=r"covariance must have the mean's shape .* got \(5, 5\)"
    ):
        latent_moments(
            torch.zeros(3, 2),
            torch.eye(5),
            torch.zeros(1, 2, dtype=torch.long),
            torch.zeros(1, 2, dtype=torch.long),
        )


def test_qmc_expectations_of_known_integrands():
    mean = torch.tensor([[0.5, -1.0]], dtype=torch.float64)
    cov = torch.tensor([[[1.0, 0.3], [0.3, 2.0]]], dtype=torch.float64)
    prod = gaussian_expectation_qmc(
        lambda x: x[..., 0] * x[..., 1], mean, cov, num_samples=4096
    )
    assert prod.item() == pytest.approx(0.3 - 0.5, abs=2e-3)
    a = torch.tensor([0.4, -0.2], dtype=torch.float64)
    lme = gaussian_expectation_qmc(
        lambda x: x @ a, mean, cov, num_samples=4096, log_mean_exp=True
    )
    exact = (a @ mean[0]).item() + 0.5 * (a @ cov[0] @ a).item()
    assert lme.item() == pytest.approx(exact, abs=2e-3)


def test_one_dimensional_log_mean_exp_is_closed_form():
    mean, var = (
        torch.tensor([0.3, -1.0], dtype=torch.float64),
        torch.tensor([0.5, 2.0], dtype=torch.float64),
    )
    out = gaussian_expectation_1d(
        lambda x: 2.0 * x, mean, var, num_points=30, log_mean_exp=True
    )
    torch.testing.assert_close(out, 2.0 * mean + 2.0 * var)


def test_qmc_rejects_an_indefinite_covariance():
    with pytest.raises(NumericalError, match="is not positive semi-definite"):
        gaussian_expectation_qmc(
            lambda x: x.sum(-1), torch.zeros(1, 2), -torch.eye(2).unsqueeze(0)
        )


def test_distribution_moments_unpacks_gpytorch_distributions():
    g = torch.Generator().manual_seed(2)
    a = torch.randn(6, 6, generator=g, dtype=torch.float64)
    cov = a @ a.T + torch.eye(6, dtype=torch.float64)
    mean = torch.randn(3, 2, generator=g, dtype=torch.float64)
    m, c = distribution_moments(
        MultitaskMultivariateNormal(mean, cov, interleaved=True)
    )
    torch.testing.assert_close(m, mean)
    torch.testing.assert_close(c, cov)
    task_major = cov.reshape(3, 2, 3, 2).permute(1, 0, 3, 2).reshape(6, 6)
    m, c = distribution_moments(
        MultitaskMultivariateNormal(mean, task_major, interleaved=False)
    )
    torch.testing.assert_close(c, cov)
    m, c = distribution_moments(MultivariateNormal(mean[:, 0], cov[:3, :3]))
    torch.testing.assert_close(c, cov[:3, :3])
    with pytest.raises(
        InputTypeError, match="function_dist must be a gpytorch MultivariateNormal"
    ):
        distribution_moments(torch.distributions.Normal(0.0, 1.0))
