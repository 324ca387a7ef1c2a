r"""DPP-based inducing-point allocators: CVR and ENT-DPP.

Both are BoTorch ``InducingPointAllocator`` s, usable as
``SingleTaskVariationalGP(..., inducing_point_allocator=...)``; both run the
batched, matrix-free greedy of :func:`~prefbo.inducing.greedy.greedy_dpp_map`
(``O(n·m)`` memory, one kernel row per chosen point) instead of BoTorch's
``_pivoted_cholesky_init``, which forms the ``n x n`` kernel matrix and loops
over batch elements in Python.

When fewer than ``m`` inputs have residual variance above the tolerance (e.g.
duplicated inputs, or more inducing points than the kernel's numerical rank),
the greedy stops early. ``allocate_inducing_points`` then returns
``batch_shape x m' x d`` points with ``m' < m`` the largest number of genuine
choices over the batch, as BoTorch does for unbatched inputs, and warns with a
:class:`~prefbo.exceptions.NumericalWarning`; batch elements with fewer genuine
choices than ``m'`` are padded with further, redundant, inputs. Callers must
size the variational distribution from the returned ``shape[-2]`` (BoTorch's
``SingleTaskVariationalGP`` does).
"""

from __future__ import annotations

import warnings
from abc import abstractmethod

import torch
from botorch.models.model import Model
from botorch.models.utils.inducing_point_allocators import InducingPointAllocator
from gpytorch.kernels import Kernel
from torch import Tensor

from prefbo.exceptions import InputDataError, NumericalWarning
from prefbo.inducing.greedy import (
    check_kernel,
    check_tol,
    default_tolerance,
    greedy_dpp_map,
    validate_inputs,
)
from prefbo.inducing.quality import MaxValueEntropyQuality, QualityFunction, UnitQuality


def broadcast_inputs(
    inputs: Tensor, input_batch_shape: torch.Size, num_inducing: int
) -> Tensor:
    r"""Validate ``inputs`` and expand them to ``input_batch_shape``.

    Args:
        inputs: A ``batch_shape x n x d`` tensor.
        input_batch_shape: The model's input batch shape, broadcastable with
            ``batch_shape`` (BoTorch expands unbatched inputs to it).
        num_inducing: Number ``m`` of inducing points, in ``[1, n]``.

    Returns:
        The ``broadcast(batch_shape, input_batch_shape) x n x d`` inputs.
    """
    validate_inputs(inputs, num_inducing)
    try:
        batch_shape = torch.broadcast_shapes(inputs.shape[:-2], input_batch_shape)
    except (RuntimeError, TypeError) as err:
        raise InputDataError(
            f"inputs of shape {tuple(inputs.shape)} do not broadcast with "
            f"input_batch_shape={tuple(input_batch_shape)}."
        ) from err
    return inputs.expand(batch_shape + inputs.shape[-2:])


class GreedyDPPAllocator(InducingPointAllocator):
    r"""Base of the greedy-DPP allocators: subclasses give the quality function."""

    def __init__(self, tol: float | None = None) -> None:
        r"""
        Args:
            tol: Relative residual-variance tolerance below which a candidate is
                redundant; default :func:`~prefbo.inducing.greedy.default_tolerance`
                (``1e-6`` float64, ``1e-4`` float32).
        """
        self.tol = check_tol(tol)

    @abstractmethod
    def _get_quality_function(self) -> QualityFunction:
        r"""The (batched) quality function of the DPP."""

    def select_indices(
        self,
        inputs: Tensor,
        covar_module: Kernel,
        num_inducing: int,
        input_batch_shape: torch.Size = torch.Size(),
    ) -> tuple[Tensor, Tensor]:
        r"""Indices of the greedy choices, without warnings or truncation.

        Args:
            inputs: A ``batch_shape x n x d`` tensor of candidates.
            covar_module: The GPyTorch kernel of the sparse model.
            num_inducing: Number ``m ≤ n`` of inducing points.
            input_batch_shape: The model's input batch shape (inputs are
                broadcast to it).

        Returns:
            ``(indices, num_selected)``: ``batch_shape' x m`` long indices into
            the broadcast inputs, of which the first ``num_selected``
            (``batch_shape'``) per batch element are genuine choices.
        """
        inputs = broadcast_inputs(inputs, input_batch_shape, num_inducing)
        check_kernel(covar_module)
        covar_module = covar_module.to(inputs.device)
        with torch.no_grad():
            quality = self._get_quality_function()(inputs, num_inducing)
            return greedy_dpp_map(
                inputs, covar_module, num_inducing, quality=quality, tol=self.tol
            )

    def allocate_inducing_points(
        self,
        inputs: Tensor,
        covar_module: Kernel,
        num_inducing: int,
        input_batch_shape: torch.Size = torch.Size(),
    ) -> Tensor:
        r"""Choose inducing points among the inputs.

        Args:
            inputs: A ``batch_shape x n x d`` tensor of candidates.
            covar_module: The GPyTorch kernel of the sparse model.
            num_inducing: Number ``m ≤ n`` of inducing points.
            input_batch_shape: The model's input batch shape (inputs are
                broadcast to it).

        Returns:
            A ``batch_shape' x m' x d`` tensor of chosen inputs, ``m' = m``
            unless the residual variance vanished first (see module docstring).

        Raises:
            InputDataError: bad shapes or values (``num_inducing`` outside
                ``[1, n]``, non-finite inputs).
            InputTypeError: ``covar_module`` not a GPyTorch ``Kernel``.
        """
        inputs = broadcast_inputs(inputs, input_batch_shape, num_inducing)
        indices, num_selected = self.select_indices(inputs, covar_module, num_inducing)
        m_eff = int(num_selected.max())  # the one host sync
        m_min = int(num_selected.min())
        if m_min < num_inducing:
            tol = default_tolerance(inputs.dtype) if self.tol is None else self.tol
            padded = (
                f"; batch elements with fewer genuine choices (min {m_min}) are "
                "padded with redundant inputs"
                if m_min < m_eff
                else ""
            )
            warnings.warn(
                f"only {m_eff} of num_inducing={num_inducing} inputs have residual "
                f"variance above tol={tol:g} x max prior variance; returning "
                f"{m_eff} inducing points{padded}. Duplicate inputs or a kernel of "
                "low numerical rank cause this: use fewer inducing points.",
                NumericalWarning,
                stacklevel=2,
            )
        indices = indices[..., :m_eff]  # batch x m'
        d = inputs.shape[-1]
        return inputs.gather(-2, indices.unsqueeze(-1).expand(indices.shape + (d,)))


