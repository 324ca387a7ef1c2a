r"""Preference models: each is a BoTorch ``Model`` and a GPyTorch module."""

from prefbo.models.laplace import PairwiseLaplaceGP

__all__ = ["PairwiseLaplaceGP"]
