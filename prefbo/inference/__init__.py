r"""Inference engines: Laplace (Newton), and shared linear algebra."""

from prefbo.inference.cholesky import jittered_cholesky
from prefbo.inference.ep import EPEvidence, EPSites, EPState, ep_evidence, run_ep
from prefbo.inference.laplace import (
    FORMS,
    GaussianApproximation,
    LaplaceEvidence,
    comparison_laplacian,
    find_mode,
    laplace_evidence,
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
