r"""Preference models: each is a BoTorch ``Model`` and a GPyTorch module."""

from prefbo.models.ep import PairwiseEPGP
from prefbo.models.laplace import PairwiseLaplaceGP
from prefbo.models.pairwise import PairwisePreferenceGP

__all__ = ["PairwiseEPGP", "PairwiseLaplaceGP", "PairwisePreferenceGP"]
