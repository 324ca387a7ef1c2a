r"""A cache of what depends on a comparisons tensor alone.

Newton's method and EP rebuild the weighted comparison Laplacian
``W = Dᵀ diag(ω) D`` at every step with new weights ``ω`` but the same
comparisons, and so does every evidence gradient of a hyperparameter fit. The
positions of ``W``'s entries and its sparse pattern depend on the comparisons
only: :func:`cached_for` builds them once per comparisons tensor.

What it keys on:

- the comparisons tensor itself, by identity (the base tensor of a view),
  held weakly: an entry goes when its tensor is freed;
- the tensor's version counter: an in-place edit drops every entry of the
  tensor;
- per entry, what is built (the caller's ``what``, e.g. ``("index", n)``) and
  the view's shape, strides, storage offset and data pointer, so that views
  of one base do not share entries.

How it is bounded: a tensor's table is emptied at the next lookup once it
holds more than 16 entries, and the tables of freed tensors go with them.

On the CPU a hit is also checked against a copy of the comparisons (cheap
there), which catches writes that bypass the version counter
(``.data`` assignments, edits through NumPy). On accelerators that check
would synchronise the device at every Newton step, so there the version
counter is trusted: replace comparisons rather than writing into their storage
behind autograd's back. Inference tensors (no version counter) are never
cached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

T = TypeVar("T")

MAX_ENTRIES = 16  # per comparisons tensor: more empties its table

# comparisons tensor (a view's base) -> (version, {key: (snapshot, value)})
COMPARISON_CACHE: WeakIdKeyDictionary = WeakIdKeyDictionary()


def cached_for(comparisons: Tensor, what: Any, build: Callable[[], T]) -> T:
    r"""``build()``, cached per comparisons tensor and ``what``.

    Args:
        comparisons: ``batch_shape x m x 2`` long ``[w, l]`` rows that the
            value depends on (and nothing else but ``what``).
        what: A hashable description of the value (e.g. ``("index", n)``).
        build: Computes the value.

    Returns:
        The cached value, or ``build()``'s, stored for the next call.
    """
    if comparisons.is_inference():  # no version counter to key on
        return build()
    base = comparisons if comparisons._base is None else comparisons._base
    version = comparisons._version
    key = (
        what,
        tuple(comparisons.shape),
        comparisons.stride(),
        comparisons.storage_offset(),
        comparisons.data_ptr(),
    )
    entry = COMPARISON_CACHE.get(base)
    if entry is None or entry[0] != version or len(entry[1]) > MAX_ENTRIES:
        entry = COMPARISON_CACHE[base] = (version, {})
    values = entry[1]
    on_cpu = comparisons.device.type == "cpu"
    hit = values.get(key)
    if hit is not None and (not on_cpu or torch.equal(hit[0], comparisons)):
        return hit[1]
    value = build()
    values[key] = (comparisons.clone() if on_cpu else None, value)
    return value
