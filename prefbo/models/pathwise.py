r"""BoTorch's ``draw_matheron_paths`` for prefbo's models.

Registers :func:`~prefbo.sampling.pathwise.draw_pairwise_paths` for
:class:`~prefbo.models.PairwisePreferenceGP` (so
:class:`~prefbo.models.PairwiseLaplaceGP` and
:class:`~prefbo.models.PairwiseEPGP`) and
:func:`~prefbo.sampling.pathwise.draw_variational_paths` for
:class:`~prefbo.models.VariationalPreferenceGP` with BoTorch's dispatcher.
:mod:`prefbo.models` imports this module, so the registration holds wherever
a model class can be imported.
"""

from __future__ import annotations

from botorch.sampling.pathwise.posterior_samplers import (
    DrawMatheronPaths,
    MatheronPath,
)
from torch import Size

from prefbo.models.pairwise import PairwisePreferenceGP
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.sampling.pathwise import (
    VariationalPreferencePath,
    draw_pairwise_paths,
    draw_variational_paths,
)


@DrawMatheronPaths.register(PairwisePreferenceGP)
def _draw_matheron_paths_pairwise(
    model: PairwisePreferenceGP,
    *,
    sample_shape: Size,
    prior_sampler=None,
    update_strategy=None,
) -> MatheronPath:
    r"""BoTorch's ``draw_matheron_paths`` for prefbo's pairwise models (1024
    random features; ``prior_sampler`` and ``update_strategy`` are not used)."""
    return draw_pairwise_paths(model, sample_shape)


@DrawMatheronPaths.register(VariationalPreferenceGP)
def _draw_matheron_paths_variational(
    model: VariationalPreferenceGP,
    *,
    sample_shape: Size,
    prior_sampler=None,
    update_strategy=None,
) -> VariationalPreferencePath:
    r"""BoTorch's ``draw_matheron_paths`` for
    :class:`~prefbo.models.VariationalPreferenceGP` (1024 random features;
    ``prior_sampler`` and ``update_strategy`` are not used)."""
    return draw_variational_paths(model, sample_shape)
