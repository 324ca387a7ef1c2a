r"""Pareto preferences between designs with several utilities.

A design ``x`` is preferred to ``y`` when it is better in every one of ``d``
latent utilities; two designs *conflict* (are incomparable) when neither
dominates. With independent noise of standard deviation σ on every utility
of every design in every comparison, ``z_i = (u_i(x) − u_i(y)) / s`` and
``s = √2·σ``:

- ``p(x ≻ y) = Π_i Φ(z_i)``,
- ``p(x ⌢ y) = 1 − Π_i Φ(z_i) − Π_i Φ(−z_i)``,

and ``p(x ≻ y) + p(y ≻ x) + p(x ⌢ y) = 1``. With ``d = 1`` this is the
pairwise probit and conflicts are impossible.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Categorical

from prefbo.data.containers import PairwiseComparisons
from prefbo.exceptions import UnsupportedError
from prefbo.likelihoods.base import (
    AnswerIndex,
    PreferenceLikelihood,
    check_distinct_pairs,
    check_index_tensor,
)
from prefbo.likelihoods.orthant import (
    log_mixed_sign_probability,
    log_orthant_probability,
)
from prefbo.likelihoods.quadrature import (
    gaussian_expectation_1d,
    gaussian_expectation_qmc,
)
from prefbo.utils.logspace import log_pareto_conflict


class ParetoPreferenceLikelihood(PreferenceLikelihood):
    r"""Preferred and conflicting answers under ``d`` latent utilities.

    Answers (for :meth:`log_prob_answers`, :meth:`expected_log_prob_answers`,
    :meth:`log_marginal_answers`):

    - ``comparisons``: an ``m x 2`` long tensor of ``[x, y]`` rows, "``x``
      dominates ``y``";
    - ``conflicts`` (optional): an ``m_c x 2`` long tensor of ``[x, y]``
      rows, "neither dominates" (needs ``d ≥ 2``).

    Utilities are ``batch_shape x n x d``. Results are
    ``batch_shape x (m + m_c)``, comparisons first. Expected log-likelihoods
    are exact sums of one-dimensional Gauss–Hermite integrals for
    preferences (``E[Σ_i log Φ(z_i)] = Σ_i E[log Φ(z_i)]``) and QMC over the
    ``d`` differences for conflicts. Log marginals are orthant probabilities:
    with ``z ~ N(m, C)``, ``E[Π_i Φ(z_i)] = P(w > 0)`` for
    ``w ~ N(m, C + I)``, and a conflict is the probability that ``w`` has
    mixed signs, both by
    :func:`~prefbo.likelihoods.orthant.log_orthant_probability` (exact for
    utilities whose differences are independent across outputs; for
    correlated ones Genz's sequential conditioning with ``num_samples``
    Sobol points, accurate far in the tails).
    """

    data_type = PairwiseComparisons

    def _index(
        self,
        num_designs: int,
        num_outputs: int,
        comparisons: Tensor,
        conflicts: Tensor | None = None,
    ) -> AnswerIndex:
        comparisons = check_index_tensor(
            comparisons, "comparisons", num_designs, width=2, shape_text="m x 2"
        )
        check_distinct_pairs(comparisons, "comparisons")
        rows = comparisons
        if conflicts is not None:
            conflicts = check_index_tensor(
                conflicts, "conflicts", num_designs, width=2, shape_text="m_c x 2"
            )
            check_distinct_pairs(conflicts, "conflicts")
            if num_outputs < 2 and conflicts.shape[0] > 0:
                raise UnsupportedError(
                    "conflicts need at least d = 2 utilities (with one utility one "
                    f"design always dominates); got utilities with d={num_outputs}."
                )
            rows = torch.cat([comparisons, conflicts], dim=0)  # k x 2
        d = num_outputs
        designs = rows.repeat_interleave(d, dim=-1)  # k x 2d: [x]*d + [y]*d
        outputs = torch.arange(d, device=rows.device).repeat(2).expand_as(designs)
        return AnswerIndex(designs=designs, outputs=outputs, split=comparisons.shape[0])

    def _differences(self, latents: Tensor) -> Tensor:
        d = latents.shape[-1] // 2
        return (latents[..., :d] - latents[..., d:]) / self.scale  # ... x k x d

    def _log_prob_latents(self, latents: Tensor, index: AnswerIndex) -> Tensor:
        z = self._differences(latents)
        split = index.split
        preferred = torch.special.log_ndtr(z[..., :split, :]).sum(-1)
        if z.shape[-2] == split:
            return preferred
        return torch.cat([preferred, log_pareto_conflict(z[..., split:, :])], dim=-1)

    def _expectation(
        self,
        mean: Tensor,
        covariance: Tensor,
        index: AnswerIndex,
        num_samples: int,
        log_mean_exp: bool,
    ) -> Tensor:
        d = mean.shape[-1] // 2
        s, split = self.scale, index.split
        mean_z = self._differences(mean)  # batch x k x d
        cxx, cyy = covariance[..., :d, :d], covariance[..., d:, d:]
        cxy = covariance[..., :d, d:]
        cov_z = (cxx + cyy - cxy - cxy.transpose(-1, -2)) / s**2  # batch x k x d x d
        parts = []
        if log_mean_exp:
            eye = torch.eye(d, dtype=cov_z.dtype, device=cov_z.device)
            cov_w = cov_z + eye  # w = z + ε, batch x k x d x d
            parts.append(
                log_orthant_probability(
                    mean_z[..., :split, :],
                    cov_w[..., :split, :, :],
                    num_samples=num_samples,
                    seed=self.qmc_seed,
                )
            )
            if mean.shape[-2] > split:
                parts.append(
                    log_mixed_sign_probability(
                        mean_z[..., split:, :],
                        cov_w[..., split:, :, :],
                        num_samples=num_samples,
                        seed=self.qmc_seed,
                    )
                )
            return torch.cat(parts, dim=-1)
        else:
            var_z = cov_z.diagonal(dim1=-2, dim2=-1)  # batch x k x d
            parts.append(
                gaussian_expectation_1d(
                    torch.special.log_ndtr,
                    mean_z[..., :split, :],
                    var_z[..., :split, :],
                    num_points=self.num_points,
                ).sum(-1)
            )
        if mean.shape[-2] > split:
            parts.append(
                gaussian_expectation_qmc(
                    log_pareto_conflict,
                    mean_z[..., split:, :],
                    cov_z[..., split:, :, :],
                    num_samples=num_samples,
                    seed=self.qmc_seed,
                )
            )
        return torch.cat(parts, dim=-1)

    def forward(self, function_samples: Tensor, pairs: Tensor) -> Categorical:
        r"""Distribution of the answer about each pair given utilities.

        Args:
            function_samples: A ``sample_shape x batch_shape x n x d`` tensor
                of utilities.
            pairs: An ``m x 2`` long tensor of ``[x, y]`` rows.

        Returns:
            A ``Categorical`` of batch shape ``sample_shape x batch_shape x m``
            over ``0``: "``x`` dominates ``y``", ``1``: "``y`` dominates
            ``x``", ``2``: "conflict".
        """
        u = self._as_latents(function_samples)
        pairs = check_index_tensor(pairs, "pairs", u.shape[-2], width=2).to(u.device)
        check_distinct_pairs(pairs, "pairs")
        z = (u[..., pairs[:, 0], :] - u[..., pairs[:, 1], :]) / self.scale
        first = torch.special.log_ndtr(z).sum(-1)  # ... x m
        second = torch.special.log_ndtr(-z).sum(-1)
        if u.shape[-1] == 1:
            conflict = torch.full_like(first, float("-inf"))
        else:
            conflict = log_pareto_conflict(z)
        return Categorical(logits=torch.stack([first, second, conflict], dim=-1))
