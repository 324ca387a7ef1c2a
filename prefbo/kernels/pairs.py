r"""Kernels on pairs of designs.

Preference learning as GP classification: an input is a pair ``[x, y]`` (the
two designs' ``d`` features concatenated, ``2d`` in all) and the latent
``h(x, y)`` says how much ``x`` is preferred to ``y``; a classification
likelihood on ``h`` (e.g. ``BernoulliLikelihood``) with label 1 for "``x``
wins" completes the model.

- :class:`PreferenceKernel` (Houlsby et al., 2011):
  ``k([x,y],[x',y']) = k(x,x') + k(y,y') − k(x,y') − k(y,x')``, the
  covariance of ``g(x) − g(y)`` for ``g ~ GP(0, k)``: preferences through a
  utility, hence transitive.
- :class:`NonTransitivePreferenceKernel` (Pahikkala et al., 2010; Chau et
  al., 2022): ``k(x,x')k(y,y') − k(x,y')k(y,x')``, skew-symmetric
  (``h(y, x) = −h(x, y)``) but not transitive: half the covariance of
  ``g₁(x)g₂(y) − g₁(y)g₂(x)`` for independent ``g₁, g₂ ~ GP(0, k)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from gpytorch.kernels import Kernel
from linear_operator import to_dense
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError


def concatenate_pairs(datapoints: Tensor, pairs: Tensor) -> Tensor:
    r"""Pair inputs ``[x_i, x_j]`` for the kernels of this module.

    Args:
        datapoints: A ``batch_shape x n x d`` tensor of designs.
        pairs: An ``m x 2`` long tensor of ``[i, j]`` rows.

    Returns:
        A ``batch_shape x m x 2d`` tensor.
    """
    return torch.cat(
        [datapoints[..., pairs[:, 0], :], datapoints[..., pairs[:, 1], :]], dim=-1
    )


class _PairKernel(Kernel, ABC):
    r"""Base of kernels on ``[x, y]`` pairs wrapping a kernel on designs."""

    is_stationary = False

    def __init__(self, base_kernel: Kernel, **kwargs: object) -> None:
        r"""
        Args:
            base_kernel: The kernel ``k`` on single designs (``d`` features);
                its hyperparameters are this kernel's.
            **kwargs: Passed to GPyTorch's ``Kernel``.
        """
        if not isinstance(base_kernel, Kernel):
            raise InputTypeError(
                "base_kernel must be a gpytorch Kernel; got "
                f"{type(base_kernel).__name__}."
            )
        kwargs.setdefault("batch_shape", base_kernel.batch_shape)
        super().__init__(**kwargs)
        self.base_kernel = base_kernel

    @staticmethod
    def _split(x: Tensor, name: str) -> tuple[Tensor, Tensor]:
        width = x.shape[-1]
        if width % 2:
            raise InputDataError(
                f"{name} must hold pairs [x, y] of 2d features (an even number of "
                f"columns); got {width} columns."
            )
        return x[..., : width // 2], x[..., width // 2 :]

    def _blocks(
        self, x1: Tensor, x2: Tensor, diag: bool, params: dict
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""Base-kernel blocks ``k(a,a'), k(b,b'), k(a,b'), k(b,a')``.

        With ``x1 = [a, b]`` and ``x2 = [a', b']``.
        """
        a1, b1 = self._split(x1, "x1")
        a2, b2 = self._split(x2, "x2")
        if diag:
            k = self.base_kernel
            return tuple(
                to_dense(k(u, v, diag=True, **params))
                for u, v in ((a1, a2), (b1, b2), (a1, b2), (b1, a2))
            )
        n, m = x1.shape[-2], x2.shape[-2]
        both = to_dense(
            self.base_kernel(torch.cat([a1, b1], -2), torch.cat([a2, b2], -2), **params)
        )  # batch x 2n x 2m
        return (
            both[..., :n, :m],
            both[..., n:, m:],
            both[..., :n, m:],
            both[..., n:, :m],
        )

    @abstractmethod
    def _combine(self, kaa: Tensor, kbb: Tensor, kab: Tensor, kba: Tensor) -> Tensor:
        r"""The pair kernel from the four base-kernel blocks."""

    def forward(
        self,
        x1: Tensor,
        x2: Tensor,
        diag: bool = False,
        last_dim_is_batch: bool = False,
        **params: object,
    ) -> Tensor:
        r"""Kernel between pairs.

        Args:
            x1: A ``batch_shape x n x 2d`` tensor of pairs ``[x, y]``.
            x2: A ``batch_shape x m x 2d`` tensor of pairs.
            diag: Return only the diagonal (``n = m``).
            last_dim_is_batch: Not supported (deprecated in GPyTorch).
            **params: Passed to the base kernel.

        Returns:
            A ``batch_shape x n x m`` tensor (``batch_shape x n`` if ``diag``).
        """
        if last_dim_is_batch:
            raise UnsupportedError(
                f"{type(self).__name__} does not support last_dim_is_batch=True."
            )
        return self._combine(*self._blocks(x1, x2, diag, params))


class PreferenceKernel(_PairKernel):
    r"""Transitive preference kernel ``k(x,x') + k(y,y') − k(x,y') − k(y,x')``.

    The covariance of ``g(x) − g(y)`` for ``g ~ GP(0, base_kernel)``.
    """

    def _combine(self, kaa: Tensor, kbb: Tensor, kab: Tensor, kba: Tensor) -> Tensor:
        return kaa + kbb - kab - kba


class NonTransitivePreferenceKernel(_PairKernel):
    r"""Skew-symmetric kernel ``k(x,x')k(y,y') − k(x,y')k(y,x')``.

    Swapping a pair negates its row: ``k([y,x], ·) = −k([x,y], ·)``; the
    kernel is PSD (half the covariance of ``g₁(x)g₂(y) − g₁(y)g₂(x)``) and
    admits non-transitive (cyclic) preferences.
    """

    def _combine(self, kaa: Tensor, kbb: Tensor, kab: Tensor, kba: Tensor) -> Tensor:
        return kaa * kbb - kab * kba
