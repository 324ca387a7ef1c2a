r"""Simulated people who answer "which of these two do you prefer?".

A :class:`SimulatedPerson` holds a utility ``u`` and answers with probit noise
(Thurstone's case V): each time it is asked, it perceives
``u(x) + σ·ε`` for each option with independent ``ε ~ N(0, 1)`` and picks the
larger, so it prefers ``x1`` to ``x2`` with probability
``Φ((u(x1) - u(x2)) / (√2·σ))`` — the answer model of a probit
:class:`~prefbo.likelihoods.PairwiseProbitLikelihood` with ``noise_std=σ``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError


def check_nonneg(name: str, value: float) -> float:
    r"""``value`` as a float, or a typed error unless it is finite and ``>= 0``."""
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise InputDataError(f"{name} must be finite and >= 0; got {value}.")
    return value


def check_questions(X: Tensor) -> None:
    r"""Typed errors unless ``X`` is a floating ``batch_shape x 2 x d`` tensor."""
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


class SimulatedPerson:
    r"""A person with a known utility who answers pairwise questions noisily.

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
        if not callable(utility):
            raise InputTypeError(
                f"utility must be callable (batch_shape x d -> batch_shape); got "
                f"{type(utility).__name__}."
            )
        noise_std = check_nonneg("noise_std", noise_std)
        self.utility = utility
        self.noise_std = noise_std
        self.seed = int(seed)
        self._generator = torch.Generator(device="cpu").manual_seed(self.seed)
        self.num_answers = 0

    def compare_batch(self, X: Tensor) -> Tensor:
        r"""Answer a batch of questions.

        Args:
            X: A ``batch_shape x 2 x d`` floating tensor; ``X[..., 0, :]`` and
                ``X[..., 1, :]`` are the two options of each question.

        Returns:
            A ``batch_shape`` long tensor (on ``X``'s device): ``0`` where the
            first option is preferred, ``1`` where the second is.
        """
        check_questions(X)
        u = self.utility(X)
        if not isinstance(u, Tensor) or u.shape != X.shape[:-1]:
            raise InputDataError(
                f"utility must map X of shape {tuple(X.shape)} to shape "
                f"{tuple(X.shape[:-1])}; got "
                + (
                    f"shape {tuple(u.shape)}."
                    if isinstance(u, Tensor)
                    else f"{type(u).__name__}."
                )
            )
        u = u.detach()
        if self.noise_std > 0:
            eps = torch.randn(
                u.shape, generator=self._generator, dtype=torch.float64
            ).to(u)
            u = u + self.noise_std * eps
        self.num_answers += math.prod(u.shape[:-1])
        return (u[..., 1] > u[..., 0]).long()

    def compare(self, x1: Tensor, x2: Tensor) -> int:
        r"""Answer one question.

        Args:
            x1: A ``d`` tensor, the first option.
            x2: A ``d`` tensor, the second option.

        Returns:
            ``0`` if ``x1`` is preferred, ``1`` if ``x2`` is.
        """
        for name, x in (("x1", x1), ("x2", x2)):
            if not isinstance(x, Tensor) or x.ndim != 1:
                raise InputDataError(
                    f"{name} must be a 1-d tensor of d features; got "
                    + (
                        f"shape {tuple(x.shape)}."
                        if isinstance(x, Tensor)
                        else f"{type(x).__name__}."
                    )
                )
        if x1.shape != x2.shape:
            raise InputDataError(
                f"x1 and x2 must have the same shape; got {tuple(x1.shape)} and "
                f"{tuple(x2.shape)}."
            )
        return int(self.compare_batch(torch.stack([x1, x2]).unsqueeze(0))[0])
