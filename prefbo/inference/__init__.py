r"""Inference engines: Laplace (Newton) and EP, with their shared Gaussian
approximation, comparison-Laplacian linear algebra and evidences."""

from prefbo.inference.cholesky import jittered_cholesky
from prefbo.inference.ep import EPEvidence, EPSites, EPState, ep_evidence, run_ep
from prefbo.inference.evidence import LaplaceEvidence, laplace_evidence
from prefbo.inference.gaussian import GaussianApproximation
from prefbo.inference.laplace import FORMS, find_mode
from prefbo.inference.laplacian import (
    comparison_laplacian,
    laplacian_matmul,
    scatter_pairs,
)

__all__ = [
    "EPEvidence",
    "EPSites",
    "EPState",
    "ep_evidence",
    "run_ep",
    "FORMS",
    "laplacian_matmul",
    "LaplaceEvidence",
    "GaussianApproximation",
    "comparison_laplacian",
    "find_mode",
    "jittered_cholesky",
    "laplace_evidence",
    "scatter_pairs",
]
