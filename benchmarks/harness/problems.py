r"""Test problems and data sets shared by the benchmarks.

- :class:`Utility` (:data:`PROBLEMS`): BoTorch's Branin, Hartmann-3,
  Hartmann-6, Ackley-5, Levy-4 and Rosenbrock-4 on their customary boxes,
  negated (a utility to maximise) and standardised over the box:
  ``u(x) = (-f(x) - m) / s`` with ``m``, ``s`` the mean and standard deviation
  of ``-f`` at 20,000 uniform points (generator seed 0). Regret is
  ``u* - u(recommendation)`` in those units. The PBO loops' problems
  (``pbo_regret``, and through it ``threads``).
- :func:`smooth_pairwise_data`: random pairs of random designs in
  ``[0, 1]^4`` answered by a probit person (``σ = 1``) about a known smooth
  utility (``variational_scale``, ``gpu``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from botorch.test_functions import synthetic
from torch import Tensor

if TYPE_CHECKING:
    from prefbo.data import PairwiseComparisons

PROBLEMS: dict[str, Callable[[], synthetic.SyntheticTestFunction]] = {
    "Branin": lambda: synthetic.Branin(),
    "Hartmann3": lambda: synthetic.Hartmann(dim=3),
    "Hartmann6": lambda: synthetic.Hartmann(dim=6),
    "Ackley5": lambda: synthetic.Ackley(dim=5),
    "Levy4": lambda: synthetic.Levy(dim=4),
    "Rosenbrock4": lambda: synthetic.Rosenbrock(dim=4),
}

#: The dimension of :func:`smooth_utility`'s designs.
SMOOTH_DIM = 4


class Utility:
    r"""A BoTorch test function negated and standardised over its box.

    Args:
        name: A key of :data:`PROBLEMS`.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.f = PROBLEMS[name]()
        self.bounds = self.f.bounds.to(torch.float64)  # 2 x d
        self.dim = self.bounds.shape[-1]
        gen = torch.Generator().manual_seed(0)
        U = torch.rand(20_000, self.dim, generator=gen, dtype=torch.float64)
        raw = -self.f.evaluate_true(self.from_unit(U))
        self.mean, self.std = raw.mean().item(), raw.std().item()
        self.optimal_value = (-self.f.optimal_value - self.mean) / self.std

    def from_unit(self, U: Tensor) -> Tensor:
        r"""Designs of the box (``... x d``) from points of the unit cube."""
        return self.bounds[0] + (self.bounds[1] - self.bounds[0]) * U

    def to_unit(self, X: Tensor) -> Tensor:
        r"""Points of the unit cube (``... x d``) from designs of the box."""
        return (X - self.bounds[0]) / (self.bounds[1] - self.bounds[0])

    def __call__(self, X: Tensor) -> Tensor:
        r"""The standardised utility at ``... x d`` designs of the box, ``...``."""
        return (-self.f.evaluate_true(X) - self.mean) / self.std

    def regret(self, x: Tensor) -> float:
        r"""``u* - u(x)`` at one design of the box (``d``; clamped at 0)."""
        return max(self.optimal_value - self(x.unsqueeze(0)).item(), 0.0)


def smooth_utility(X: Tensor) -> Tensor:
    r"""A known smooth utility at ``... x n x d`` designs, ``... x n``:
    ``sum sin(3 x) - 3 |x - 1/2|^2``."""
    return torch.sin(3 * X).sum(-1) - 3 * (X - 0.5).pow(2).sum(-1)


def random_pairs(n: int, m: int, g: torch.Generator) -> Tensor:
    r"""``m x 2`` random pairs of distinct indices in ``[0, n)``."""
    i = torch.randint(n, (m,), generator=g)
    j = (i + torch.randint(1, n, (m,), generator=g)) % n
    return torch.stack([i, j], -1)


def smooth_pairwise_data(
    m: int, n: int, seed: int = 0
) -> tuple[PairwiseComparisons, Tensor]:
    r"""``n`` uniform designs in ``[0, 1]^4``, ``m`` random pairs of them
    answered with probit noise (``σ = 1``: ``P(w ≻ l) = Φ((u_w − u_l)/√2)``)
    about :func:`smooth_utility`.

    Returns:
        The answers (a :class:`~prefbo.data.PairwiseComparisons` of ``n x 4``
        designs and ``m x 2`` winner-loser rows) and the true utility (``n``).
    """
    from prefbo.data import PairwiseComparisons

    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, SMOOTH_DIM, generator=g, dtype=torch.float64)
    u = smooth_utility(X)
    pairs = random_pairs(n, m, g)
    p = torch.special.ndtr((u[pairs[:, 0]] - u[pairs[:, 1]]) / math.sqrt(2.0))
    first = torch.rand(m, generator=g, dtype=torch.float64) < p
    comp = torch.where(first.unsqueeze(-1), pairs, pairs.flip(-1))
    return PairwiseComparisons(X, comp), u
