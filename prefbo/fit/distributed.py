r"""Data-parallel pieces of :func:`~prefbo.fit.fit_variational` (``distributed=True``).

The minibatch ELBO of :func:`~prefbo.fit.fit_variational` is a sum over
answers plus terms counted once,

``L_B = (N / |B|) · Σ_{k ∈ B} E_q[log p(answer_k | f)] − KL(q(u) ‖ p(u)) + log p(θ)``,

so with ``W`` processes (ranks) every global minibatch ``B`` is split into
``W`` disjoint shards ``B_r = {B[j] : j ≡ r (mod W)}`` (every ``W``-th answer
of the minibatch, starting at the ``r``-th) and rank ``r`` ascends

``L_B^{(r)} = (N / |B|) · Σ_{k ∈ B_r} E_q[log p(answer_k | f)]
− [r = 0] · (KL(q(u) ‖ p(u)) − log p(θ))``,

``Σ_r L_B^{(r)} = L_B`` and ``Σ_r ∇L_B^{(r)} = ∇L_B``: an all-reduce (sum)
of the gradients of the optimised parameters before each Adam step gives
every rank the single-process gradient (up to the order of floating-point
summation), and since every rank starts from rank 0's parameters and applies
the same Adam step to the same gradient, the replicas stay identical without
ever being re-synchronised. The global minibatches are the single-process
ones: every rank draws the same permutation of the answers from the shared
seed (:class:`ShardedAnswerLoader`), so ``W`` processes follow the
one-process ELBO trajectory of the same seed, to rounding.

This is a manual all-reduce rather than ``DistributedDataParallel``: the
objective is not one ``forward()`` call, the KL term belongs to one rank
only, and a shard may be empty (a last minibatch with fewer answers than
ranks), none of which DDP's hooks expect. The gradients, a flag per
parameter (whether any rank produced a gradient, so that a parameter no rank
touched keeps ``grad = None`` and Adam skips it exactly as in one process)
and the minibatch's ELBO go through a single coalesced all-reduce per step
and per ``(device, dtype)``.

Backends: any ``torch.distributed`` backend with ``SUM``/``MAX`` all-reduce
and broadcast; ``gloo`` for CPU tensors (tested, 2 processes), ``nccl`` for
CUDA tensors (then each process must own its device:
``torch.cuda.set_device(local_rank)`` and the model and data on it before
calling :func:`~prefbo.fit.fit_variational`). The collectives run on the
device of the model's parameters.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from prefbo.data.minibatch import AnswerLoader, Minibatch, PreferenceData
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError

try:  # torch may be built without torch.distributed
    import torch.distributed as dist
except ImportError:  # pragma: no cover
    dist = None  # type: ignore[assignment]


@dataclass(frozen=True)
class DistributedContext:
    r"""The process group a data-parallel fit runs in.

    Attributes:
        group: The ``torch.distributed`` process group (``None``: the default
            group).
        rank: This process's rank in ``group``.
        world_size: ``W``, the number of processes in ``group``.
    """

    group: Any
    rank: int
    world_size: int


def resolve_context(
    distributed: object, process_group: object
) -> DistributedContext | None:
    r"""Validate ``distributed`` / ``process_group`` and find this rank.

    Args:
        distributed: ``fit_variational``'s ``distributed`` argument.
        process_group: ``fit_variational``'s ``process_group`` argument.

    Returns:
        ``None`` for a single-process fit, else the context.

    Raises:
        InputTypeError: ``distributed`` is not a bool.
        InputDataError: ``process_group`` without ``distributed=True``.
        UnsupportedError: ``distributed=True`` without an initialised process
            group (or a torch built without ``torch.distributed``).
    """
    if not isinstance(distributed, bool):
        raise InputTypeError(
            f"distributed must be a bool; got {type(distributed).__name__}."
        )
    if not distributed:
        if process_group is not None:
            raise InputDataError(
                "process_group is only used with distributed=True; got a "
                "process_group with distributed=False."
            )
        return None
    if dist is None or not dist.is_available():
        raise UnsupportedError(
            "distributed=True needs torch.distributed; got a torch built without "
            "it (torch.distributed.is_available() is False)."
        )
    if not dist.is_initialized():
        raise UnsupportedError(
            "distributed=True needs an initialised torch.distributed process group "
            "(call torch.distributed.init_process_group, e.g. in a script launched "
            "with torchrun); got torch.distributed.is_initialized() == False."
        )
    rank = dist.get_rank(process_group)
    if rank < 0:
        raise InputDataError(
            "process_group must contain this process; got a group without it "
            "(torch.distributed.get_rank(process_group) == -1)."
        )
    return DistributedContext(process_group, rank, dist.get_world_size(process_group))


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def agree_on_seed(
    seed: int | None, model: torch.nn.Module, ctx: DistributedContext
) -> int:
    r"""The minibatch seed, the same on every rank.

    Args:
        seed: The caller's seed; ``None`` draws one on rank 0 from torch's
            global RNG and broadcasts it.
        model: The model (its parameters' device hosts the collective).
        ctx: The process group.

    Returns:
        The seed.
    """
    if seed is not None:
        return seed
    value = torch.zeros((), dtype=torch.int64, device=_device(model))
    if ctx.rank == 0:
        value.fill_(int(torch.randint(0, 2**62, ())))
    dist.broadcast(value, group=ctx.group, group_src=0)
    return int(value)


def check_replicas(
    model: torch.nn.Module,
    params: Sequence[Tensor],
    ctx: DistributedContext,
    **settings: int,
) -> None:
    r"""Raise on every rank alike if the ranks' models or settings differ.

    Compares, by one ``MAX`` all-reduce of ``(v, −v)``, the number and total
    size of the optimised parameters, of all parameters and of the buffers,
    and the integer ``settings`` (number of answers, batch size, seed, ...):
    every rank sees the same maxima and minima, so every rank raises or none
    does (a raise on one rank alone would leave the others waiting in a
    collective).

    Raises:
        InputDataError: Some entry differs between ranks.
    """
    entries = {
        "number of optimised parameters": len(params),
        "size of the optimised parameters": sum(p.numel() for p in params),
        "number of parameters": len(list(model.parameters())),
        "size of the parameters": sum(p.numel() for p in model.parameters()),
        "size of the buffers": sum(b.numel() for b in model.buffers()),
        **settings,
    }
    # wrapped into int64 (a torch seed may be any integer in [-2^63, 2^64))
    values = torch.tensor(
        [(int(v) + 2**63) % 2**64 - 2**63 for v in entries.values()],
        dtype=torch.int64,
    )
    both = torch.cat([values, -values]).to(_device(model))
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=ctx.group)
    both = both.cpu()
    high, low = both[: len(entries)], -both[len(entries) :]
    differ = [
        f"{name} (from {int(lo)} to {int(hi)})"
        for name, hi, lo in zip(entries, high, low)
        if hi != lo
    ]
    if differ:
        raise InputDataError(
            "distributed=True needs the same model, data and settings on every "
            f"rank; got ranks that differ in: {', '.join(differ)}."
        )


def broadcast_module(model: torch.nn.Module, ctx: DistributedContext) -> None:
    r"""Copy rank 0's parameters and buffers into every rank's ``model``, in place."""
    with torch.no_grad():
        for tensor in (*model.parameters(), *model.buffers()):
            if tensor.numel() == 0:
                continue
            if tensor.is_contiguous() and tensor.dtype != torch.bool:
                dist.broadcast(tensor.detach(), group=ctx.group, group_src=0)
            else:  # a contiguous copy (bool as uint8: not every backend has bool)
                wire = torch.uint8 if tensor.dtype == torch.bool else tensor.dtype
                buffer = tensor.detach().to(wire, copy=True).contiguous()
                dist.broadcast(buffer, group=ctx.group, group_src=0)
                tensor.copy_(buffer.to(tensor.dtype))


def all_reduce_sum(tensors: Sequence[Tensor], ctx: DistributedContext) -> list[Tensor]:
    r"""Sum each tensor over the ranks, one all-reduce per ``(device, dtype)``.

    Args:
        tensors: Tensors of any shapes (each the same shape on every rank).
        ctx: The process group.

    Returns:
        New tensors, the sums, in the order of ``tensors``.
    """
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    out: list[Tensor | None] = [None] * len(tensors)
    for indices in groups.values():
        flat = torch.cat([tensors[i].detach().reshape(-1) for i in indices])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=ctx.group)
        for i, piece in zip(indices, flat.split([tensors[i].numel() for i in indices])):
            out[i] = piece.view_as(tensors[i])
    return out  # type: ignore[return-value]


def all_reduce_gradients(
    params: Sequence[Tensor], stats: Tensor, ctx: DistributedContext
) -> Tensor:
    r"""Replace each parameter's ``grad`` by its sum over the ranks.

    A parameter that no rank produced a gradient for keeps ``grad = None``
    (Adam skips it, as in one process); one that some ranks did gets the sum
    of theirs (the others contributed nothing).

    Args:
        params: The optimised parameters, in the same order on every rank.
        stats: A tensor of per-rank values to sum in the same all-reduce
            (e.g. the shard's ELBO).

    Returns:
        ``stats`` summed over the ranks.
    """
    grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in params]
    present = torch.tensor(
        [p.grad is not None for p in params], dtype=stats.dtype, device=stats.device
    )
    *summed, present, stats = all_reduce_sum([*grads, present, stats], ctx)
    for p, grad, flag in zip(params, summed, present.tolist()):
        p.grad = grad if flag > 0 else None
    return stats


class ShardedAnswerLoader(AnswerLoader):
    r"""This rank's shards of the single-process minibatches.

    Every rank draws the permutation of :class:`~prefbo.data.AnswerLoader`
    (same generator state, same ``torch.randperm`` call, so the same global
    minibatches ``B`` as one process with that seed) and yields, per global
    minibatch, the answers ``B[j]`` with ``j ≡ rank (mod world_size)`` as a
    :class:`~prefbo.data.minibatch.Minibatch` whose ``scale`` is the
    *global* ``num_answers / |B|``, or ``None`` when the shard is empty.
    ``len()`` is the number of global minibatches, identical on every rank.

    Each rank reads only the answers of its shards and ``select`` gathers only
    the designs they touch, but every rank holds the whole data container.
    """

    def __init__(
        self,
        data: PreferenceData,
        batch_size: int,
        *,
        rank: int,
        world_size: int,
        generator: torch.Generator | None = None,
    ) -> None:
        r"""
        Args:
            data: The full data (the same on every rank).
            batch_size: Answers per *global* minibatch.
            rank: This rank, in ``[0, world_size)``.
            world_size: The number of ranks.
            generator: A CPU ``torch.Generator`` seeded alike on every rank.
        """
        super().__init__(data, batch_size, shuffle=True, generator=generator)
        if not 0 <= rank < world_size:
            raise InputDataError(
                f"rank must be in [0, world_size={world_size}); got {rank}."
            )
        self.rank = rank
        self.world_size = world_size

    def __iter__(self) -> Iterator[Minibatch | None]:  # type: ignore[override]
        total = self.data.num_answers
        order = torch.randperm(total, generator=self.generator)
        device = self.data.answers[0].device
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            rows = order[start : start + self.batch_size]
            shard = rows[self.rank :: self.world_size].to(device)
            if shard.numel() == 0:
                yield None
                continue
            sub, design_index, answer_index = self.data.select(shard)
            yield Minibatch(sub, design_index, answer_index, total / rows.shape[0])