class ConditionalVarianceReduction(GreedyDPPAllocator):
    r"""Greedy conditional variance reduction (CVR, Burt et al. 2020).

    Repeatedly adds the input with the largest noise-free posterior variance
    given the points chosen so far: the greedy MAP of the DPP with kernel
    ``K``. It selects exactly what BoTorch's ``GreedyVarianceReduction``
    selects (ties to the lowest index), batched and without the ``n x n``
    kernel matrix.

    Example:
        >>> model = SingleTaskVariationalGP(
        ...     train_X, inducing_points=100,
        ...     inducing_point_allocator=ConditionalVarianceReduction(),
        ... )
    """

    def _get_quality_function(self) -> QualityFunction:
        r"""Unit qualities."""
        return UnitQuality()


class EntropyDPP(GreedyDPPAllocator):
    r"""ENT-DPP (Moss et al.): inducing points informative about the maximum.

    Greedy MAP of the DPP ``L = diag(q) K diag(q)`` with the quality
    ``q_z = exp((1 - α) · IG_z / (α · m))`` of
    :class:`~prefbo.inducing.quality.MaxValueEntropyQuality` (see it for the
    derivation, the sign convention and how ``f*`` is sampled): at each step
    the input maximising ``q_z² · var(z | chosen)`` is added. ``α = 1`` is
    exactly :class:`ConditionalVarianceReduction` (the model is still
    evaluated, so prefer CVR then).

    How much the quality does: only quality ratios matter, and the log-ratio
    of the best to the worst input is ``(1 - α)/(α m)`` times the spread of
    the single-point gains ``IG_z``. While the samples of the maximum lie far
    above the posterior mean at most inputs (a BO run that has not found the
    maximum), the gains spread over about a tenth of a nat, so at the default
    ``α = 0.5`` and ``m ≥ 50`` all qualities lie within 1 % of each other and
    the quality term hardly acts on the set: the greedy selects nearly CVR
    started from the input of highest posterior mean (its first pick, since a
    stationary kernel's prior variances tie); on average a tenth of a point
    per call differs (up to 9 of 50 in one call), and where the set is the
    same the quality can still swap near-tied picks, which changes the SVGP
    fitted on the points in that order. The quality reshapes
    the set only when ``(1 - α)/(α m)`` times the spread is of order one,
    i.e. ``α`` near the spread divided by ``m`` (0.002-0.01 for ``m = 50``).
    ``benchmarks/results/inducing_bo.md`` measures both regimes in BO runs,
    and BoTorch's ``GreedyImprovementReduction`` (an improvement-based
    quality) beside them.
    """

    def __init__(
        self,
        model: Model,
        alpha: float = 0.5,
        num_max_samples: int = 128,
        max_samples: Tensor | None = None,
        num_candidates: int = 1024,
        maximize: bool = True,
        max_value_method: str = "thompson",
        tol: float | None = None,
    ) -> None:
        r"""
        Args:
            model: The model of the previous BO step: any one-output BoTorch
                model (regression or preference) evaluated on the raw inputs.
            alpha: Trade-off ``α ∈ (0, 1]``; 1 is CVR. The quality matters only
                for ``α`` of order (spread of ``IG``)/``m`` (see above).
            num_max_samples: Thompson samples of the maximum (``≥ 2``), for
                ``max_value_method="thompson"``.
            max_samples: Optional precomputed ``num_samples [x batch_shape]``
                samples of the maximum (of the minimum if ``maximize=False``).
            num_candidates: Candidate-set size for sampling the maximum.
            maximize: Whether the utility is maximised.
            max_value_method: How the maximum's moments are estimated:
                ``"thompson"`` (joint samples) or ``"gumbel"`` (marginals, no
                Cholesky, overestimates the maximum).
            tol: Relative residual-variance tolerance (see
                :class:`GreedyDPPAllocator`).
        """
        super().__init__(tol=tol)
        self.quality_function = MaxValueEntropyQuality(
            model,
            alpha=alpha,
            num_max_samples=num_max_samples,
            max_samples=max_samples,
            num_candidates=num_candidates,
            maximize=maximize,
            max_value_method=max_value_method,
        )

    @property
    def alpha(self) -> float:
        r"""The trade-off ``α``."""
        return self.quality_function.alpha

    def _get_quality_function(self) -> QualityFunction:
        r"""The ENT-DPP quality."""
        return self.quality_function
