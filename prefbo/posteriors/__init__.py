r"""BoTorch posteriors specific to prefbo models."""

from prefbo.posteriors.samples import SkewGPPosterior

__all__ = ["SkewGPPosterior"]
