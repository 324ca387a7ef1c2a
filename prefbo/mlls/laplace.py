r"""Laplace marginal log likelihood for :class:`~prefbo.models.PairwiseLaplaceGP`."""

from __future__ import annotations

from typing import Any

import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor

from prefbo.exceptions import InputDataError, UnsupportedError


class PairwiseLaplaceMLL(MarginalLogLikelihood):
    r"""Laplace evidence ``log p(D|f̂) - ½ f̂ᵀK⁻¹f̂ - ½ log|I + KŴ|`` (SPEC §3).

    Summed over batch elements, plus the log prior densities of the
    hyperparameters (as BoTorch's ``PairwiseLaplaceMarginalLogLikelihood``).
    Its gradient is exact: it accounts for the mode ``f̂`` moving with the
    hyperparameters. Works with ``botorch.fit.fit_gpytorch_mll``.

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
                training mode.
            target: The model's comparisons (``model.train_targets``).

        Returns:
            A scalar: the summed evidence plus hyperparameter log priors.
        """
        evidence = getattr(function_dist, "evidence", None)
        if evidence is None:
            raise UnsupportedError(
                f"{type(self).__name__} needs the output of the model called in "
                "training mode on its training designs: "
                "mll(model(*model.train_inputs), model.train_targets) after "
                "model.train()."
            )
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
        res = evidence.sum()
        for _, module, prior, closure, _ in self.named_priors():
            res = res.add(prior.log_prob(closure(module)).sum())
        return res


class PairwiseEPMLL(PairwiseLaplaceMLL):
    r"""EP evidence ``log Z_EP`` of a :class:`~prefbo.models.PairwiseEPGP` (SPEC §4).

    Summed over batch elements, plus the hyperparameter log priors. Its
    gradient is the explicit one, exact at the EP fixed point. Works with
    ``botorch.fit.fit_gpytorch_mll``.
    """
