r"""The distributions a pairwise preference GP returns.

In evaluation mode a model returns the joint predictive distribution of the
utilities, a GPyTorch ``MultivariateNormal``. In training mode it returns a
:class:`TrainingPosterior`: the approximate posterior at the training designs
together with the log evidence of that approximation, which is what the
marginal log likelihood (:class:`~prefbo.mlls.PairwiseLaplaceMLL`) sums. The
evidence travels with the distribution it belongs to, as BoTorch's fitting
closures call ``mll(model(*model.train_inputs), model.train_targets)``.
"""

from __future__ import annotations

from gpytorch.distributions import MultivariateNormal
from linear_operator import LinearOperator, to_linear_operator
from torch import Tensor


def mvn(mean: Tensor, covariance: Tensor) -> MultivariateNormal:
    r"""A GPyTorch MVN with a lazily factorised (possibly singular) covariance.

    Args:
        mean: ``batch_shape x q`` mean.
        covariance: ``batch_shape x q x q`` covariance.

    Returns:
        The ``MultivariateNormal``.
    """
    return MultivariateNormal(mean, to_linear_operator(covariance))


class TrainingPosterior(MultivariateNormal):
    r"""The approximate posterior of the utilities at the training designs,
    with the log evidence of the approximation that gave it.

    A pairwise model returns it when called in training mode on its training
    designs. Distributions derived from it (sums, slices, ...) keep the class
    but not the evidence (``evidence is None``): the evidence belongs to the
    model's approximation, not to a transformed distribution.

    Attributes:
        evidence: ``batch_shape`` approximate log evidence (Laplace or EP),
            differentiable in the model's hyperparameters.
    """

    evidence: Tensor | None = None

    def __init__(
        self,
        mean: Tensor,
        covariance_matrix: Tensor | LinearOperator,
        validate_args: bool = False,
        evidence: Tensor | None = None,
    ) -> None:
        r"""
        Args:
            mean: ``batch_shape x n`` posterior mean (or mode) at the designs.
            covariance_matrix: ``batch_shape x n x n`` posterior covariance
                (kept lazy: it may be singular to working precision).
            validate_args: As for GPyTorch's ``MultivariateNormal``.
            evidence: ``batch_shape`` log evidence.
        """
        super().__init__(mean, to_linear_operator(covariance_matrix), validate_args)
        self.evidence = evidence
