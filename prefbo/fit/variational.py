r"""Minibatch ELBO training of :class:`~prefbo.models.VariationalPreferenceGP`.

Each step draws a minibatch of answers (:class:`~prefbo.data.AnswerLoader`),
evaluates ``q(f)`` at the designs the minibatch touches (the joint marginal
of each answer's latents, :meth:`VariationalPreferenceGP.answer_moments`),
and ascends the unbiased ELBO estimate

``(total / batch) · Σ_{k ∈ batch} E_q[log p(answer_k | f)] − KL(q(u) ‖ p(u))``

plus the log prior of the hyperparameters (MAP for the kernel, as GPyTorch's
``VariationalELBO`` does), with Adam, jointly over ``q(u)``, the inducing
locations (if learned), the kernel and the likelihood's parameters. Memory
is that of one minibatch (``O(M·u + b·p²)`` for ``u`` touched designs and
``b`` answers of ``p`` latents each) plus the data and one permutation of
the answer indices per epoch; nothing else grows with the number of answers.

With ``distributed=True`` the same fit runs data-parallel over the processes
of a ``torch.distributed`` process group (launched e.g. with ``torchrun``):
each rank evaluates its shard of every minibatch and the gradients are
summed over the ranks before each step, so ``W`` processes follow the
one-process ELBO trajectory of the same seed (:mod:`prefbo.fit.distributed`;
a launcher: :mod:`prefbo.fit.distributed_example`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from tqdm import tqdm

from prefbo.data.minibatch import AnswerLoader, PreferenceData
from prefbo.exceptions import InputTypeError
from prefbo.fit.distributed import (
    DistributedContext,
    ShardedAnswerLoader,
    agree_on_seed,
    broadcast_module,
    check_replicas,
    resolve_context,
)
from prefbo.fit.epoch import log_prior as log_prior
from prefbo.fit.epoch import run_epoch
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.utils.checks import (
    check_float,
    check_int,
    check_nonneg_float,
    check_positive_float,
    check_seed,
)

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

ProgressCallback = Callable[[int, dict], None]


@dataclass
class VariationalFitResult:
    r"""What :func:`fit_variational` did, epoch by epoch.

    Attributes:
        elbo: Per epoch, the mean of its minibatch ELBO estimates (nats,
            summed over all answers; without the hyperparameter log prior).
            In a distributed fit, the sum over the ranks (the same on every
            rank).
        seconds: Per epoch, the wall-clock time (this rank's).
        best_epoch: The epoch (0-based) with the highest ``elbo``.
        stopped_early: Whether early stopping ended the run.
        world_size: The number of processes that fit (1 unless
            ``distributed=True``).
    """

    elbo: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    best_epoch: int = 0
    stopped_early: bool = False
    world_size: int = 1

    @property
    def num_epochs(self) -> int:
        r"""Epochs run."""
        return len(self.elbo)


def _check_args(
    model: object,
    batch_size: object,
    epochs: object,
    lr: object,
    final_lr: object,
    early_stopping_patience: object,
    min_delta: object,
    seed: object,
    progress: object,
) -> tuple[int, int, float, float | None, int | None, float, int | None]:
    r"""Check :func:`fit_variational`'s arguments.

    Returns:
        ``(batch_size, epochs, lr, final_lr, early_stopping_patience,
        min_delta, seed)`` as plain ``int`` / ``float`` (or ``None``).
    """
    if not isinstance(model, VariationalPreferenceGP):
        raise InputTypeError(
            f"model must be a VariationalPreferenceGP; got {type(model).__name__}."
        )
    batch_size = check_int("batch_size", batch_size, 1)
    epochs = check_int("epochs", epochs, 1)
    lr = check_positive_float("lr", lr)
    final_lr = check_float(
        "final_lr",
        final_lr,
        minimum=0,
        maximum=lr,
        open_minimum=True,
        allow_none=True,
    )
    early_stopping_patience = check_int(
        "early_stopping_patience", early_stopping_patience, 1, allow_none=True
    )
    min_delta = check_nonneg_float("min_delta", min_delta)
    seed = check_seed("seed", seed, allow_none=True)
    if not isinstance(progress, bool) and not callable(progress):
        raise InputTypeError(
            "progress must be a bool or a callable (epoch, info) -> None; got "
            f"{type(progress).__name__}."
        )
    return batch_size, epochs, lr, final_lr, early_stopping_patience, min_delta, seed


def _report(
    progress: bool | ProgressCallback, bar: Any, epoch: int, info: dict
) -> None:
    if bar is not None:
        bar.set_postfix_str(
            f"ELBO/answer {info['elbo_per_answer']:.5f}, {info['seconds']:.2f} s/epoch",
            refresh=False,
        )
        bar.update(1)
    elif callable(progress):
        progress(epoch, info)


def fit_variational(
    model: VariationalPreferenceGP,
    data: PreferenceData | None = None,
    *,
    batch_size: int = 1024,
    epochs: int = 100,
    lr: float = 0.01,
    final_lr: float | None = None,
    early_stopping_patience: int | None = 10,
    min_delta: float = 1e-4,
    seed: int | None = None,
    progress: bool | ProgressCallback = False,
    learn_hyperparameters: bool = True,
    use_priors: bool = True,
    num_samples: int | None = None,
    distributed: bool = False,
    process_group: ProcessGroup | None = None,
) -> VariationalFitResult:
    r"""Fit a variational preference GP by minibatch ELBO ascent with Adam.

    Data-parallel training (``distributed=True``): call this on every rank of
    an initialised ``torch.distributed`` process group (e.g. a script run by
    ``torchrun --nproc_per_node=W``, which calls
    ``torch.distributed.init_process_group``), with the same model
    construction, data and arguments on every rank. Then

    * rank 0's parameters and buffers are broadcast to all ranks first
      (the replicas start identical; ``q(u)``, the inducing points and the
      hyperparameters are replicated, not sharded);
    * every rank draws the same permutation of the answers (from ``seed``;
      ``seed=None`` draws one on rank 0 and broadcasts it), so the global
      minibatches ``B`` are the single-process ones, and rank ``r``
      evaluates the answers ``B[j]`` with ``j ≡ r (mod W)`` only (the data
      are sharded by answers; each rank gathers only the designs its
      answers touch, but holds the whole data container in this version);
    * rank ``r`` back-propagates ``(N/|B|) Σ_{k ∈ B_r} E_q[log p(answer_k | f)]``
      minus, on rank 0 only, ``KL(q(u) ‖ p(u)) − log p(θ)``; the gradients
      are summed over the ranks (one all-reduce per step) and every rank
      takes the same Adam step. The ELBO estimates are summed likewise, so
      the reported trajectory, the non-finite check and early stopping are
      the same on every rank.

    The result: ``W`` processes follow the one-process ELBO trajectory and
    parameters of the same seed up to the order of floating-point summation
    (tested with 2 ``gloo`` processes on CPU in float64 to ``rtol=1e-6``).
    ``progress`` is reported on rank 0 only. Use ``gloo`` for CPU tensors,
    ``nccl`` for CUDA ones (each rank on its own device). An exception on
    one rank only (e.g. out of memory) leaves the others waiting in a
    collective, as with any ``torch.distributed`` program; a model or
    settings that differ between ranks are detected up front and raise on
    every rank. Launcher example: :mod:`prefbo.fit.distributed_example`.

    Args:
        model: The model; left in ``eval`` mode.
        data: Training data (attached to the model with ``set_data``);
            default the model's.
        batch_size: Answers per minibatch (``≥ num_answers``: full batch, a
            deterministic objective).
        epochs: Maximum number of passes over the answers.
        lr: Adam's (initial) learning rate.
        final_lr: If given, the learning rate decays geometrically, step by
            step, from ``lr`` to ``final_lr`` at the last step of ``epochs``
            (damps the minibatch noise of the final iterate); default
            constant.
        early_stopping_patience: Stop after this many epochs without the
            epoch ELBO improving by ``min_delta`` nats per answer; ``None``
            runs all epochs.
        min_delta: Improvement (nats per answer) that resets the patience.
        seed: Seed of the minibatch permutations; the same seed gives the
            same ELBO trajectory. ``None`` uses torch's global RNG.
        progress: ``True`` shows a tqdm progress bar over the epochs (on
            stderr, with the ELBO per answer and the seconds per epoch); a
            callable is called as ``progress(epoch, info)`` with ``info``
            keys ``elbo``, ``elbo_per_answer``, ``seconds``.
        learn_hyperparameters: If ``False``, only ``q(u)`` is optimised
            (kernel, mean, likelihood, inducing locations and LMC
            coefficients stay fixed).
        use_priors: Add the hyperparameters' log prior to the objective.
        num_samples: QMC points for multi-latent expectations (default:
            the likelihood's).
        distributed: Train data-parallel over the processes of the
            initialised ``torch.distributed`` process group (see above);
            default one process, without any collective.
        process_group: The process group to use with ``distributed=True``;
            default the default group.

    Returns:
        A :class:`VariationalFitResult` with the per-epoch ELBO and times.

    Raises:
        UnsupportedError: ``distributed=True`` and no process group is
            initialised.
        InputTypeError: An argument of the wrong type (e.g. a float
            ``epochs``, a non-number ``lr``).
        InputDataError: An argument out of range (e.g. ``batch_size=0``,
            ``final_lr > lr``, an infinite ``min_delta``); in a distributed
            fit, also ranks whose models, data sizes or settings differ.
        NumericalError: The ELBO became non-finite.
    """
    batch_size, epochs, lr, final_lr, early_stopping_patience, min_delta, seed = (
        _check_args(
            model,
            batch_size,
            epochs,
            lr,
            final_lr,
            early_stopping_patience,
            min_delta,
            seed,
            progress,
        )
    )
    ctx = resolve_context(distributed, process_group)
    if data is not None:
        model.set_data(data)
    data = model._data_or_raise(None)
    params = _trained_parameters(model, learn_hyperparameters)
    if ctx is not None:
        seed = _synchronise_replicas(
            model,
            params,
            ctx,
            data,
            seed,
            batch_size,
            epochs,
            learn_hyperparameters,
            use_priors,
        )
    optimizer = torch.optim.Adam(params, lr=float(lr))
    loader = _answer_loader(data, batch_size, seed, ctx)
    total = data.num_answers
    scheduler = _lr_schedule(optimizer, lr, final_lr, epochs * len(loader))
    result = VariationalFitResult(world_size=1 if ctx is None else ctx.world_size)
    report = ctx is None or ctx.rank == 0
    stopping = _EarlyStopping(early_stopping_patience, min_delta * total)
    bar = _progress_bar(progress, report, epochs)
    model.train()
    try:
        for epoch in range(epochs):
            start = time.perf_counter()
            sums = run_epoch(
                model,
                loader,
                optimizer,
                scheduler,
                params,
                ctx,
                epoch,
                use_priors,
                num_samples,
            )
            mean_elbo = sums / len(loader)
            seconds = time.perf_counter() - start
            result.elbo.append(mean_elbo)
            result.seconds.append(seconds)
            info = {
                "elbo": mean_elbo,
                "elbo_per_answer": mean_elbo / total,
                "seconds": seconds,
            }
            if report:
                _report(progress, bar, epoch, info)
            if stopping.should_stop(mean_elbo):
                result.stopped_early = True
                break
    finally:
        model.eval()
        if bar is not None:
            bar.close()
    result.best_epoch = max(range(len(result.elbo)), key=result.elbo.__getitem__)
    return result


def _trained_parameters(
    model: VariationalPreferenceGP, learn_hyperparameters: bool
) -> list[Tensor]:
    r"""What Adam moves: every trainable parameter, or ``q(u)``'s alone."""
    if learn_hyperparameters:
        return [p for p in model.parameters() if p.requires_grad]
    q_u = model.base_variational_strategy._variational_distribution
    return list(q_u.parameters())


def _synchronise_replicas(
    model: VariationalPreferenceGP,
    params: list[Tensor],
    ctx: DistributedContext,
    data: PreferenceData,
    seed: int | None,
    batch_size: int,
    epochs: int,
    learn_hyperparameters: bool,
    use_priors: bool,
) -> int:
    r"""Make the ranks start alike: one seed, the same model, data size and
    settings (checked), rank 0's parameters and buffers everywhere; the
    agreed seed."""
    seed = agree_on_seed(seed, model, ctx)
    check_replicas(
        model,
        params,
        ctx,
        **{
            "number of answers": data.num_answers,
            "batch_size": batch_size,
            "epochs": epochs,
            "seed": seed,
            "learn_hyperparameters": int(learn_hyperparameters),
            "use_priors": int(use_priors),
        },
    )
    broadcast_module(model, ctx)
    return seed


def _answer_loader(
    data: PreferenceData,
    batch_size: int,
    seed: int | None,
    ctx: DistributedContext | None,
) -> AnswerLoader | ShardedAnswerLoader:
    r"""Shuffled minibatches of answers (this rank's shards of them when
    distributed), permuted by a generator seeded with ``seed`` (``None``:
    torch's global RNG)."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    if ctx is None:
        return AnswerLoader(data, batch_size, shuffle=True, generator=generator)
    return ShardedAnswerLoader(
        data,
        batch_size,
        rank=ctx.rank,
        world_size=ctx.world_size,
        generator=generator,
    )


def _lr_schedule(
    optimizer: torch.optim.Optimizer,
    lr: float,
    final_lr: float | None,
    num_steps: int,
) -> torch.optim.lr_scheduler.ExponentialLR | None:
    r"""The geometric decay from ``lr`` to ``final_lr`` at the last of
    ``num_steps`` steps; ``None`` (constant) without ``final_lr``."""
    if final_lr is None:
        return None
    gamma = (final_lr / lr) ** (1.0 / max(1, num_steps - 1))
    return torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=gamma)


def _progress_bar(progress: bool | ProgressCallback, report: bool, epochs: int) -> Any:
    r"""A tqdm bar over the epochs where ``progress is True`` on the reporting
    rank; else ``None``."""
    if progress is True and report:
        return tqdm(total=epochs, desc="fit_variational", unit="epoch", file=sys.stderr)
    return None


class _EarlyStopping:
    r"""Stop after ``patience`` epochs whose ELBO does not beat the best by
    more than ``min_improvement`` nats (``patience=None``: never)."""

    def __init__(self, patience: int | None, min_improvement: float) -> None:
        self.patience = patience
        self.min_improvement = min_improvement
        self.best = -math.inf
        self.waited = 0

    def should_stop(self, elbo: float) -> bool:
        r"""Record an epoch's ``elbo``; whether to stop now."""
        if elbo > self.best + self.min_improvement:
            self.best, self.waited = elbo, 0
            return False
        self.waited += 1
        return self.patience is not None and self.waited >= self.patience
