r"""Pairwise BALD under the model's own answer likelihood.

Bayesian active learning by disagreement (Houlsby et al., 2011) scores a pair
by the mutual information between the answer ``y`` and the utilities:

    ``I(x₁, x₂) = H(E[p]) - E[H(p)]``,  ``p = F(Δ / s)``,  ``Δ = f(x₁) - f(x₂)``,

with ``Δ ~ N(μ, v)`` under the posterior, ``F`` the likelihood's link (probit
``Φ`` or logistic ``σ``), ``s = √2·σ`` its scale and ``H`` the binary
entropy. BoTorch's ``PairwiseBayesianActiveLearningByDisagreement`` fixes
``s = 1`` (Φ(Δ)) and estimates ``E[H(p)]`` from random draws; prefbo's
pairwise models answer with ``s = √2`` by default (BoTorch's ``PairwiseGP``
too), so BoTorch's class ranks pairs by the information of a less noisy
person than the model's. :class:`PairwiseBALD` takes ``s`` and ``F`` from the
model's likelihood and computes both expectations deterministically: ``E[p]``
in closed form for the probit (``Φ(μ / √(s² + v))``) and ``E[H(p)]`` (and
``E[p]`` for other links) by composite Simpson quadrature in ``z = Δ / s``
on the part of the line where both the Gaussian and the integrand matter
(``μ/s ± 8√v/s`` clipped to where ``H(F(z))`` is above double rounding), so
that a posterior much narrower or much wider than ``s`` is resolved alike.
The value is smooth in ``X`` (BoTorch's ``optimize_acqf`` runs on it).
"""

from __future__ import annotations

import math

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.models.model import Model
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from prefbo.acquisition.eubo import check_question_points
from prefbo.acquisition.pair_moments import pair_moments
from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.likelihoods.pairwise import (
    PairwiseLikelihood,
    PairwiseProbitLikelihood,
    as_prefbo_likelihood,
)
from prefbo.utils.checks import check_int

# |z| beyond which the binary entropy of F(z) is below 1e-16: probit
# (H ≈ φ(z) z / |z|... ≈ 1e-31 at 12) and logistic (H ≈ (1 + z) e^-z)
_PROBIT_REACH = 12.0
_LOGIT_REACH = 42.0
_WIDTHS = 8.0  # the Gaussian's reach, in standard deviations


def _binary_entropy(likelihood: PairwiseLikelihood, z: Tensor) -> Tensor:
    r"""``H(F(z))`` in nats, from ``log F(z)`` and ``log F(-z)`` (stable)."""
    log_p = likelihood._log_prob(z)
    log_q = likelihood._log_prob(-z)
    return -(log_p.exp() * log_p + log_q.exp() * log_q)


def _simpson_weights(num_points: int, dtype: torch.dtype, device) -> Tensor:
    w = torch.ones(num_points, dtype=dtype, device=device)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w / 3.0


