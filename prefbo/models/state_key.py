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
    r"""Value snapshots of small tensors that compare equal to identical ones.

    On the CPU each pair is compared with ``torch.equal``; the tensors on an
    accelerator are compared on the device and read back once, so that a
    comparison costs one host synchronisation however many tensors it holds.
    """

    __slots__ = ("values",)

    def __init__(self, tensors: Iterable[Tensor]) -> None:
        self.values = tuple(t.detach().clone() for t in tensors)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Snapshot) or len(self.values) != len(other.values):
            return False
        on_device: dict[torch.device, list[Tensor]] = {}
        for a, b in zip(self.values, other.values, strict=True):
            if (a.shape, a.dtype, a.device) != (b.shape, b.dtype, b.device):
                return False
            if a.device.type == "cpu":
                if not torch.equal(a, b):
                    return False
            else:
                on_device.setdefault(a.device, []).append((a == b).all())
        return all(bool(torch.stack(flags).all()) for flags in on_device.values())

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
    small: list[Tensor] = []
    key: list = []
    for t in tensors:
        if t.numel() <= SNAPSHOT_NUMEL:
            small.append(t)
        else:
            key.append((id(t), t._version, t.data_ptr()))
    key += [
        _Snapshot(small),
        (id(datapoints), datapoints._version),
        (id(comparisons), comparisons._version),
        type(likelihood),
        likelihood.noise_std,
    ]
    return tuple(key)
