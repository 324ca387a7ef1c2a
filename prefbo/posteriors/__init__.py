r"""Distributions and BoTorch posteriors specific to prefbo models."""

from prefbo.posteriors.gaussian import TrainingPosterior
from prefbo.posteriors.samples import SkewGPPosterior

__all__ = ["SkewGPPosterior", "TrainingPosterior"]
