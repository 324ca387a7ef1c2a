r"""Preference models of a population: everyone's answers in one model.

Each participant's answers are comparisons between their own designs. The
population model is an ordinary prefbo preference model (Laplace, EP or
variational) over inputs ``[x, p]`` with a
:class:`~prefbo.kernels.population.PopulationKernel`: a shared utility plus
each participant's deviation, hyperparameters learnt from all answers
(fit it as any model, e.g. ``fit_gpytorch_mll``). This module stacks the
participants' data, builds the default kernel and reads the model:

- :func:`stack_participants`: ``{participant: (X, comparisons)}`` to one data
  set.
- :func:`population_model`: the model.
- :func:`utility_posterior`: the posterior of the population's utility
  (participant :data:`~prefbo.kernels.population.POPULATION`), of a
  participant's, or of a new participant's (an id without answers: the
  population posterior plus a deviation's prior).
- :func:`favourite`: the best of candidate designs for the population or a
  participant, with its posterior mean and sd.
- :func:`disagreement`: the share of the utility's prior variance that is
  individual, ``k_ind / (k_pop + k_ind)`` at the designs (0: everyone agrees,
  1: nothing is shared).

Example:
    >>> model = population_model({0: (X0, c0), 1: (X1, c1)})
    >>> fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    >>> x, mean, sd = favourite(model.eval(), candidates)  # the population's
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import torch
from botorch.posteriors import Posterior
from gpytorch.priors import LogNormalPrior
from linear_operator import to_dense
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.kernels.population import POPULATION, PopulationKernel, with_participant
from prefbo.models.ep import PairwiseEPGP
from prefbo.models.laplace import PairwiseLaplaceGP
from prefbo.utils.checks import describe

# the individual deviation's outputscale at the start of a fit: a person's
# deviation is a quarter of the population's prior variance
INDIVIDUAL_OUTPUTSCALE = 0.25

#: Prior of the deviation's outputscale over the population's: log-normal,
#: median :data:`INDIVIDUAL_OUTPUTSCALE`, one e-fold standard deviation.
#: Questions chosen for the population's favourite say little about the
#: deviations, and without it the evidence, nearly flat there, let fits put
#: the deviation at its box's floor (0.01) and the population at its ceiling
#: (100): a study that never told its people apart.
RATIO_PRIOR_SCALE = 1.0

MODELS = {"laplace": PairwiseLaplaceGP, "ep": PairwiseEPGP}


def stack_participants(
    data: Mapping[int, tuple[Tensor, Tensor]],
) -> tuple[Tensor, Tensor]:
    r"""One data set of everyone's answers.

    Args:
        data: ``{participant id: (X, comparisons)}``: ids ints ``≥ 0``, ``X``
            ``n_p x d`` designs (one ``d`` for all), ``comparisons`` ``m_p x 2``
            indices into that participant's ``X`` (winner first).

    Returns:
        ``(datapoints, comparisons)``: ``N x (d + 1)`` designs with the
        participant id in the last column, and ``M x 2`` comparisons into them.

    Raises:
        InputTypeError: ``data`` is not a dict, an id not an int, or an entry
            not a pair of tensors.
        InputDataError: No participant, a negative id, designs of different
            ``d``, or comparisons out of range.
    """
    if not isinstance(data, Mapping):
        raise InputTypeError(
            f"data must be a dict {{participant: (X, comparisons)}}; got "
            f"{describe(data)}."
        )
    if not data:
        raise InputDataError("data must hold at least one participant; got {}.")
    rows, comps, offset, d = [], [], 0, None
    for p, entry in data.items():
        if isinstance(p, bool) or not isinstance(p, numbers.Integral):
            raise InputTypeError(f"participant ids must be ints; got {describe(p)}.")
        if p < 0:
            raise InputDataError(
                f"participant ids must be >= 0 ({POPULATION} stands for the "
                f"population); got {p}."
            )
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2) or not all(
            isinstance(t, Tensor) for t in entry
        ):
            raise InputTypeError(
                f"participant {p}: the entry must be (X, comparisons) tensors; got "
                f"{describe(entry)}."
            )
        X, c = entry
        if X.ndim != 2 or (d is not None and X.shape[-1] != d):
            raise InputDataError(
                f"participant {p}: X must be n x d with one d for all (d={d}); got "
                f"shape {tuple(X.shape)}."
            )
        d = X.shape[-1]
        if c.ndim != 2 or c.shape[-1] != 2 or c.is_floating_point():
            raise InputDataError(
                f"participant {p}: comparisons must be an m x 2 integer tensor; got "
                f"shape {tuple(c.shape)} of {c.dtype}."
            )
        if c.numel() and (int(c.min()) < 0 or int(c.max()) >= X.shape[0]):
            raise InputDataError(
                f"participant {p}: comparisons must index its {X.shape[0]} designs; "
                f"got values from {int(c.min())} to {int(c.max())}."
            )
        rows.append(with_participant(X, int(p)))
        comps.append(c.long() + offset)
        offset += X.shape[0]
    return torch.cat(rows), torch.cat(comps)


def population_covar_module(
    d: int, dtype: torch.dtype = torch.float64
) -> PopulationKernel:
    r"""The default population kernel: BoTorch's preference kernel
    (:func:`~prefbo.kernels.default_preference_covar_module`) for both the
    population utility and the deviations, the deviation's outputscale
    starting at :data:`INDIVIDUAL_OUTPUTSCALE` of the population's, with a
    log-normal prior on that ratio (:data:`RATIO_PRIOR_SCALE`)."""
    individual = default_preference_covar_module(d, dtype=dtype)
    individual.outputscale = INDIVIDUAL_OUTPUTSCALE
    kernel = PopulationKernel(
        default_preference_covar_module(d, dtype=dtype), individual
    )
    kernel.register_prior(
        "outputscale_ratio_prior",
        LogNormalPrior(math.log(INDIVIDUAL_OUTPUTSCALE), RATIO_PRIOR_SCALE),
        _outputscale_ratio,
    )
    return kernel


def _outputscale_ratio(kernel: PopulationKernel) -> Tensor:
    return kernel.individual_kernel.outputscale / kernel.population_kernel.outputscale


def population_model(
    data: Mapping[int, tuple[Tensor, Tensor]],
    model: str = "ep",
    covar_module: PopulationKernel | None = None,
    **kwargs: Any,
) -> PairwiseLaplaceGP | PairwiseEPGP:
    r"""A preference model of everyone's answers (see the module docstring).

    Args:
        data: As :func:`stack_participants`; designs in the unit cube.
        model: ``"ep"`` (:class:`~prefbo.models.PairwiseEPGP`) or
            ``"laplace"`` (:class:`~prefbo.models.PairwiseLaplaceGP`). For
            thousands of participants, build a
            :class:`~prefbo.models.VariationalPreferenceGP` on the stacked
            data with a :class:`PopulationKernel` instead.
        covar_module: A :class:`PopulationKernel`; default
            :func:`population_covar_module`.
        **kwargs: Further keyword arguments of the model (e.g. ``likelihood``).

    Returns:
        The model, in train mode (fit it, then ``.eval()``).
    """
    if model not in MODELS:
        raise InputDataError(f"model must be one of {sorted(MODELS)}; got {model!r}.")
    X, comps = stack_participants(data)
    if covar_module is None:
        covar_module = population_covar_module(X.shape[-1] - 1, dtype=X.dtype)
    if not isinstance(covar_module, PopulationKernel):
        raise InputTypeError(
            f"covar_module must be a PopulationKernel; got {describe(covar_module)}."
        )
    return MODELS[model](X, comps, covar_module=covar_module, **kwargs)


def utility_posterior(
    model: Any, X: Tensor, participant: int = POPULATION
) -> Posterior:
    r"""The posterior of a utility at ``n x d`` designs ``X``: the
    population's (default), a participant's, or a new participant's.

    Raises:
        InputTypeError: ``participant`` is not an int.
        InputDataError: ``participant`` is below ``POPULATION`` (-1).
    """
    if isinstance(participant, bool) or not isinstance(participant, numbers.Integral):
        raise InputTypeError(
            f"participant must be an int; got {describe(participant)}."
        )
    if participant < POPULATION:
        raise InputDataError(
            f"participant must be >= {POPULATION} (the population); got {participant}."
        )
    return model.posterior(with_participant(X, int(participant)))


def favourite(
    model: Any, candidates: Tensor, participant: int = POPULATION
) -> tuple[Tensor, float, float]:
    r"""The candidate with the highest posterior mean utility.

    Args:
        model: A population model in eval mode.
        candidates: ``n x d`` designs.
        participant: Whose utility (default the population's).

    Returns:
        ``(design, mean, sd)``.
    """
    with torch.no_grad():
        post = utility_posterior(model, candidates.unsqueeze(-2), participant)
        mean = post.mean.reshape(-1)
        sd = post.variance.reshape(-1).clamp_min(0).sqrt()
    i = int(mean.argmax())
    return candidates[i].clone(), float(mean[i]), float(sd[i])


def disagreement(model: Any, X: Tensor) -> float:
    r"""The individual share of the prior variance at ``n x d`` designs:
    ``mean k_ind(x, x) / mean (k_pop(x, x) + k_ind(x, x))``."""
    kernel = model.covar_module
    if not isinstance(kernel, PopulationKernel):
        raise InputTypeError(
            f"model.covar_module must be a PopulationKernel; got {describe(kernel)}."
        )
    with torch.no_grad():
        pop = to_dense(kernel.population_kernel(X, diag=True))
        ind = to_dense(kernel.individual_kernel(X, diag=True))
    return float(ind.mean() / (pop.mean() + ind.mean()))
