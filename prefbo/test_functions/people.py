r"""Simulated people who answer "which of these two do you prefer?".

:class:`BasePerson` is what every simulated person shares: its own seeded
``torch.Generator`` (the same seed and the same questions give the same
answers, and torch's global RNG is never touched), the checks on a
``batch_shape x 2 x d`` batch of questions, :meth:`~BasePerson.compare_batch`
and :meth:`~BasePerson.compare`, and a count of answers. A subclass implements
:meth:`~BasePerson._answer`, its answer model.

:class:`SimulatedPerson` holds a utility ``u`` and answers with probit noise
(Thurstone's case V): each time it is asked, it perceives ``u(x) + σ·ε`` for
each option with independent ``ε ~ N(0, 1)`` and picks the larger, so it
prefers ``x1`` to ``x2`` with probability ``Φ((u(x1) - u(x2)) / (√2·σ))`` — the
answer model of a probit :class:`~prefbo.likelihoods.PairwiseProbitLikelihood`
with ``noise_std=σ``. Logit, indifferent and Pareto people are in
:mod:`prefbo.test_functions.answer_models`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.checks import check_nonneg_float, check_seed


class BasePerson(ABC):
    r"""A simulated person answering pairwise questions with its own generator.

    Answers are ``0`` (first option preferred), ``1`` (second) or a
    subclass's special answer (a negative integer).
    """

    def __init__(self, seed: int = 0) -> None:
        r"""
        Args:
            seed: Seed of the person's own ``torch.Generator``; the same seed
                and the same questions give the same answers.
        """
        self.seed = check_seed("seed", seed)
        self._generator = torch.Generator(device="cpu").manual_seed(self.seed)
        self.num_answers = 0

    @abstractmethod
    def _answer(self, X: Tensor) -> Tensor:
        r"""Answers to valid ``batch_shape x 2 x d`` questions.

        Args:
            X: A ``batch_shape x 2 x d`` floating tensor (already checked).

        Returns:
            A ``batch_shape`` long tensor on ``X``'s device.
        """

    def compare_batch(self, X: Tensor) -> Tensor:
        r"""Answer a batch of questions.

        Args:
            X: A ``batch_shape x 2 x d`` floating tensor; ``X[..., 0, :]`` and
                ``X[..., 1, :]`` are the two options of each question.

        Returns:
            A ``batch_shape`` long tensor on ``X``'s device: ``0`` where the
            first option is preferred, ``1`` where the second is, else the
            person's special answer.
        """
        if not isinstance(X, Tensor) or not X.is_floating_point():
            raise InputTypeError(
                "X must be a floating torch.Tensor of shape batch_shape x 2 x d; got "
                f"{type(X).__name__}"
                + (f" of dtype {X.dtype}" if isinstance(X, Tensor) else "")
                + "."
            )
        if X.ndim < 2 or X.shape[-2] != 2:
            raise InputDataError(
                "X must have shape batch_shape x 2 x d (two options per question); "
                f"got {tuple(X.shape)}."
            )
        answers = self._answer(X)
        self.num_answers += math.prod(X.shape[:-2])
        return answers

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
                    else type(x).__name__
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

    @staticmethod
    def _check_utility(name: str, utility: object) -> None:
        r"""Raise unless ``utility`` is callable (named ``name`` in the message)."""
        if not callable(utility):
            raise InputTypeError(
                f"{name} must be callable (batch_shape x d -> batch_shape); got "
                f"{type(utility).__name__}."
            )

    @staticmethod
    def _utilities(utility: Callable[[Tensor], Tensor], X: Tensor) -> Tensor:
        r"""``utility(X)``, checked to be ``batch_shape x 2`` and detached."""
        u = utility(X)
        if not isinstance(u, Tensor) or u.shape != X.shape[:-1]:
            got = (
                f"shape {tuple(u.shape)}" if isinstance(u, Tensor) else type(u).__name__
            )
            raise InputDataError(
                f"utility must map X of shape {tuple(X.shape)} to shape "
                f"{tuple(X.shape[:-1])}; got {got}."
            )
        return u.detach()

    def _randn(self, shape: torch.Size, like: Tensor) -> Tensor:
        r"""Standard normals of ``shape`` from the person's generator (drawn in
        float64 on the CPU, then cast to ``like``'s dtype and device)."""
        eps = torch.randn(shape, generator=self._generator, dtype=torch.float64)
        return eps.to(like)


class SimulatedPerson(BasePerson):
    r"""A person with a known utility who answers pairwise questions with probit
    noise (see the module docstring).

    Example:
        >>> person = SimulatedPerson(Branin(), noise_std=0.1, seed=0)
        >>> person.compare(torch.tensor([0.1, 0.8]), torch.tensor([0.5, 0.5]))
        0
    """

    def __init__(
        self,
        utility: Callable[[Tensor], Tensor],
        noise_std: float = 0.1,
        seed: int = 0,
    ) -> None:
        r"""
        Args:
            utility: A callable mapping ``batch_shape x d`` designs to
                ``batch_shape`` utilities, e.g. a
                :class:`~prefbo.test_functions.problems.UtilityProblem`.
            noise_std: σ, the standard deviation of the noise on each option's
                perceived utility (``0``: noiseless, always picks the higher
                utility; ties go to the first option).
            seed: Seed of the person's own ``torch.Generator``; the same seed
                and the same questions give the same answers.
        """
        self._check_utility("utility", utility)
        self.utility = utility
        self.noise_std = check_nonneg_float("noise_std", noise_std)
        super().__init__(seed)

    def _answer(self, X: Tensor) -> Tensor:
        u = self._utilities(self.utility, X)  # batch_shape x 2
        if self.noise_std > 0:
            u = u + self.noise_std * self._randn(u.shape, u)
        return (u[..., 1] > u[..., 0]).long()
