import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

from prefbo.exceptions import InputTypeError
from prefbo.kernels.population import POPULATION, PopulationKernel, with_participant


def _kernel():
    pop = ScaleKernel(RBFKernel(ard_num_dims=2)).double()
    ind = ScaleKernel(MaternKernel(nu=2.5)).double()
    pop.outputscale, pop.base_kernel.lengthscale = 1.3, torch.tensor([[0.3, 0.7]])
    ind.outputscale, ind.base_kernel.lengthscale = 0.4, 0.5
    return PopulationKernel(pop, ind), pop, ind


def test_the_covariance_is_shared_plus_each_person_s_own():
    k, pop, ind = _kernel()
    g = torch.Generator().manual_seed(0)
    Z = torch.rand(7, 2, generator=g, dtype=torch.float64)
    p = torch.tensor([0.0, 0.0, 1.0, 2.0, 1.0, POPULATION, POPULATION])
    X = torch.cat([Z, p.unsqueeze(-1)], -1)
    K = k(X).to_dense()
    # entry by entry from the two kernels' own matrices
    Kp, Ki = pop(Z).to_dense(), ind(Z).to_dense()
    for i in range(7):
        for j in range(7):
            shared = p[i] == p[j] and p[i] >= 0
            expected = Kp[i, j] + (Ki[i, j] if shared else 0.0)
            assert K[i, j].item() == pytest.approx(expected.item(), rel=1e-12)
    torch.testing.assert_close(k(X, diag=True), K.diagonal())
    # the population id shares k_pop only, with everyone and with itself
    assert K[5, 5].item() == pytest.approx(Kp[5, 5].item())
    torch.testing.assert_close(K[5, :5], Kp[5, :5])


def test_with_participant_appends_the_id_column():
    X = torch.rand(2, 3, 2, dtype=torch.float64)
    Y = with_participant(X, 4)
    assert Y.shape == (2, 3, 3) and bool((Y[..., -1] == 4).all())
    torch.testing.assert_close(Y[..., :-1], X)


def test_kernels_must_be_gpytorch_kernels():
    with pytest.raises(InputTypeError, match=r"individual_kernel must be a gpytorch"):
        PopulationKernel(RBFKernel(), "rbf")
