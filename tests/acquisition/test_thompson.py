import pytest
import torch
from botorch.models.model import Model
from botorch.sampling.pathwise import draw_matheron_paths

from prefbo import PairwiseEPGP, PairwiseLaplaceGP, SkewGP
from prefbo.acquisition import maximize_paths, thompson_batch, thompson_pairs
from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.sampling.pathwise import draw_pairwise_paths
from prefbo.utils.testing import make_pairwise_data

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)


@pytest.mark.parametrize("cls", [PairwiseLaplaceGP, PairwiseEPGP])
def test_paths_have_the_posterior_mean_and_covariance(cls):
    X, comp, _ = make_pairwise_data(25, 60, seed=1)
    model = cls(X, comp)
    torch.manual_seed(0)
    paths = draw_pairwise_paths(model, torch.Size([6000]), num_features=4096)
    Xt = torch.rand(3, 2, dtype=torch.float64)
    with torch.no_grad():
        samples = paths(Xt)  # 6000 x 3
    post = model.posterior(Xt)
    # Monte Carlo (sd of a mean ~ 0.01) plus random-feature error (~1/sqrt(F))
    torch.testing.assert_close(
        samples.mean(0), post.mean.squeeze(-1).detach(), rtol=0, atol=0.06
    )
    torch.testing.assert_close(
        torch.cov(samples.T), post.covariance_matrix.detach(), rtol=0.1, atol=0.04
    )


def test_botorch_draw_matheron_paths_dispatches_to_prefbo_models():
    X, comp, _ = make_pairwise_data(15, 30)
    paths = draw_matheron_paths(PairwiseLaplaceGP(X, comp), torch.Size([4]))
    assert paths(torch.rand(7, 2, dtype=torch.float64)).shape == (4, 7)
    # path b on row b of a B x q x d input
    assert paths(torch.rand(4, 3, 2, dtype=torch.float64)).shape == (4, 3)


def test_maximize_paths_beats_a_dense_grid():
    X, comp, _ = make_pairwise_data(20, 50, seed=2)
    paths = draw_pairwise_paths(PairwiseLaplaceGP(X, comp), torch.Size([6]))
    best = maximize_paths(paths, BOUNDS, 6, raw_samples=256, num_restarts=4, seed=0)
    g = torch.linspace(0, 1, 101, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    with torch.no_grad():
        grid_max = paths(grid).amax(-1)  # 6
        found = paths(best.unsqueeze(-2)).squeeze(-1)
    assert best.shape == (6, 2) and ((best >= 0) & (best <= 1)).all()
    assert (found >= grid_max - 1e-3).all()


def test_thompson_pairs_shape_and_current_best():
    X, comp, _ = make_pairwise_data(20, 50, seed=3)
    model = PairwiseLaplaceGP(X, comp)
    pairs = thompson_pairs(
        model, BOUNDS, 5, raw_samples=128, num_restarts=2, num_steps=20
    )
    assert pairs.shape == (5, 2, 2)
    mean = model.posterior(model.datapoints.unsqueeze(-2)).mean.reshape(-1)
    torch.testing.assert_close(
        pairs[:, 1], model.datapoints[mean.argmax()].expand(5, 2)
    )


def test_thompson_batch_errors():
    X, comp, _ = make_pairwise_data(10, 20)
    model = PairwiseLaplaceGP(X, comp)
    with pytest.raises(InputDataError, match="bounds must be a 2 x d tensor"):
        thompson_batch(model, torch.zeros(3, 2), 2)
    with pytest.raises(InputDataError, match="lower < upper"):
        thompson_batch(model, torch.tensor([[1.0, 0.0], [0.0, 1.0]]), 2)
    with pytest.raises(InputDataError, match="num_restarts <= raw_samples"):
        thompson_batch(model, BOUNDS, 2, raw_samples=2, num_restarts=4)


def test_thompson_batch_on_a_trainable_botorch_svgp():
    """Paths of a model whose parameters require grad must not keep a graph."""
    import warnings

    from botorch.models import SingleTaskVariationalGP

    X = torch.rand(40, 2, dtype=torch.float64)
    Y = torch.sin(5 * X).sum(-1, keepdim=True)
    Y = (Y - Y.mean()) / Y.std()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = SingleTaskVariationalGP(X, Y, inducing_points=10)
    out = thompson_batch(model, BOUNDS, 3, raw_samples=64, num_restarts=2, num_steps=5)
    assert out.shape == (3, 2) and ((out >= 0) & (out <= 1)).all()


def test_bounds_of_the_wrong_d_are_named():
    X, comp, _ = make_pairwise_data(10, 15)
    model = PairwiseLaplaceGP(X, comp)
    bounds = torch.tensor([[0.0] * 3, [1.0] * 3], dtype=torch.float64)
    with pytest.raises(InputDataError, match=r"bounds.*d=2.*\(2, 3\)"):
        thompson_batch(model, bounds, 2)


def test_skew_gp_is_a_typed_error_naming_the_alternative():
    X, comp, _ = make_pairwise_data(10, 15)
    model = SkewGP(X, comp, num_samples=16, burnin=2, seed=0)
    with pytest.raises(UnsupportedError, match="SkewGP.*PairwiseEPGP"):
        thompson_batch(model, BOUNDS, 2)


def test_other_unsupported_models_are_a_typed_error():
    class Plain(Model):
        num_outputs = 1

        def posterior(self, X, **kwargs):  # pragma: no cover - never reached
            raise AssertionError

    with pytest.raises(UnsupportedError, match="Plain"):
        thompson_batch(Plain(), BOUNDS, 2)
