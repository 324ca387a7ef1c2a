r"""Pairwise preference likelihoods (probit and logit).

``noise_std`` is σ, the noise on each design's utility, so an answer "``w``
beats ``l``" has probability ``F((f_w - f_l) / s)`` with ``s = √2·σ``.
BoTorch's ``PairwiseProbitLikelihood`` is the probit with σ = 1 (its
``Φ((f_w - f_l)/√2)``); BoTorch's ``PairwiseLogitLikelihood`` is
``sigmoid(f_w - f_l)``, i.e. the logit with ``s = 1`` (σ = 1/√2).
:func:`as_prefbo_likelihood` converts both exactly.

Both are :class:`~prefbo.likelihoods.DifferenceLikelihood`\ s (one utility per
design, answers read from :class:`~prefbo.data.PairwiseComparisons`) with the
extra derivatives the Newton (Laplace) and EP loops need
(:meth:`PairwiseLikelihood.derivatives`). Unlike BoTorch, nothing is clamped:
BoTorch evaluates its probit gradient and Hessian at ``z`` clamped to
``[-3, 3]`` (logit: ``[-8, 8]``), which biases the Laplace mode whenever an
answer is decisive. prefbo evaluates ``log Φ``, the inverse Mills ratio and
the curvature stably for every finite ``z`` (:mod:`prefbo.utils.normal`).
"""

from __future__ import annotations

import math
from abc import abstractmethod

import torch
from botorch.models.likelihoods import pairwise as botorch_pairwise
from torch import Tensor
from torch.distributions import Bernoulli

from prefbo.data.containers import PairwiseComparisons
from prefbo.data.validation import broadcast_batches
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.likelihoods.base import (
    AnswerIndex,
    check_index_tensor,
)
from prefbo.likelihoods.difference import DifferenceLikelihood
from prefbo.likelihoods.quadrature import gaussian_expectation_1d
from prefbo.utils.normal import logit_terms, probit_terms


def _broadcast_pairs(utility: Tensor, comparisons: Tensor) -> tuple[Tensor, Tensor]:
    r"""Expand ``batch_shape x n`` utilities and ``... x m x 2`` rows to one batch.

    Views only (no copy, no device sync): cheap enough for Newton loops.
    """
    if utility.shape[:-1] == comparisons.shape[:-2]:
        return utility, comparisons
    batch = torch.broadcast_shapes(utility.shape[:-1], comparisons.shape[:-2])
    return (
        utility.expand(batch + utility.shape[-1:]),
        comparisons.expand(batch + comparisons.shape[-2:]),
    )


def check_comparisons(comparisons: object, utility: Tensor) -> Tensor:
    r"""Validate ``[w, l]`` rows for ``batch_shape x n`` utilities.

    Rows ``[i, i]`` are allowed: they are the padding rows of batched data
    (e.g. a masked ``PairwiseGP``) and contribute the constant ``log F(0)``.

    Args:
        comparisons: A ``batch_shape x m x 2`` (or ``m x 2``) integer tensor.
        utility: The ``batch_shape x n`` utilities it indexes.

    Returns:
        The comparisons as a long tensor on the utilities' device.
    """
    if not isinstance(utility, Tensor) or not utility.is_floating_point():
        got = utility.dtype if isinstance(utility, Tensor) else type(utility).__name__
        raise InputTypeError(
            f"utility must be a floating torch.Tensor of shape batch_shape x n; got "
            f"{got}."
        )
    if utility.ndim < 1:
        raise InputDataError(
            f"utility must have shape batch_shape x n; got {tuple(utility.shape)}."
        )
    if not isinstance(comparisons, Tensor):
        raise InputTypeError(
            "comparisons must be a torch.Tensor of shape batch_shape x m x 2; got "
            f"{type(comparisons).__name__}."
        )
    if (
        comparisons.dtype == torch.bool
        or comparisons.is_floating_point()
        or comparisons.is_complex()
    ):
        raise InputTypeError(
            "comparisons must be an integer (long) tensor of indices; got "
            f"{comparisons.dtype}."
        )
    if comparisons.ndim < 2 or comparisons.shape[-1] != 2:
        raise InputDataError(
            "comparisons must have shape batch_shape x m x 2 (rows [w, l]); got "
            f"{tuple(comparisons.shape)}."
        )
    broadcast_batches(
        "utility", utility.shape[:-1], "comparisons", comparisons.shape[:-2]
    )
    comparisons = comparisons.to(device=utility.device, dtype=torch.long)
    n = utility.shape[-1]
    if comparisons.numel() > 0:
        lo, hi = torch.stack([comparisons.min(), comparisons.max()]).tolist()
        if lo < 0 or hi >= n:
            raise InputDataError(
                f"comparisons must hold indices into the utilities in [0, {n - 1}] "
                f"(n={n}); got min {lo}, max {hi}."
            )
    return comparisons