class PairwiseBALD(AcquisitionFunction):
    r"""Mutual information between a pair's answer and the utilities, under
    the model's own likelihood (see the module docstring).

    Args:
        model: A one-output preference model whose ``likelihood`` is a prefbo
            pairwise likelihood (prefbo's pairwise, skew and variational
            models) or one of BoTorch's pairwise likelihoods (its
            ``PairwiseGP``). The posterior enters through its mean and
            covariance (for :class:`~prefbo.models.SkewGP`, those of its
            samples).
        num_points: Simpson nodes of the quadrature (odd, ``>= 33``).

    Example:
        >>> acqf = PairwiseBALD(model)
        >>> pair, _ = optimize_acqf(acqf, bounds, q=2, num_restarts=4,
        ...                         raw_samples=128)
    """

    def __init__(self, model: Model, num_points: int = 257) -> None:
        super().__init__(model=model)
        likelihood = getattr(model, "likelihood", None)
        if likelihood is not None and not isinstance(likelihood, PairwiseLikelihood):
            try:
                likelihood = as_prefbo_likelihood(likelihood)
            except TypeError:
                likelihood = None
        if likelihood is None:
            raise UnsupportedError(
                "PairwiseBALD needs a model with a pairwise answer likelihood "
                "(prefbo's pairwise probit/logit or BoTorch's); got "
                f"{type(getattr(model, 'likelihood', None)).__name__}."
            )
        num_points = check_int("num_points", num_points)
        if num_points < 33 or num_points % 2 == 0:
            raise InputDataError(
                f"num_points must be an odd int >= 33; got num_points={num_points}."
            )
        self.likelihood = likelihood
        self.num_points = num_points
        self._moments = None

    @property
    def moments(self):
        r"""The model's pair moments (read once, see :func:`pair_moments`)."""
        if self._moments is None:
            self._moments = pair_moments(self.model)
        return self._moments

    @t_batch_mode_transform()
    def forward(self, X: Tensor) -> Tensor:
        r"""BALD of ``batch_shape x 2 x d`` pairs.

        Returns:
            ``batch_shape`` mutual informations in nats (``>= 0``).

        Raises:
            UnsupportedError: ``q != 2`` (a pair's answer is what is scored).
            InputTypeError: ``X`` not real or not of the model's dtype.
            InputDataError: ``X`` of another width ``d``, or a non-finite
                option, named by its index.
        """
        if X.shape[-2] != 2:
            raise UnsupportedError(
                f"{type(self).__name__} scores pairs: X must have q=2 options per "
                f"question (batch_shape x 2 x d); got X of shape {tuple(X.shape)}."
            )
        check_question_points(self.model, self.moments, X)
        delta, _, var = self.moments.pairs(X)
        return self.information(delta, var)

    def information(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""``H(E[p]) - E[H(p)]`` for differences ``Δ ~ N(mean, var)``.

        Args:
            mean: Difference means, any shape.
            var: Their variances (``>= 0``; clamped at 0 from rounding).

        Returns:
            The mutual informations, ``mean``'s shape.
        """
        lik = self.likelihood
        s = lik.scale
        var = var.clamp_min(0.0)
        # a point mass where var = 0 (e.g. a design against itself); its
        # square root is taken of 1 there, so no infinite gradient reaches var
        point = var == 0
        var_pos = torch.where(point, torch.ones_like(var), var)
        mu_z = mean / s
        sd_z = torch.where(point, torch.zeros_like(var), var_pos.sqrt() / s)
        reach = (
            _PROBIT_REACH if isinstance(lik, PairwiseProbitLikelihood) else _LOGIT_REACH
        )
        # integrate over [a, b]: the Gaussian's ±8 sd within |z| <= reach
        a = torch.maximum(mu_z - _WIDTHS * sd_z, mu_z.new_tensor(-reach))
        b = torch.minimum(mu_z + _WIDTHS * sd_z, mu_z.new_tensor(reach))
        b = torch.maximum(a, b)  # empty: no entropy left to average (H ≈ 0)
        t = torch.linspace(
            0.0, 1.0, self.num_points, dtype=mean.dtype, device=mean.device
        )
        z = a.unsqueeze(-1) + (b - a).unsqueeze(-1) * t  # ... x P
        h = (b - a).unsqueeze(-1) / (self.num_points - 1)
        # the Gaussian density in z (a point mass where var = 0)
        sd = torch.where(point, torch.ones_like(sd_z), sd_z)
        density = torch.exp(-0.5 * ((z - mu_z.unsqueeze(-1)) / sd.unsqueeze(-1)) ** 2)
        density = density / (sd.unsqueeze(-1) * math.sqrt(2.0 * math.pi))
        weights = _simpson_weights(self.num_points, mean.dtype, mean.device) * h
        conditional = (weights * density * _binary_entropy(lik, z)).sum(-1)
        conditional = torch.where(point, _binary_entropy(lik, mu_z), conditional)
        if isinstance(lik, PairwiseProbitLikelihood):  # E[p] = Φ(μ / √(s² + v))
            marginal = _binary_entropy(lik, mean / (s**2 + var).sqrt())
        else:  # E[F(z)]: the quadrature plus the Gaussian's mass above b
            inside = (weights * density * lik._log_prob(z).exp()).sum(-1)
            above = torch.special.ndtr((mu_z - b) / sd)
            p_bar = torch.where(point, lik._log_prob(mu_z).exp(), inside + above)
            # H(p) has an infinite slope at 0 and 1: clamped there (no NaN)
            tiny = torch.finfo(mean.dtype).tiny
            p_bar = p_bar.clamp(tiny, 1.0 - torch.finfo(mean.dtype).eps)
            marginal = -(p_bar * p_bar.log() + (1 - p_bar) * torch.log1p(-p_bar))
        information = (marginal - conditional).clamp_min(0.0)
        return torch.where(point, torch.zeros_like(information), information)
