r"""More simulated people: logit answers, indifference, several criteria.

Each person is a :class:`~prefbo.test_functions.people.BasePerson`, like
:class:`~prefbo.test_functions.people.SimulatedPerson`: it holds known
utilities and its own seeded ``torch.Generator``, and answers a
``batch_shape x 2 x d`` batch of questions with ``compare_batch`` (one
question with ``compare``). Besides ``0`` (first option preferred) and
``1`` (second), some people give a special answer:

- :data:`INDIFFERENT` (``-1``): "no noticeable difference"
  (:class:`IndifferentPerson`);
- :data:`CONFLICT` (``-2``): neither option dominates the other, i.e. is at
  least as good on every criterion and better on one (:class:`ParetoPerson`;
  with noise ties have probability zero, without it an option tied on one
  criterion and better on another dominates, and a tie on all is a conflict).

Answer probabilities, with ``Δ = u(x₂) - u(x₁)`` (second minus first):

- :class:`LogitPerson` (Bradley–Terry): ``P(1) = σ(Δ / s)``, the logistic
  sigmoid; realised by adding independent Gumbel noise of scale ``s`` to each
  option's utility.
- :class:`IndifferentPerson` (probit with a just-noticeable difference δ):
  the perceived difference is ``D = Δ + √2 σ ε``; ``P(1) = Φ((Δ - δ) /
  (√2 σ))``, ``P(0) = Φ((-Δ - δ) / (√2 σ))``, ``P(-1)`` the rest.
- :class:`ParetoPerson`: each criterion ``k`` is perceived with its own probit
  noise, so ``P(0) = ∏ₖ Φ(-Δₖ / (√2 σ))``, ``P(1) = ∏ₖ Φ(Δₖ / (√2 σ))``, and
  ``P(-2)`` the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.test_functions.people import BasePerson
from prefbo.utils.checks import check_nonneg_float

INDIFFERENT = -1
CONFLICT = -2


class LogitPerson(BasePerson):
    r"""A person with Bradley–Terry (logit) answers.

    Prefers the second option with probability ``σ((u(x₂) - u(x₁)) / s)``.

    Example:
        >>> person = LogitPerson(Branin(), scale=0.1, seed=0)
        >>> person.compare(torch.tensor([0.1, 0.8]), torch.tensor([0.5, 0.5]))
        0
    """

    def __init__(
        self, utility: Callable[[Tensor], Tensor], scale: float = 0.1, seed: int = 0
    ) -> None:
        r"""
        Args:
            utility: Maps ``batch_shape x d`` designs to ``batch_shape``
                utilities (e.g. a :class:`~prefbo.test_functions.UtilityProblem`).
            scale: ``s``, the logistic scale (``0``: noiseless, ties go to the
                first option). The answer's standard deviation on the utility
                difference is ``π s / √3``.
            seed: Seed of the person's own generator.
        """
        self._check_utility("utility", utility)
        self.utility = utility
        self.scale = check_nonneg_float("scale", scale)
        super().__init__(seed)

    def _answer(self, X: Tensor) -> Tensor:
        u = self._utilities(self.utility, X)  # batch_shape x 2
        if self.scale > 0:
            uni = torch.rand(u.shape, generator=self._generator, dtype=torch.float64)
            gumbel = -torch.log(-torch.log(uni.clamp(1e-300, 1.0 - 1e-16)))
            u = u + self.scale * gumbel.to(u)
        return (u[..., 1] > u[..., 0]).long()


class IndifferentPerson(BasePerson):
    r"""A probit person who says "no noticeable difference" below δ.

    The perceived difference ``D = u(x₂) - u(x₁) + √2 σ ε`` is compared with
    the just-noticeable difference δ: ``D > δ`` → ``1``, ``D < -δ`` → ``0``,
    otherwise :data:`INDIFFERENT` (``-1``).
    """

    def __init__(
        self,
        utility: Callable[[Tensor], Tensor],
        noise_std: float = 0.1,
        threshold: float = 0.1,
        seed: int = 0,
    ) -> None:
        r"""
        Args:
            utility: Maps ``batch_shape x d`` designs to ``batch_shape``
                utilities.
            noise_std: σ, the probit noise on each option's utility.
            threshold: δ, the just-noticeable difference (``>= 0``).
            seed: Seed of the person's own generator.
        """
        self._check_utility("utility", utility)
        self.utility = utility
        self.noise_std = check_nonneg_float("noise_std", noise_std)
        self.threshold = check_nonneg_float("threshold", threshold)
        super().__init__(seed)

    def _answer(self, X: Tensor) -> Tensor:
        u = self._utilities(self.utility, X)  # batch_shape x 2
        if self.noise_std > 0:
            u = u + self.noise_std * self._randn(u.shape, u)
        d = u[..., 1] - u[..., 0]  # batch_shape
        out = torch.full(d.shape, INDIFFERENT, dtype=torch.long, device=X.device)
        out[d > self.threshold] = 1
        out[d < -self.threshold] = 0
        return out


class ParetoPerson(BasePerson):
    r"""A person judging several criteria who only answers clear-cut questions.

    Each criterion's utility is perceived with independent probit noise; the
    person prefers an option that is better on *every* criterion and answers
    :data:`CONFLICT` (``-2``) when each option wins on some criterion.
    """

    def __init__(
        self,
        utilities: Sequence[Callable[[Tensor], Tensor]],
        noise_std: float = 0.1,
        seed: int = 0,
    ) -> None:
        r"""
        Args:
            utilities: ``K >= 1`` callables, each mapping ``batch_shape x d``
                designs to ``batch_shape`` utilities of one criterion.
            noise_std: σ, the probit noise on each option's utility for each
                criterion (independent across criteria).
            seed: Seed of the person's own generator.
        """
        utilities = list(utilities) if isinstance(utilities, Sequence) else None
        if not utilities:
            raise InputDataError(
                "utilities must be a non-empty sequence of callables (one per "
                f"criterion); got {utilities!r}."
            )
        for k, f in enumerate(utilities):
            self._check_utility(f"utilities[{k}]", f)
        self.utilities = utilities
        self.noise_std = check_nonneg_float("noise_std", noise_std)
        super().__init__(seed)

    def _answer(self, X: Tensor) -> Tensor:
        U = torch.stack([self._utilities(f, X) for f in self.utilities])  # K x b x 2
        if self.noise_std > 0:
            U = U + self.noise_std * self._randn(U.shape, U)
        d = U[..., 1] - U[..., 0]  # K x batch_shape
        out = torch.full(d.shape[1:], CONFLICT, dtype=torch.long, device=X.device)
        out[(d <= 0).all(0) & (d < 0).any(0)] = 0  # the first dominates
        out[(d >= 0).all(0) & (d > 0).any(0)] = 1  # the second dominates
        return out
