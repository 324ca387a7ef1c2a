r"""The training data of a pairwise preference GP and their validation.

Designs and comparisons are checked by :mod:`prefbo.data.validation`; here
are the parts particular to the models: the padding masks of ragged batched
data (see :func:`~prefbo.models.batch_users`), the ``strict`` replacement
of data, the training covariance of padded data, and
:class:`PairwiseTrainingData`, which sets the data of a
:class:`~prefbo.models.PairwisePreferenceGP` and answers its shape questions.
"""

from __future__ import annotations

import warnings

import torch
from botorch import settings as botorch_settings
from botorch.exceptions import InputDataWarning
from botorch.models.utils.assorted import consolidate_duplicates
from torch import Tensor

from prefbo.data.validation import validate_pairwise_data
from prefbo.exceptions import InputDataError
from prefbo.inference.gaussian import GaussianApproximation


def check_mask(
    data: Tensor, mask: object, name: str, shape: torch.Size
) -> tuple[Tensor, Tensor]:
    r"""Validate a padding mask against ``data``'s leading shape.

    Args:
        data: The data the mask belongs to.
        mask: A bool tensor broadcasting to ``shape``.
        name: The mask's argument name, for messages.
        shape: ``batch_shape x rows`` of ``data``.

    Returns:
        ``data`` and the mask on its device.
    """
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise InputDataError(
            f"{name} must be a bool tensor; got {type(mask).__name__}"
            + (f" of dtype {mask.dtype}." if isinstance(mask, Tensor) else ".")
        )
    try:
        torch.broadcast_shapes(mask.shape, shape)
    except RuntimeError:
        raise InputDataError(
            f"{name} must have shape {tuple(shape)} (batch_shape x rows); got "
            f"{tuple(mask.shape)}."
        ) from None
    return data, mask.to(data.device)


