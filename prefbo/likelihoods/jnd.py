r"""Just-noticeable-difference likelihood (Luce's semiorder).

A person notices a difference only beyond a threshold δ: with utilities
perturbed by independent noise of standard deviation σ per design,
``Δ = u_w − u_l`` and ``s = √2·σ``,

- "``w`` beats ``l``": ``p = Φ((Δ − δ) / s)``,
- "``i`` and ``j`` are indiscernible": ``p = Φ((δ − Δ)/s) − Φ((−δ − Δ)/s)``.

These are the probit-smoothed forms of the hard model (preference iff
``Δ > δ``, indiscernible iff ``|Δ| ≤ δ``) and exactly the answer
probabilities of that model applied to the noisy utilities
``u + ε``; the three answers about a pair ("first", "second",
"indiscernible") have probabilities summing to one.
"""

from __future__ import annotations

import torch
from gpytorch.constraints import Positive
from torch import Tensor
from torch.distributions import Categorical

from prefbo.data.containers import PairwiseComparisons
from prefbo.exceptions import InputTypeError
from prefbo.likelihoods.base import (
    AnswerIndex,
    check_distinct_pairs,
    check_index_tensor,
)
from prefbo.likelihoods.difference import DifferenceLikelihood
from prefbo.utils.checks import check_positive_float
from prefbo.utils.logspace import log_ndtr_diff


class JustNoticeableDifferenceLikelihood(DifferenceLikelihood):
    r"""Preferences beyond a threshold δ and indiscernible pairs.

    Answers (for :meth:`log_prob_answers`, :meth:`expected_log_prob_answers`,
    :meth:`log_marginal_answers`):

    - ``comparisons``: an ``m x 2`` long tensor of ``[w, l]`` rows, "``w`` is
      noticeably better than ``l``";
    - ``indiscernible`` (optional): an ``m_b x 2`` long tensor of ``[i, j]``
      rows, "no noticeable difference" (order within a row is irrelevant).

    Utilities are ``batch_shape x n`` (one utility per design). Results are
    ``batch_shape x (m + m_b)``: the ``m`` comparisons first, then the
    indiscernible pairs. The threshold δ is a learnable parameter
    (``raw_threshold`` under a ``Positive`` constraint).
    """

    multi_output = False
    data_type = PairwiseComparisons

    def __init__(
        self,
        threshold: float = 1.0,
        noise_std: float = 1.0,
        num_points: int = 20,
    ) -> None:
        r"""
        Args:
            threshold: δ > 0, the smallest utility difference a person
                notices (in utility units).
            noise_std: σ, the noise on each design's utility.
            num_points: Gauss–Hermite nodes for expectations.
        """
        super().__init__(noise_std=noise_std, num_points=num_points)
        threshold = check_positive_float("threshold", threshold)
        self.register_parameter("raw_threshold", torch.nn.Parameter(torch.zeros(())))
        self.register_constraint("raw_threshold", Positive())
        self.threshold = threshold

    @property
    def threshold(self) -> Tensor:
        r"""δ, the just-noticeable difference (a 0-d tensor)."""
        return self.raw_threshold_constraint.transform(self.raw_threshold)

    @threshold.setter
    def threshold(self, value: float | Tensor) -> None:
        if isinstance(value, Tensor):
            if value.numel() != 1 or not value.is_floating_point():
                raise InputTypeError(
                    "threshold must be a finite float > 0 or a one-element "
                    f"floating tensor; got a {value.dtype} tensor of shape "
                    f"{tuple(value.shape)}."
                )
            check_positive_float("threshold", value.detach().reshape(()))
            value = value.reshape(()).to(self.raw_threshold)
        else:
            value = torch.tensor(
                check_positive_float("threshold", value),
                dtype=self.raw_threshold.dtype,
                device=self.raw_threshold.device,
            )
        self.initialize(
            raw_threshold=self.raw_threshold_constraint.inverse_transform(value)
        )

    def _index(
        self,
        num_designs: int,
        num_outputs: int,
        comparisons: Tensor,
        indiscernible: Tensor | None = None,
    ) -> AnswerIndex:
        comparisons = check_index_tensor(
            comparisons, "comparisons", num_designs, width=2, shape_text="m x 2"
        )
        check_distinct_pairs(comparisons, "comparisons")
        rows = comparisons
        if indiscernible is not None:
            indiscernible = check_index_tensor(
                indiscernible,
                "indiscernible",
                num_designs,
                width=2,
                shape_text="m_b x 2",
            )
            check_distinct_pairs(indiscernible, "indiscernible")
            rows = torch.cat([comparisons, indiscernible], dim=0)  # k x 2
        return AnswerIndex(
            designs=rows, outputs=torch.zeros_like(rows), split=comparisons.shape[0]
        )

    def _log_prob_difference(self, delta: Tensor, index: AnswerIndex) -> Tensor:
        split = index.split
        delta_p, delta_i = delta[..., :split], delta[..., split:]
        return torch.cat(
            [self._log_p_preferred(delta_p), self._log_p_indiscernible(delta_i)], dim=-1
        )

    def _log_marginal_difference(
        self, mean_diff: Tensor, var_diff: Tensor, index: AnswerIndex
    ) -> Tensor:
        r"""Closed forms: with ``w = √(s² + var)``, ``E[Φ((Δ − δ)/s)] =
        Φ((μ − δ)/w)`` and ``E[Φ((δ − Δ)/s) − Φ((−δ − Δ)/s)] = Φ((δ − μ)/w) −
        Φ((−δ − μ)/w)`` (``Δ + s ε ~ N(μ, w²)``), in log space."""
        split, t = index.split, self.threshold
        width = (self.scale**2 + var_diff).sqrt()
        z = mean_diff / width
        tw = t / width
        return torch.cat(
            [
                torch.special.log_ndtr(z[..., :split] - tw[..., :split]),
                log_ndtr_diff(
                    tw[..., split:] - z[..., split:], -tw[..., split:] - z[..., split:]
                ),
            ],
            dim=-1,
        )

    def _log_p_preferred(self, delta: Tensor) -> Tensor:
        return torch.special.log_ndtr((delta - self.threshold) / self.scale)

    def _log_p_indiscernible(self, delta: Tensor) -> Tensor:
        s, t = self.scale, self.threshold
        return log_ndtr_diff((t - delta) / s, (-t - delta) / s)

    def forward(self, function_samples: Tensor, pairs: Tensor) -> Categorical:
        r"""Distribution of the answer about each pair given utilities.

        Args:
            function_samples: A ``sample_shape x batch_shape x n`` tensor of
                utilities.
            pairs: An ``m x 2`` long tensor of ``[i, j]`` rows.

        Returns:
            A ``Categorical`` of batch shape ``sample_shape x batch_shape x m``
            over ``0``: "``i`` beats ``j``", ``1``: "``j`` beats ``i``",
            ``2``: "indiscernible".
        """
        f = self._as_latents(function_samples)[..., 0]  # ... x n
        pairs = check_index_tensor(pairs, "pairs", f.shape[-1], width=2)
        check_distinct_pairs(pairs, "pairs")
        pairs = pairs.to(f.device)
        delta = f[..., pairs[:, 0]] - f[..., pairs[:, 1]]  # ... x m
        logits = torch.stack(
            [
                self._log_p_preferred(delta),
                self._log_p_preferred(-delta),
                self._log_p_indiscernible(delta),
            ],
            dim=-1,
        )
        return Categorical(logits=logits)