class PairwiseLikelihood(DifferenceLikelihood):
    r"""Base class of likelihoods for "design ``w`` beats design ``l``" answers.

    A :class:`~prefbo.likelihoods.PreferenceLikelihood` over one utility per
    design whose answers are ``m x 2`` long tensors of ``[w, l]`` rows (read
    from :class:`~prefbo.data.PairwiseComparisons`). Subclasses implement
    :meth:`_terms`, the log-probability of an answer as a function of
    ``z = (f_w - f_l) / s`` and its first three derivatives. The Laplace and
    EP machinery reads :meth:`derivatives`; variational inference reads the
    preference-likelihood interface (Gauss–Hermite expected log-likelihoods,
    :meth:`log_predictive_probability` as the log marginal).

    :meth:`log_prob_answers` and :meth:`forward` also take batched
    ``batch_shape x m x 2`` comparisons and ``[i, i]`` padding rows (the
    constant ``log F(0)``), the layout of batched ``PairwiseGP`` data.
    """

    multi_output = False
    data_type = PairwiseComparisons

    def __init__(self, noise_std: float = 1.0, num_points: int = 20) -> None:
        r"""
        Args:
            noise_std: σ, the standard deviation of the noise on each design's
                utility (fixed, not learned: only ``outputscale / σ²`` is
                identifiable from comparisons). Differences are scaled by
                ``s = √2·σ``.
            num_points: Gauss–Hermite nodes for expected log-likelihoods.
        """
        super().__init__(noise_std=noise_std, num_points=num_points)

    @abstractmethod
    def _terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""``(log F(z), d/dz log F, -d²/dz² log F, -d³/dz³ log F)`` elementwise."""

    def derivatives(
        self, utility: Tensor, comparisons: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""Log-likelihood of each answer and its derivatives in the difference.

        Computed in float64 whatever the input dtype (an elementwise cost of
        ``O(m)``), then cast back. This is the Newton loop's hot path: the
        comparisons are not validated here (:meth:`log_prob_answers` does),
        only broadcast against the utilities' batch shape.

        Args:
            utility: A ``batch_shape x n`` tensor of utilities at the designs.
            comparisons: A ``batch_shape x m x 2`` (or ``m x 2``) long tensor,
                rows ``[w, l]``.

        Returns:
            A tuple of four ``batch_shape x m`` tensors: ``log p_k``, its first
            derivative in ``Δ_k = f_w - f_l``, the negative second derivative
            (``≥ 0``) and the negative third derivative.
        """
        s = self.scale
        utility, comparisons = _broadcast_pairs(utility, comparisons)
        delta = utility.gather(-1, comparisons[..., 0]) - utility.gather(
            -1, comparisons[..., 1]
        )  # batch x m
        logp, d1, w, dw = self._terms(delta.to(torch.float64) / s)
        dtype = utility.dtype
        return (
            logp.to(dtype),
            (d1 / s).to(dtype),
            (w / s**2).to(dtype),
            (dw / s**3).to(dtype),
        )

    def log_prob_answers(self, utility: Tensor, comparisons: Tensor) -> Tensor:
        r"""Exact log-probability of each answer given the utilities.

        Args:
            utility: A ``batch_shape x n`` tensor of utilities at the designs.
            comparisons: A ``batch_shape x m x 2`` (or ``m x 2``, shared by
                the batch) integer tensor, rows ``[w, l]``; a row ``[i, i]``
                is padding (``log F(0)``).

        Returns:
            A ``batch_shape x m`` tensor of ``log p(w ≻ l | f)``.
        """
        return self._log_prob_pairs(utility, check_comparisons(comparisons, utility))

    def _log_prob_pairs(self, utility: Tensor, comparisons: Tensor) -> Tensor:
        r""":meth:`log_prob_answers` of comparisons already checked (the Newton
        loop's line search: no validation pass, no device sync)."""
        utility, comparisons = _broadcast_pairs(utility, comparisons)
        delta = utility.gather(-1, comparisons[..., 0]) - utility.gather(
            -1, comparisons[..., 1]
        )  # batch x m
        return self._log_prob(delta / self.scale)

    def _log_prob(self, z: Tensor) -> Tensor:
        r"""``log F(z)`` alone (override when cheaper than :meth:`_terms`)."""
        return self._terms(z)[0]

    # ---------------------------------------------- preference-likelihood hooks
    def _index(
        self, num_designs: int, num_outputs: int, comparisons: Tensor
    ) -> AnswerIndex:
        rows = check_index_tensor(
            comparisons, "comparisons", num_designs, width=2, shape_text="m x 2"
        )
        return AnswerIndex(designs=rows, outputs=torch.zeros_like(rows))

    def _log_prob_difference(self, delta: Tensor, index: AnswerIndex) -> Tensor:
        return self._log_prob(delta / self.scale)

    def _log_marginal_difference(
        self, mean_diff: Tensor, var_diff: Tensor, index: AnswerIndex
    ) -> Tensor:
        return self.log_predictive_probability(mean_diff, var_diff)

    def check_data(self, data: object) -> None:
        r"""Check that ``data`` is :class:`~prefbo.data.PairwiseComparisons`
        without indiscernible pairs (which only
        :class:`~prefbo.likelihoods.JustNoticeableDifferenceLikelihood` reads).

        Args:
            data: A preference data container.
        """
        super().check_data(data)
        if len(data.answers) > 1:
            raise UnsupportedError(
                f"{type(self).__name__} reads comparisons only; got data with "
                "indiscernible pairs. Use JustNoticeableDifferenceLikelihood."
            )

    def forward(self, function_samples: Tensor, comparisons: Tensor) -> Bernoulli:
        r"""Distribution of the answers given sampled utilities.

        Args:
            function_samples: A ``sample_shape x batch_shape x n`` tensor of
                utilities at the designs.
            comparisons: A ``batch_shape x m x 2`` long tensor of ``[i, j]`` rows.

        Returns:
            A ``Bernoulli`` of shape ``sample_shape x batch_shape x m`` whose
            success is "design ``i`` is preferred to design ``j``".
        """
        comparisons = check_comparisons(comparisons, function_samples)
        function_samples, comparisons = _broadcast_pairs(function_samples, comparisons)
        return Bernoulli(logits=self._logits(function_samples, comparisons))

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""``E[p(answer | Δ)]`` for a Gaussian utility difference ``Δ ~ N(mean, var)``.

        ``exp`` of :meth:`log_predictive_probability`.

        Args:
            mean: Difference means, any shape.
            var: Difference variances (``≥ 0``), same shape.

        Returns:
            Probabilities of ``mean``'s shape.
        """
        return self.log_predictive_probability(mean, var).exp()

    def log_predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""``log E[p(answer | Δ)]`` for ``Δ ~ N(mean, var)``, the predictive log-prob.

        The base implementation uses 40-point Gauss–Hermite quadrature (see
        :func:`~prefbo.likelihoods.quadrature.gaussian_expectation_1d` for its
        accuracy when ``√var ≫ s``); the probit overrides it with the closed
        form ``log Φ(mean / √(s² + var))``.

        Args:
            mean: Difference means, any shape.
            var: Difference variances (``≥ 0``), same shape.

        Returns:
            Log-probabilities of ``mean``'s shape.
        """
        return gaussian_expectation_1d(
            lambda delta: self._log_prob(delta / self.scale),
            mean,
            var,
            num_points=40,
            log_mean_exp=True,
        )

    def _logits(self, utility: Tensor, comparisons: Tensor) -> Tensor:
        logp = self._log_prob_pairs(utility, comparisons)
        log1mp = self._log_prob_pairs(utility, comparisons.flip(-1))
        return logp - log1mp


