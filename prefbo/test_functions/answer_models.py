r"""More simulated people: logit answers, indifference, several criteria.

Each person, like :class:`~prefbo.test_functions.people.SimulatedPerson`, holds
known utilities and its own seeded ``torch.Generator``, and answers a
``batch_shape x 2 x d`` batch of questions with :meth:`compare_batch` (one
question with :meth:`compare`). Besides ``0`` (first option preferred) and
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

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.test_functions.people import check_nonneg, check_questions

INDIFFERENT = -1
CONFLICT = -2


def _utilities(utility: Callable[[Tensor], Tensor], X: Tensor) -> Tensor:
    r"""``utility(X)`` (``batch_shape x 2``), validated and detached."""
    u = utility(X)
    if not isinstance(u, Tensor) or u.shape != X.shape[:-1]:
        got = f"shape {tuple(u.shape)}" if isinstance(u, Tensor) else type(u).__name__
        raise InputDataError(
            f"utility must map X of shape {tuple(X.shape)} to shape "
            f"{tuple(X.shape[:-1])}; got {got}."
        )
    return u.detach()


def _check_callable(name: str, f: object) -> None:
    if not callable(f):
        raise InputTypeError(
            f"{name} must be callable (batch_shape x d -> batch_shape); got "
            f"{type(f).__name__}."
        )


class _Person(ABC):
    r"""Shared ``compare``; subclasses implement ``_answer`` on valid ``X``."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self._generator = torch.Generator(device="cpu").manual_seed(self.seed)
        self.num_answers = 0

    def _randn(self, shape: torch.Size, like: Tensor) -> Tensor:
        eps = torch.randn(shape, generator=self._generator, dtype=torch.float64)
        return eps.to(like)

    def compare_batch(self, X: Tensor) -> Tensor:
        r"""Answer a batch of questions.

        Args:
            X: A ``batch_shape x 2 x d`` floating tensor; ``X[..., 0, :]`` and
                ``X[..., 1, :]`` are the two options of each question.

        Returns:
            A ``batch_shape`` long tensor on ``X``'s device: ``0`` (first
            preferred), ``1`` (second) or the person's special answer.
        """
        check_questions(X)
        answers = self._answer(X)
        self.num_answers += math.prod(X.shape[:-2])
        return answers

    @abstractmethod
    def _answer(self, X: Tensor) -> Tensor:
        r"""Answers to ``batch_shape x 2 x d`` questions (``batch_shape`` long)."""

    def compare(self, x1: Tensor, x2: Tensor) -> int:
        r"""Answer one question.

        Args:
            x1: A ``d`` tensor, the first option.
            x2: A ``d`` tensor, the second option.

        Returns:
            ``0`` if ``x1`` is preferred, ``1`` if ``x2`` is, else the
            person's special answer.
        """
        for name, x in (("x1", x1), ("x2", x2)):
            if not isinstance(x, Tensor) or x.ndim != 1:
                got = (
                    f"shape {tuple(x.shape)}"
                    if isinstance(x, Tensor)
                    else (type(x).__name__)
                )
                raise InputDataError(
                    f"{name} must be a 1-d tensor of d features; got {got}."
                )
        if x1.shape != x2.shape:
            raise InputDataError(
                f"x1 and x2 must have the same shape; got {tuple(x1.shape)} and "
                f"{tuple(x2.shape)}."
            )
        return int(self.compare_batch(torch.stack([x1, x2]).unsqueeze(0))[0])


class LogitPerson(_Person):
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
        _check_callable("utility", utility)
        self.utility = utility
        self.scale = check_nonneg("scale", scale)
        super().__init__(seed)

    def _answer(self, X: Tensor) -> Tensor:
        u = _utilities(self.utility, X)  # batch_shape x 2
        if self.scale > 0:
            uni = torch.rand(u.shape, generator=self._generator, dtype=torch.float64)
            gumbel = -torch.log(-torch.log(uni.clamp(1e-300, 1.0 - 1e-16)))
            u = u + self.scale * gumbel.to(u)
        return (u[..., 1] > u[..., 0]).long()


class IndifferentPerson(_Person):
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
        _check_callable("utility", utility)
        self.utility = utility
        self.noise_std = check_nonneg("noise_std", noise_std)
        self.threshold = check_nonneg("threshold", threshold)
        super().__init__(seed)

    def _answer(self, X: Tensor) -> Tensor:
        u = _utilities(self.utility, X)  # batch_shape x 2
        if self.noise_std > 0:
            u = u + self.noise_std * self._randn(u.shape, u)
        d = u[..., 1] - u[..., 0]  # batch_shape
        out = torch.full(d.shape, INDIFFERENT, dtype=torch.long, device=X.device)
        out[d > self.threshold] = 1
        out[d < -self.threshold] = 0
        return out


class ParetoPerson(_Person):
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
            _check_callable(f"utilities[{k}]", f)
        self.utilities = utilities
        self.noise_std = check_nonneg("noise_std", noise_std)
        super().__init__(seed)

    def _answer(self, X: Tensor) -> Tensor:
        U = torch.stack([_utilities(f, X) for f in self.utilities])  # K x b x 2
        if self.noise_std > 0:
            U = U + self.noise_std * self._randn(U.shape, U)
        d = U[..., 1] - U[..., 0]  # K x batch_shape
        out = torch.full(d.shape[1:], CONFLICT, dtype=torch.long, device=X.device)
        out[(d <= 0).all(0) & (d < 0).any(0)] = 0  # the first dominates
        out[(d >= 0).all(0) & (d > 0).any(0)] = 1  # the second dominates
        return out
