r"""One epoch of minibatch ELBO ascent for :func:`~prefbo.fit.fit_variational`.

Each minibatch's step back-propagates ``−objective / N``, the objective being
``(total / batch) · Σ_{k ∈ batch} E_q[log p(answer_k | f)] − KL(q(u) ‖ p(u))``
plus, optionally, the hyperparameters' log prior: in one process
(:func:`local_step`), or split over the ranks of a process group with the
gradients summed (:func:`sharded_step`). :func:`run_epoch` steps through the
minibatches of one pass over the answers.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from prefbo.data.minibatch import AnswerLoader, Minibatch
from prefbo.exceptions import NumericalError
from prefbo.fit.distributed import (
    DistributedContext,
    ShardedAnswerLoader,
    all_reduce_gradients,
)
from prefbo.models.variational import VariationalPreferenceGP


def log_prior(model: torch.nn.Module) -> Tensor:
    r"""``Σ log p(θ)`` over the priors registered on ``model``'s modules (0-d)."""
    total = torch.zeros(())
    for _, module, prior, closure, _ in model.named_priors():
        total = total + prior.log_prob(closure(module)).sum()
    return total


def run_epoch(
    model: VariationalPreferenceGP,
    loader: AnswerLoader | ShardedAnswerLoader,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.ExponentialLR | None,
    params: list[Tensor],
    ctx: DistributedContext | None,
    epoch: int,
    use_priors: bool,
    num_samples: int | None,
) -> float:
    r"""One pass over the answers, an Adam step per minibatch; the sum of the
    minibatch ELBO estimates.

    Raises:
        NumericalError: The sum is not finite.
    """
    total = loader.data.num_answers
    on_host = model.base_variational_strategy.inducing_points.device.type == "cpu"
    sums = 0.0
    for batch in loader:
        optimizer.zero_grad(set_to_none=True)
        if ctx is not None:
            sums += sharded_step(
                model, batch, params, ctx, total, epoch, use_priors, num_samples
            )
        else:
            elbo = local_step(
                model, batch, total, epoch, use_priors, num_samples, on_host
            )
            # on an accelerator the sum stays on the device (no host sync
            # per step); a non-finite ELBO is then caught at the epoch's end
            sums = sums + (float(elbo) if on_host else elbo)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    sums = float(sums)
    if not math.isfinite(sums):
        _raise_non_finite(sums, epoch)
    return sums


def local_step(
    model: VariationalPreferenceGP,
    batch: Minibatch,
    total: int,
    epoch: int,
    use_priors: bool,
    num_samples: int | None,
    on_host: bool,
) -> Tensor:
    r"""Back-propagate ``−objective / N`` of one minibatch in one process; its
    ELBO estimate (detached, 0-d).

    Raises:
        NumericalError: ``on_host`` (where checking is free) and the loss is
            not finite.
    """
    ell = model.expected_log_likelihood(batch.data, num_samples).sum()
    elbo = batch.scale * ell - model.kl_divergence()
    objective = elbo + log_prior(model).to(elbo) if use_priors else elbo
    loss = objective.neg() / total
    if on_host and not torch.isfinite(loss):
        _raise_non_finite(float(elbo.detach()), epoch)
    loss.backward()
    return elbo.detach()


def _raise_non_finite(elbo: float, epoch: int) -> None:
    raise NumericalError(
        f"the ELBO became non-finite ({elbo}) at epoch {epoch}; lower lr or check "
        "the data and the likelihood's noise_std."
    )


def sharded_step(
    model: VariationalPreferenceGP,
    batch: Minibatch | None,
    params: list[Tensor],
    ctx: DistributedContext,
    total: int,
    epoch: int,
    use_priors: bool,
    num_samples: int | None,
) -> float:
    r"""Back-propagate this rank's part of a minibatch and sum the gradients.

    Rank ``r``'s objective is ``scale · Σ_{k ∈ B_r} E_q[log p(answer_k | f)]``,
    minus ``KL(q(u) ‖ p(u))`` and plus ``log p(θ)`` on rank 0 only; its
    gradient (of ``−objective / N``, as in one process) and its ELBO part are
    summed over the ranks in one all-reduce. Every rank then holds the
    minibatch's full gradient in ``p.grad`` and raises alike if the summed
    ELBO is non-finite.

    Returns:
        The minibatch's ELBO estimate (summed over the ranks).
    """
    elbo = None
    if batch is not None:
        ell = model.expected_log_likelihood(batch.data, num_samples).sum()
        elbo = batch.scale * ell
    objective = elbo
    if ctx.rank == 0:
        kl = model.kl_divergence()
        elbo = kl.neg() if elbo is None else elbo - kl
        objective = elbo + log_prior(model).to(elbo) if use_priors else elbo
    if objective is not None:
        # a non-finite part only poisons the gradients: every rank raises below
        (objective.neg() / total).backward()
        stats = torch.stack([elbo.detach(), objective.detach()])
    else:  # an empty shard off rank 0: no graph, nothing to add
        Z = model.base_variational_strategy.inducing_points
        stats = torch.zeros(2, dtype=Z.dtype, device=Z.device)
    stats = all_reduce_gradients(params, stats, ctx)
    elbo_sum, objective_sum = stats.tolist()
    if not math.isfinite(objective_sum):
        _raise_non_finite(elbo_sum, epoch)
    return elbo_sum