class PairwiseProbitLikelihood(PairwiseLikelihood):
    r"""Thurstone case V: ``p(w ≻ l | f) = Φ((f_w - f_l) / (√2·σ))``."""

    def _terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return probit_terms(z)

    def _log_prob(self, z: Tensor) -> Tensor:
        return torch.special.log_ndtr(z)

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""Closed form ``Φ(mean / √(s² + var))``."""
        return torch.special.ndtr(mean / (self.scale**2 + var.clamp_min(0)).sqrt())

    def log_predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""Closed form ``log Φ(mean / √(s² + var))`` (stable ``log_ndtr``)."""
        return torch.special.log_ndtr(mean / (self.scale**2 + var.clamp_min(0)).sqrt())


class PairwiseLogitLikelihood(PairwiseLikelihood):
    r"""Bradley–Terry: ``p(w ≻ l | f) = sigmoid((f_w - f_l) / (√2·σ))``."""

    def _terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return logit_terms(z)

    def _log_prob(self, z: Tensor) -> Tensor:
        return torch.nn.functional.logsigmoid(z)


def as_prefbo_likelihood(likelihood: object | None) -> PairwiseLikelihood:
    r"""Return a prefbo pairwise likelihood for ``likelihood``.

    ``None`` gives the default probit (σ = 1). BoTorch's
    ``PairwiseProbitLikelihood`` maps to the probit with σ = 1 and BoTorch's
    ``PairwiseLogitLikelihood`` to the logit with σ = 1/√2 (``s = 1``), so the
    probabilities are the same functions of the utilities (without BoTorch's
    clamping).

    Args:
        likelihood: ``None``, a prefbo ``PairwiseLikelihood`` or a BoTorch
            pairwise likelihood.

    Returns:
        A ``PairwiseLikelihood``.
    """
    if likelihood is None:
        return PairwiseProbitLikelihood()
    if isinstance(likelihood, PairwiseLikelihood):
        return likelihood
    if isinstance(likelihood, botorch_pairwise.PairwiseProbitLikelihood):
        return PairwiseProbitLikelihood(noise_std=1.0)
    if isinstance(likelihood, botorch_pairwise.PairwiseLogitLikelihood):
        return PairwiseLogitLikelihood(noise_std=1.0 / math.sqrt(2.0))
    raise InputTypeError(
        "likelihood must be None, a prefbo PairwiseLikelihood or BoTorch's "
        "PairwiseProbitLikelihood / PairwiseLogitLikelihood; got "
        f"{type(likelihood).__name__}."
    )


