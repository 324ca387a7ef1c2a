"""``prefbo.models.pathwise``: BoTorch's draw_matheron_paths dispatches to prefbo's
pathwise samplers for every prefbo pairwise and variational model."""

import torch
from botorch.sampling.pathwise import draw_matheron_paths
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths, MatheronPath

from prefbo.data import PairwiseComparisons
from prefbo.models import (
    PairwiseEPGP,
    PairwiseLaplaceGP,
    PairwisePreferenceGP,
    VariationalPreferenceGP,
)
from prefbo.models.pathwise import (
    _draw_matheron_paths_pairwise,
    _draw_matheron_paths_variational,
)
from prefbo.sampling.pathwise import VariationalPreferencePath


def test_registrations():
    for cls in (PairwisePreferenceGP, PairwiseLaplaceGP, PairwiseEPGP):
        assert DrawMatheronPaths.dispatch(cls) is _draw_matheron_paths_pairwise
    assert DrawMatheronPaths.dispatch(VariationalPreferenceGP) is (
        _draw_matheron_paths_variational
    )


def test_draw_matheron_paths_on_a_laplace_model():
    X = torch.rand(6, 2, dtype=torch.float64)
    comparisons = torch.tensor([[0, 1], [2, 3], [4, 5]])
    model = PairwiseLaplaceGP(X, comparisons)
    paths = draw_matheron_paths(model, sample_shape=torch.Size([3]))
    assert isinstance(paths, MatheronPath)
    assert paths(torch.rand(4, 2, dtype=torch.float64)).shape == (3, 4)


def test_draw_matheron_paths_on_a_variational_model():
    X = torch.rand(6, 2, dtype=torch.float64)
    model = VariationalPreferenceGP(
        PairwiseComparisons(X, torch.tensor([[0, 1], [2, 3]])), inducing_points=4
    )
    paths = draw_matheron_paths(model, sample_shape=torch.Size([2]))
    assert isinstance(paths, VariationalPreferencePath)
    assert paths(torch.rand(5, 2, dtype=torch.float64)).shape == (2, 5)
