r"""What a pairwise model's cached approximation depends on.

A model keeps its Gaussian approximation until the data, a hyperparameter or
the likelihood changes. :func:`state_key` builds a key that compares equal
exactly when none of them did. Hyperparameters are compared by value (small
tensors are snapshotted), since GPyTorch's setters write through ``.data``
without bumping the tensors' version counters; large tensors and the data by
identity and version counter.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

import torch
from torch import Tensor
from torch.nn import Module

from prefbo.likelihoods.pairwise import PairwiseLikelihood

SNAPSHOT_NUMEL = 4096  # tensors up to this size are compared by value


class _Snapshot:
    r"""A value snapshot of a small tensor that compares equal to an identical one."""

    __slots__ = ("value",)

    def __init__(self, t: Tensor) -> None:
        self.value = t.detach().clone()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Snapshot)
            and self.value.shape == other.value.shape
            and self.value.dtype == other.value.dtype
            and self.value.device == other.value.device
            and bool(torch.equal(self.value, other.value))
        )

    __hash__ = None


def state_key(
    modules: Iterable[Module],
    datapoints: Tensor,
    comparisons: Tensor,
    likelihood: PairwiseLikelihood,
) -> tuple:
    r"""A key of the approximation's inputs: the modules' parameters and
    buffers, the data and the likelihood.

    Args:
        modules: The modules whose tensors the approximation depends on (the
            kernel, the input transform).
        datapoints: ``batch_shape x n x d`` (consolidated) designs.
        comparisons: ``batch_shape x m x 2`` comparisons.
        likelihood: The likelihood (its type and ``noise_std``).

    Returns:
        A tuple that compares equal to an earlier key iff nothing changed.
    """
    tensors = chain.from_iterable(chain(m.parameters(), m.buffers()) for m in modules)
    key: list = []
    for t in tensors:
        if t.numel() <= SNAPSHOT_NUMEL:
            key.append(_Snapshot(t))
        else:
            key.append((id(t), t._version, t.data_ptr()))
    key += [
        (id(datapoints), datapoints._version),
        (id(comparisons), comparisons._version),
        type(likelihood),
        likelihood.noise_std,
    ]
    return tuple(key)
