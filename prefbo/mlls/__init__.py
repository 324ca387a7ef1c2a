r"""Marginal log likelihoods (evidence) for fitting preference models."""

from prefbo.mlls.laplace import PairwiseLaplaceMLL

__all__ = ["PairwiseLaplaceMLL"]
