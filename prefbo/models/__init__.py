r"""Preference models: each is a BoTorch ``Model`` and a GPyTorch module."""

from prefbo.models.ep import PairwiseEPGP
from prefbo.models.laplace import PairwiseLaplaceGP
from prefbo.models.pairwise import PairwisePreferenceGP
from prefbo.models.skew import SkewGP
from prefbo.models.users import RaggedBatch, batch_users

__all__ = [
    "PairwiseEPGP",
    "PairwiseLaplaceGP",
    "PairwisePreferenceGP",
    "RaggedBatch",
    "SkewGP",
    "batch_users",
]
