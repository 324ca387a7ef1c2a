r"""Marginal log likelihoods (evidence) for fitting preference models."""

from prefbo.mlls.laplace import PairwiseEPMLL, PairwiseLaplaceMLL

__all__ = ["PairwiseEPMLL", "PairwiseLaplaceMLL"]
