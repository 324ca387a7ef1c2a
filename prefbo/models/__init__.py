r"""Preference models: each is a BoTorch ``Model`` and a GPyTorch module."""

import prefbo.models.pathwise  # noqa: F401  (registers draw_matheron_paths)
from prefbo.models.ep import PairwiseEPGP
from prefbo.models.laplace import PairwiseLaplaceGP
from prefbo.models.pairwise import PairwisePreferenceGP
from prefbo.models.population import population_model, stack_participants
from prefbo.models.population_variational import VariationalPopulationGP
from prefbo.models.skew import SkewGP
from prefbo.models.users import RaggedBatch, batch_users
from prefbo.models.variational import VariationalPreferenceGP

__all__ = [
    "PairwiseEPGP",
    "PairwiseLaplaceGP",
    "PairwisePreferenceGP",
    "RaggedBatch",
    "SkewGP",
    "VariationalPopulationGP",
    "VariationalPreferenceGP",
    "batch_users",
    "population_model",
    "stack_participants",
]
