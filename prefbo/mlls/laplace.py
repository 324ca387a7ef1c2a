r"""The approximate marginal log likelihood (evidence) of pairwise preference GPs.

:class:`~prefbo.models.PairwiseLaplaceGP` approximates the evidence by
Laplace's method, ``log p(D|f̂) - ½ f̂ᵀK⁻¹f̂ - ½ log|I + KŴ|`` (Chu &
Ghahramani 2005, eq. 12), and :class:`~prefbo.models.PairwiseEPGP` by EP's
``log Z_EP`` (Rasmussen & Williams 2006, sec. 3.6). The model computes its
evidence with its approximation and hands it over in the
:class:`~prefbo.posteriors.gaussian.TrainingPosterior` it returns in
training mode; the MLL adds the hyperparameter log priors. So one MLL serves
both models: :data:`PairwiseEPMLL` is another name of
:class:`PairwiseLaplaceMLL`.
"""

from __future__ import annotations

from typing import Any

import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.posteriors.gaussian import TrainingPosterior


class PairwiseLaplaceMLL(MarginalLogLikelihood):
    r"""The evidence of a pairwise preference GP's approximation, summed over
    batch elements, plus the log prior densities of the hyperparameters (as
    BoTorch's ``PairwiseLaplaceMarginalLogLikelihood``).

    For :class:`~prefbo.models.PairwiseLaplaceGP` it is the Laplace evidence,
    with the exact gradient (it accounts for the mode ``f̂`` moving with the
    hyperparameters); for :class:`~prefbo.models.PairwiseEPGP` the EP
    evidence, whose gradient is the explicit one, exact at the EP fixed point
    (also available as :data:`PairwiseEPMLL`). Works with
    ``botorch.fit.fit_gpytorch_mll``, which evaluates it as
    ``mll(model(*model.train_inputs), model.train_targets)``.

    Example:
        >>> mll = PairwiseLaplaceMLL(model.likelihood, model)
        >>> fit_gpytorch_mll(mll)
    """

    def forward(
        self,
        function_dist: MultivariateNormal,
        target: Tensor,
        *args: Any,
        **kwargs: Any,
    ) -> Tensor:
        r"""Evaluate the evidence.

        Args:
            function_dist: The output of ``model(*model.train_inputs)`` in
                training mode (a
                :class:`~prefbo.posteriors.gaussian.TrainingPosterior`).
            target: The model's comparisons (``model.train_targets``).

        Returns:
            A scalar: the summed evidence plus hyperparameter log priors.
        """
        evidence = (
            function_dist.evidence
            if isinstance(function_dist, TrainingPosterior)
            else None
        )
        if evidence is None:
            raise UnsupportedError(
                f"{type(self).__name__} needs the output of the model called in "
                "training mode on its training designs: "
                "mll(model(*model.train_inputs), model.train_targets) after "
                "model.train()."
            )
        self._check_target(target)
        res = evidence.sum()
        for _, module, prior, closure, _ in self.named_priors():
            res = res.add(prior.log_prob(closure(module)).sum())
        return res

    def _check_target(self, target: object) -> None:
        r"""``target`` must be the model's training comparisons."""
        expected = self.model.train_targets
        if target is not expected and not (
            isinstance(target, Tensor)
            and target.shape == expected.shape
            and torch.equal(target.to(expected), expected)
        ):
            raise InputDataError(
                "target must be the model's training comparisons "
                "(model.train_targets); got a different tensor"
                + (
                    f" of shape {tuple(target.shape)}"
                    if isinstance(target, Tensor)
                    else ""
                )
                + "."
            )


#: The MLL of :class:`~prefbo.models.PairwiseEPGP`: the same class as
#: :class:`PairwiseLaplaceMLL`, which sums whichever evidence the model's
#: approximation gives (EP's ``log Z_EP`` here).
PairwiseEPMLL = PairwiseLaplaceMLL