def pairwise_expected_log_prob(
    likelihood: PairwiseLikelihood,
    mean_diff: Tensor,
    var_diff: Tensor,
    num_points: int = 20,
) -> Tensor:
    r"""``E[log F(Δ/s)]`` for ``Δ ~ N(mean_diff, var_diff)``, by Gauss–Hermite.

    The expected log-likelihood of answers "``w`` beats ``l``" under prefbo's
    pairwise probit (``F = Φ``) or logit (``F = sigmoid``) likelihoods, for the
    ELBO of a variational model. Get the difference moments with
    :func:`~prefbo.likelihoods.difference_moments`.

    Args:
        likelihood: A prefbo ``PairwiseLikelihood``.
        mean_diff: A ``batch_shape x m`` tensor of difference means.
        var_diff: A ``batch_shape x m`` tensor of difference variances.
        num_points: Number of Gauss–Hermite nodes.

    Returns:
        A ``batch_shape x m`` tensor.
    """
    if not isinstance(likelihood, PairwiseLikelihood):
        raise InputTypeError(
            "likelihood must be a prefbo PairwiseLikelihood (probit or logit); got "
            f"{type(likelihood).__name__}."
        )
    s = likelihood.scale
    return gaussian_expectation_1d(
        lambda delta: likelihood._log_prob(delta / s), mean_diff, var_diff, num_points
    )
