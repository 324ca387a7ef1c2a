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
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from prefbo.data.minibatch import AnswerLoader, PreferenceData
from prefbo.exceptions import InputDataError, InputTypeError, NumericalError
from prefbo.models.variational import VariationalPreferenceGP

ProgressCallback = Callable[[int, dict], None]


@dataclass
class VariationalFitResult:
    r"""What :func:`fit_variational` did, epoch by epoch.

    Attributes:
        elbo: Per epoch, the mean of its minibatch ELBO estimates (nats,
            summed over all answers; without the hyperparameter log prior).
        seconds: Per epoch, the wall-clock time.
        best_epoch: The epoch (0-based) with the highest ``elbo``.
        stopped_early: Whether early stopping ended the run.
    """

    elbo: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    best_epoch: int = 0
    stopped_early: bool = False

    @property
    def num_epochs(self) -> int:
        r"""Epochs run."""
        return len(self.elbo)


def log_prior(model: torch.nn.Module) -> Tensor:
    r"""``Σ log p(θ)`` over the priors registered on ``model``'s modules (0-d)."""
    total = torch.zeros(())
    for _, module, prior, closure, _ in model.named_priors():
        total = total + prior.log_prob(closure(module)).sum()
    return total


def _check_args(
    model: object,
    batch_size: object,
    epochs: object,
    lr: object,
    early_stopping_patience: object,
    min_delta: object,
    seed: object,
    progress: object,
) -> None:
    if not isinstance(model, VariationalPreferenceGP):
        raise InputTypeError(
            f"model must be a VariationalPreferenceGP; got {type(model).__name__}."
        )
    for name, value in (("batch_size", batch_size), ("epochs", epochs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputDataError(f"{name} must be a positive integer; got {value!r}.")
    if (
        isinstance(lr, bool)
        or not isinstance(lr, int | float)
        or not math.isfinite(lr)
        or lr <= 0
    ):
        raise InputDataError(f"lr must be a finite positive float; got {lr!r}.")
    if early_stopping_patience is not None and (
        isinstance(early_stopping_patience, bool)
        or not isinstance(early_stopping_patience, int)
        or early_stopping_patience < 1
    ):
        raise InputDataError(
            "early_stopping_patience must be None or a positive integer; got "
            f"{early_stopping_patience!r}."
        )
    if not isinstance(min_delta, int | float) or not min_delta >= 0:
        raise InputDataError(f"min_delta must be a float >= 0; got {min_delta!r}.")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InputTypeError(f"seed must be None or an int; got {seed!r}.")
    if not isinstance(progress, bool) and not callable(progress):
        raise InputTypeError(
            "progress must be a bool or a callable (epoch, info) -> None; got "
            f"{type(progress).__name__}."
        )


def _report(
    progress: bool | ProgressCallback, epoch: int, epochs: int, info: dict
) -> None:
    if progress is True:
        print(
            f"epoch {epoch + 1}/{epochs}: ELBO/answer {info['elbo_per_answer']:.5f}, "
            f"{info['seconds']:.2f} s",
            flush=True,
        )
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
) -> VariationalFitResult:
    r"""Fit a variational preference GP by minibatch ELBO ascent with Adam.

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
        progress: ``True`` prints one line per epoch; a callable is called
            as ``progress(epoch, info)`` with ``info`` keys ``elbo``,
            ``elbo_per_answer``, ``seconds``.
        learn_hyperparameters: If ``False``, only ``q(u)`` is optimised
            (kernel, mean, likelihood, inducing locations and LMC
            coefficients stay fixed).
        use_priors: Add the hyperparameters' log prior to the objective.
        num_samples: QMC points for multi-latent expectations (default:
            the likelihood's).

    Returns:
        A :class:`VariationalFitResult` with the per-epoch ELBO and times.
    """
    _check_args(
        model,
        batch_size,
        epochs,
        lr,
        early_stopping_patience,
        min_delta,
        seed,
        progress,
    )
    if final_lr is not None and not (
        isinstance(final_lr, int | float) and 0 < final_lr <= lr
    ):
        raise InputDataError(
            f"final_lr must be None or a float in (0, lr={lr}]; got {final_lr!r}."
        )
    if data is not None:
        model.set_data(data)
    data = model._data_or_raise(None)
    if learn_hyperparameters:
        params = [p for p in model.parameters() if p.requires_grad]
    else:
        q_u = model.base_variational_strategy._variational_distribution
        params = list(q_u.parameters())
    optimizer = torch.optim.Adam(params, lr=float(lr))
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    loader = AnswerLoader(data, batch_size, shuffle=True, generator=generator)
    total = data.num_answers
    scheduler = None
    if final_lr is not None:
        gamma = (final_lr / lr) ** (1.0 / max(1, epochs * len(loader) - 1))
        scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=gamma)
    result = VariationalFitResult()
    best, waited = -math.inf, 0
    model.train()
    try:
        for epoch in range(epochs):
            start, sums = time.perf_counter(), 0.0
            for batch in loader:
                optimizer.zero_grad(set_to_none=True)
                ell = model.expected_log_likelihood(batch.data, num_samples).sum()
                elbo = batch.scale * ell - model.kl_divergence()
                objective = elbo + log_prior(model).to(elbo) if use_priors else elbo
                loss = objective.neg() / total
                if not torch.isfinite(loss):
                    raise NumericalError(
                        f"the ELBO became non-finite ({float(elbo.detach())}) at "
                        f"epoch {epoch}; lower lr or check the data and the "
                        "likelihood's noise_std."
                    )
                loss.backward()
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                sums += float(elbo.detach())
            mean_elbo = sums / len(loader)
            seconds = time.perf_counter() - start
            result.elbo.append(mean_elbo)
            result.seconds.append(seconds)
            info = {
                "elbo": mean_elbo,
                "elbo_per_answer": mean_elbo / total,
                "seconds": seconds,
            }
            _report(progress, epoch, epochs, info)
            if mean_elbo > best + min_delta * total:
                best, waited = mean_elbo, 0
            else:
                waited += 1
                if (
                    early_stopping_patience is not None
                    and waited >= early_stopping_patience
                ):
                    result.stopped_early = True
                    break
    finally:
        model.eval()
    result.best_epoch = max(range(len(result.elbo)), key=result.elbo.__getitem__)
    return result