def validate_masked_data(
    datapoints: object,
    comparisons: object,
    design_mask: Tensor | None,
    comparison_mask: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    r"""Validate designs, comparisons and their optional padding masks.

    Padding comparisons become ``[0, 0]`` rows (they add a constant to the
    log likelihood, which the models take out of the evidence).

    Args:
        datapoints: ``batch_shape x n x d`` designs.
        comparisons: ``batch_shape x m x 2`` ``[winner, loser]`` indices.
        design_mask: Optional ``batch_shape x n`` bool (False: padding).
        comparison_mask: Optional ``batch_shape x m`` bool (False: padding).

    Returns:
        ``(datapoints, comparisons, design_mask, comparison_mask)``, the masks
        expanded to the data's batch shape.
    """
    if comparison_mask is not None and isinstance(comparisons, Tensor):
        comparisons, comparison_mask = check_mask(
            comparisons, comparison_mask, "comparison_mask", comparisons.shape[:-1]
        )
        # padding rows become [0, 1] for validation, [0, 0] afterwards
        pad = torch.tensor([0, 1], dtype=comparisons.dtype, device=comparisons.device)
        comparisons = torch.where(comparison_mask.unsqueeze(-1), comparisons, pad)
    datapoints, comparisons = validate_pairwise_data(datapoints, comparisons)
    if comparison_mask is not None:
        comparison_mask = comparison_mask.expand(comparisons.shape[:-1])
        comparisons = torch.where(
            comparison_mask.unsqueeze(-1),
            comparisons,
            torch.zeros_like(comparisons),
        )
    if design_mask is not None:
        datapoints, design_mask = check_mask(
            datapoints, design_mask, "design_mask", datapoints.shape[:-1]
        )
        design_mask = design_mask.expand(datapoints.shape[:-1])
        _check_padding(design_mask, comparisons, comparison_mask)
    return datapoints, comparisons, design_mask, comparison_mask


def _check_padding(
    design_mask: Tensor, comparisons: Tensor, comparison_mask: Tensor | None
) -> None:
    r"""Every batch element has a real design, and real comparisons refer to
    real designs only."""
    empty = ~design_mask.any(-1)
    if bool(empty.any()):
        where = f"of batch element(s) {empty.nonzero().tolist()} " if empty.ndim else ""
        raise InputDataError(
            f"design_mask marks every design {where}as padding; a model "
            "needs at least one real design."
        )
    # designs used by real comparisons (padding rows [0, 0] excluded)
    dev = comparisons.device
    if comparison_mask is None:
        real = torch.ones(comparisons.shape[:-1], dtype=torch.long, device=dev)
    else:
        real = comparison_mask.to(torch.long)
    used = torch.zeros(design_mask.shape, dtype=torch.long, device=dev)
    used.scatter_add_(-1, comparisons[..., 0], real)
    used.scatter_add_(-1, comparisons[..., 1], real)
    if bool(((used > 0) & ~design_mask).any()):
        raise InputDataError(
            "comparisons refer to designs that design_mask marks as padding; "
            "mark those comparisons False in comparison_mask (or the "
            "designs True in design_mask)."
        )


def check_same_layout(
    datapoints: Tensor,
    comparisons: Tensor,
    old_datapoints: Tensor,
    old_comparisons: Tensor,
) -> None:
    r"""``strict=True`` replacement: the new data keep the old shapes, dtypes
    and devices.

    Raises:
        InputDataError: Naming the first attribute that changed.
    """
    for name, new, old in (
        ("datapoints", datapoints, old_datapoints),
        ("comparisons", comparisons, old_comparisons),
    ):
        for attr in ("shape", "dtype", "device"):
            if getattr(new, attr) != getattr(old, attr):
                raise InputDataError(
                    f"strict=True: cannot change the {attr} of {name} "
                    f"(expected {getattr(old, attr)}, got "
                    f"{getattr(new, attr)})."
                )


def warn_outside_unit_cube(
    datapoints: Tensor, design_mask: Tensor | None, remedy: str | None = None
) -> None:
    r"""Warn, as BoTorch's models do, when the designs leave the unit cube.

    BoTorch's default priors (the ``Gamma(2.4, 2.7)`` lengthscale prior of
    :func:`~prefbo.kernels.default_preference_covar_module`) assume inputs
    in ``[0, 1]^d``; raw or standardised features fit a worse model without
    an error. Like ``botorch.models.utils.assorted.check_min_max_scaling``
    (same tolerance, same switch ``botorch.settings.validate_input_scaling``)
    this issues a ``botorch.exceptions.InputDataWarning`` naming the fix, a
    ``Normalize`` input transform. Padding designs are not checked.

    Args:
        datapoints: ``batch_shape x n x d`` designs.
        design_mask: Optional ``batch_shape x n`` bool (False: padding).
        remedy: What to do, for a model without ``input_transform``
            (default: pass a ``Normalize`` input transform).
    """
    if botorch_settings.validate_input_scaling.off():
        return
    with torch.no_grad():
        X = datapoints if design_mask is None else datapoints[design_mask]
        if X.numel() == 0:
            return
        lo, hi = float(X.amin()), float(X.amax())
    atol = 1e-2  # check_min_max_scaling's
    if remedy is None:
        remedy = (
            f"pass input_transform=Normalize(d={datapoints.shape[-1]}, bounds=...) "
            "(botorch.models.transforms.input), with the search space's bounds"
        )
    if lo < -atol or hi > 1.0 + atol:
        warnings.warn(
            "Data (input features) is not contained to the unit cube (values "
            f"from {lo:.3g} to {hi:.3g}), which the default kernel's priors "
            f"assume. Please consider min-max scaling the input data: {remedy}.",
            InputDataWarning,
            stacklevel=4,
        )


def padded_train_covariance(
    K: Tensor, design_mask: Tensor | None, nugget: float | None
) -> Tensor:
    r"""``K + nugget · mean(diag K) · I`` with padding designs uncoupled.

    Padding designs get an independent ``N(0, 1)`` prior, uncoupled from the
    real ones; the mean of the diagonal is over the real designs.

    Args:
        K: ``batch_shape x n x n`` prior covariance at the training designs.
        design_mask: Optional ``batch_shape x n`` bool (False: padding).
        nugget: Relative diagonal term; default ``1e-8`` (float64) /
            ``1e-6`` (float32).

    Returns:
        ``batch_shape x n x n`` training covariance.
    """
    if design_mask is not None:
        # padding designs: independent N(0, 1), uncoupled from real ones
        m = design_mask.to(K)
        K = K * (m.unsqueeze(-1) * m.unsqueeze(-2)) + torch.diag_embed(1.0 - m)
    if nugget is None:
        nugget = 1e-8 if K.dtype == torch.float64 else 1e-6
    if nugget:
        diag = K.diagonal(dim1=-2, dim2=-1)
        if design_mask is None:
            scale = diag.mean(-1, keepdim=True)
        else:  # the real designs' mean prior variance
            m = design_mask.to(diag)
            scale = (diag * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True)
        diag = diag + nugget * scale
        # out of place: a kernel's backward may need its own output (RQ's
        # power, Periodic's and RBF's exp, a product's factors), which an
        # in-place write would corrupt; without a graph K may be a kernel's
        # stored tensor. One copy, no n x n diag_embed.
        K = K.diagonal_scatter(diag, dim1=-2, dim2=-1)
    return K


class PairwiseTrainingData:
    r"""The training data of a :class:`~prefbo.models.PairwisePreferenceGP`.

    Setting the data checks it, merges (numerically) duplicate designs as
    BoTorch's ``PairwiseGP`` does (unbatched, unmasked data only), drops a warm
    start of another size, clears the cached approximation and shows the designs
    to a learned input transform. The host model registers the buffers
    ``datapoints``, ``comparisons``, ``design_mask`` and ``comparison_mask`` and
    provides ``_consolidate`` (the ``(rtol, atol)`` of the merge), ``_warm``,
    ``_state``, ``_state_key`` and ``_get_state``.
    """

    def set_train_data(
        self,
        datapoints: Tensor | None = None,
        comparisons: Tensor | None = None,
        strict: bool = False,
        update_model: bool = True,
        design_mask: Tensor | None = None,
        comparison_mask: Tensor | None = None,
    ) -> None:
        r"""Replace the training data.

        Args:
            datapoints: ``batch_shape x n x d`` designs.
            comparisons: ``batch_shape x m x 2`` ``[winner, loser]`` indices.
            strict: If True, the new data must keep the old shapes, dtype and
                device.
            update_model: If True, find the new mode now (else on first use).
            design_mask: Optional ``batch_shape x n`` bool (False: padding).
            comparison_mask: Optional ``batch_shape x m`` bool (False: padding).
        """
        if datapoints is None and comparisons is None:
            return
        datapoints, comparisons, design_mask, comparison_mask = validate_masked_data(
            datapoints, comparisons, design_mask, comparison_mask
        )
        if strict and self.unconsolidated_datapoints is not None:
            check_same_layout(
                datapoints,
                comparisons,
                self.unconsolidated_datapoints,
                self.unconsolidated_comparisons,
            )
        self.unconsolidated_datapoints = datapoints
        self.unconsolidated_comparisons = comparisons
        rtol, atol = self._consolidate
        self.design_mask = design_mask
        self.comparison_mask = comparison_mask
        if datapoints.ndim == 2 and design_mask is None and comparison_mask is None:
            dp, cp, idx = consolidate_duplicates(
                datapoints, comparisons, rtol=rtol, atol=atol
            )
        else:
            dp, cp, idx = datapoints, comparisons, None
        warm = self._warm
        if isinstance(warm, GaussianApproximation):
            warm = warm.mode
        if isinstance(warm, Tensor) and warm.shape != dp.shape[:-1]:
            self._warm = None  # (EP sites are checked against the comparisons)
        self.datapoints = dp
        self.comparisons = cp
        self.consolidated_indices = idx
        self._state = None
        self._state_key = None
        self._learn_input_transform()
        if update_model:
            self._get_state()

    def _learn_input_transform(self) -> None:
        r"""Show the training designs to the input transform in train mode, as
        BoTorch's ``PairwiseGP`` does when its data are set, so that learned
        statistics (``Normalize``'s bounds) come from these designs before any
        fit; without it the transform stayed at its initial identity bounds
        until a training-mode forward."""
        transform = getattr(self, "input_transform", None)
        if transform is None:
            return
        was_training = transform.training
        transform.train()
        try:
            with torch.no_grad():
                transform(self.datapoints)
        finally:
            transform.train(was_training)

    def _has_no_data(self) -> bool:
        return self.datapoints is None

    @property
    def train_inputs(self) -> tuple[Tensor, ...]:
        r"""``(datapoints,)`` (unconsolidated), for BoTorch's fitting closures."""
        return () if self._has_no_data() else (self.unconsolidated_datapoints,)

    @property
    def train_targets(self) -> Tensor | None:
        r"""The (unconsolidated) comparisons, for BoTorch's fitting closures."""
        return self.unconsolidated_comparisons

    @property
    def n(self) -> int:
        r"""Number of (consolidated) designs."""
        return self.datapoints.shape[-2]

    @property
    def m(self) -> int:
        r"""Number of comparisons."""
        return self.comparisons.shape[-2]

    @property
    def dim(self) -> int:
        r"""Number of input features."""
        return self.datapoints.shape[-1]

    @property
    def batch_shape(self) -> torch.Size:
        r"""Batch shape of the model (of the data, e.g. one element per user)."""
        if self._has_no_data():
            return torch.Size()
        return self.datapoints.shape[:-2]
