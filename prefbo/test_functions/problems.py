r"""Test problems for preference learning: known utilities to be maximised.

A :class:`UtilityProblem` is a deterministic utility ``u: [bounds] -> R`` that a
simulated person (:class:`~prefbo.test_functions.people.SimulatedPerson`) consults
to answer questions. Utilities are *maximised* (unlike BoTorch's test functions,
which are minimised by default) and are standardised to roughly unit scale over
their domain, so that an answer-noise level such as ``noise_std=0.1`` means the
same thing on every problem.

To add a problem, subclass :class:`UtilityProblem`, set ``dim``, ``_bounds``,
``_optimal_value`` and ``_optimizers``, and implement :meth:`_evaluate_true`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError


class UtilityProblem(ABC):
    r"""Base class of test utilities to be maximised over a box.

    Subclasses define the class attributes:

    - ``dim``: the number of input features ``d``;
    - ``_bounds``: ``d`` pairs ``(lower, upper)``;
    - ``_optimal_value``: the maximum of the utility over the box;
    - ``_optimizers``: the maximisers, as a list of ``d``-tuples;

    and implement :meth:`_evaluate_true` on validated ``batch_shape x d`` input.
    """

    dim: int
    _bounds: list[tuple[float, float]]
    _optimal_value: float
    _optimizers: list[tuple[float, ...]]

    @property
    def name(self) -> str:
        r"""The problem's name (its class name)."""
        return type(self).__name__

    @property
    def bounds(self) -> Tensor:
        r"""A ``2 x d`` float64 tensor: the lower bounds, then the upper bounds."""
        return torch.tensor(self._bounds, dtype=torch.float64).transpose(0, 1)

    @property
    def optimal_value(self) -> float:
        r"""The maximum of the utility over :attr:`bounds`."""
        return float(self._optimal_value)

    @property
    def optimizers(self) -> Tensor:
        r"""A ``num_optimizers x d`` float64 tensor of the maximisers."""
        return torch.tensor(self._optimizers, dtype=torch.float64)

    def evaluate_true(self, X: Tensor) -> Tensor:
        r"""The noiseless utility.

        Args:
            X: A ``batch_shape x d`` floating tensor of designs (``d`` alone
                for a single design).

        Returns:
            A ``batch_shape`` tensor of utilities, in ``X``'s dtype and device.
        """
        if not isinstance(X, Tensor) or not X.is_floating_point():
            raise InputTypeError(
                f"X must be a floating torch.Tensor of shape batch_shape x "
                f"{self.dim}; got {type(X).__name__}"
                + (f" of dtype {X.dtype}" if isinstance(X, Tensor) else "")
                + "."
            )
        if X.ndim < 1 or X.shape[-1] != self.dim:
            raise InputDataError(
                f"X must have d={self.dim} features in its last dimension for "
                f"{self.name}; got shape {tuple(X.shape)}."
            )
        return self._evaluate_true(X)

    def __call__(self, X: Tensor) -> Tensor:
        r"""Alias of :meth:`evaluate_true`."""
        return self.evaluate_true(X)

    @abstractmethod
    def _evaluate_true(self, X: Tensor) -> Tensor:
        r"""The utility at validated ``batch_shape x d`` designs (``batch_shape``)."""


class Branin(UtilityProblem):
    r"""Negative Branin–Hoo, on the unit square, standardised (2-d).

    With ``x̄₁ = 15 x₁ - 5`` and ``x̄₂ = 15 x₂`` (mapping ``[0, 1]²`` onto
    Branin's usual domain ``[-5, 10] x [0, 15]``) and the usual

    ``branin(x̄) = (x̄₂ - 5.1 x̄₁² / (4π²) + 5 x̄₁ / π - 6)²
    + 10 (1 - 1 / (8π)) cos(x̄₁) + 10``,

    the utility is the negative of the rescaled Branin of Picheny, Wagner &
    Ginsbourger (2013), "A benchmark of kriging-based infill criteria for noisy
    optimization":

    ``u(x) = (54.81 - branin(x̄)) / 51.95``,

    i.e. ``branin`` minus (approximately) its mean over the domain, divided by
    its standard deviation, and negated. So ``u`` has mean ≈ 0 and standard
    deviation ≈ 1 over ``[0, 1]²``, ranges from ≈ -4.9 to its maximum
    ``(54.81 - 0.397887) / 51.95 ≈ 1.0474``, attained at three points.
    """

    dim = 2
    _bounds = [(0.0, 1.0), (0.0, 1.0)]
    _OFFSET = 54.81
    _SCALE = 51.95
    _BRANIN_MIN = 0.397887357729738
    _optimal_value = (_OFFSET - _BRANIN_MIN) / _SCALE
    _optimizers = [
        ((5.0 - math.pi) / 15.0, 12.275 / 15.0),
        ((5.0 + math.pi) / 15.0, 2.275 / 15.0),
        ((5.0 + 3.0 * math.pi) / 15.0, 2.475 / 15.0),
    ]

    def _evaluate_true(self, X: Tensor) -> Tensor:
        x1 = 15.0 * X[..., 0] - 5.0
        x2 = 15.0 * X[..., 1]
        b, c = 5.1 / (4.0 * math.pi**2), 5.0 / math.pi
        t = 1.0 / (8.0 * math.pi)
        branin = (
            (x2 - b * x1**2 + c * x1 - 6.0) ** 2
            + 10.0 * (1.0 - t) * torch.cos(x1)
            + 10.0
        )
        return (self._OFFSET - branin) / self._SCALE
