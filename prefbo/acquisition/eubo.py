r"""BoTorch's analytic EUBO, computed from the moments of a pair.

BoTorch's :class:`~botorch.acquisition.preference.AnalyticExpectedUtilityOfBestOption`
(Lin et al., 2022, "Preference Exploration for Efficient Bayesian Optimization
with Multiple Outcomes") scores a question ``(x1, x2)`` by the expected
utility of its better option,

    EUBO(x1, x2) = E[max(f1, f2)] = σ (φ(u) + u Φ(u)) + μ2,
    u = (μ1 - μ2) / σ,   σ² = Var(f1 - f2) (clamped at 1e-8),

under the joint posterior of ``(f1, f2) = (f(x1), f(x2))``; with a previous
winner ``w`` fixed, the question is ``(x, w)`` and BoTorch drops the constant
``μ_w``: ``σ (φ(u) + u Φ(u))`` with ``u = (μ_x - μ_w) / σ``.

:func:`eubo_values` and :class:`FastAnalyticEUBO` compute exactly this
quantity from :func:`~prefbo.acquisition.pair_moments.pair_moments`, without
the posterior objects for prefbo's models and, with the default
``ScaleKernel(RBFKernel)``, with the gradient written out in the forward pass.
:func:`~prefbo.acquisition.maximize_eubo` maximises it.
"""

from __future__ import annotations

import numpy as np
import torch
from botorch.acquisition import AcquisitionFunction
from botorch.models.model import Model
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from prefbo.acquisition.pair_moments import (
    KernelPairMoments,
    PairMoments,
    pair_moments,
)
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.models.prediction import check_finite_points


def append_winner(X: Tensor, winner: Tensor | None) -> Tensor:
    r"""``... x q x d`` options with the ``1 x d`` winner appended as the last
    option of every question (``X`` itself without a winner)."""
    if winner is None:
        return X
    return torch.cat([X, winner.expand(*X.shape[:-2], 1, X.shape[-1])], dim=-2)


def eubo_values(
    model: Model, X: Tensor, previous_winner: Tensor | None = None
) -> Tensor:
    r"""BoTorch's analytic EUBO of ``X`` (same values, faster for prefbo GPs).

    Args:
        model: A one-output preference model.
        X: ``batch_shape x 2 x d`` pairs, or ``batch_shape x 1 x d`` designs
            when ``previous_winner`` is given.
        previous_winner: Optional ``d`` or ``1 x d`` design, the second option
            of every question.

    Returns:
        ``batch_shape`` values, equal to
        ``AnalyticExpectedUtilityOfBestOption(model, previous_winner=...)(X)``.

    Raises:
        InputDataError: ``X`` of the wrong shape, or a non-finite question
            (named by its index; BoTorch's class returns NaN there).
    """
    if not isinstance(X, Tensor) or X.ndim < 2:
        got = tuple(X.shape) if isinstance(X, Tensor) else type(X).__name__
        raise InputDataError(f"X must be a batch_shape x q x d tensor; got {got}.")
    q = 1 if previous_winner is not None else 2
    if X.shape[-2] != q:
        raise InputDataError(
            f"X must have q={q} option(s) per question "
            f"({'with' if q == 1 else 'without'} previous_winner); got shape "
            f"{tuple(X.shape)}."
        )
    _check_dim(model, X)
    check_finite_points(X, "X")
    w = None
    if previous_winner is not None:
        w = check_winner(previous_winner, X.shape[-1], X)
    return pair_moments(model).eubo(append_winner(X, w), add_second_mean=w is None)


class FastAnalyticEUBO(AcquisitionFunction):
    r"""BoTorch's ``AnalyticExpectedUtilityOfBestOption``, computed from
    :func:`pair_moments`.

    Same values (to rounding) and gradients as BoTorch's class, so
    ``optimize_acqf`` follows the same path and returns the same question;
    on prefbo's GPs each evaluation skips the posterior objects. With the
    default ``ScaleKernel(RBFKernel)`` the gradient is the one written out in
    the forward pass (:meth:`KernelPairMoments.eubo_and_grad`) instead of
    autograd's graph; first derivatives only (higher ones differentiate the
    autograd form). No ``outcome_model``. :meth:`value_and_grad` returns both
    without autograd, and ``optimize_acqf(...,
    gen_candidates=gen_candidates_eubo)`` runs BoTorch's L-BFGS-B on it (in
    NumPy for float64 CPU models) and finds the same question again
    (:func:`~prefbo.acquisition.gen_candidates_eubo`; timings:
    ``benchmarks/eubo_optimizer.py --prefbo gen_candidates``).

    Example:
        >>> acqf = FastAnalyticEUBO(model)
        >>> X, _ = optimize_acqf(
        ...     acqf, bounds, q=2, num_restarts=4, raw_samples=128,
        ...     gen_candidates=gen_candidates_eubo,
        ... )

    Args:
        pref_model: A one-output preference model.
        previous_winner: Optional ``d`` or ``1 x d`` design fixed as the
            second option (then ``q = 1`` and the winner's mean is left out,
            as in BoTorch's class).
    """

    def __init__(
        self, pref_model: Model, previous_winner: Tensor | None = None
    ) -> None:
        super().__init__(model=pref_model)
        self.moments = pair_moments(pref_model)
        winner = None
        if previous_winner is not None:
            like = getattr(pref_model, "datapoints", None)
            if isinstance(like, Tensor) and like.ndim >= 2:
                d = like.shape[-1]
            else:  # no training designs to read d and dtype from
                like = torch.empty(0, dtype=torch.float64)
                d = getattr(previous_winner, "shape", (0,))[-1]
            winner = check_winner(previous_winner, d, like)
        self.register_buffer("previous_winner", winner)

    @t_batch_mode_transform()
    def forward(self, X: Tensor) -> Tensor:
        r"""EUBO of ``batch_shape x q x d`` questions (``q = 2``, or ``q = 1``
        with a previous winner); returns ``batch_shape`` values. A
        non-finite question raises an ``InputDataError`` naming it."""
        self._check_questions(X)
        winner = self.previous_winner
        if (
            self.closed_form_gradient
            and torch.is_grad_enabled()
            and X.requires_grad
            and (winner is None or not winner.requires_grad)
        ):  # the written-out gradient: autograd's graph costs more here
            values, _ = _EUBOWithGradient.apply(X, self)
            return values
        return self.moments.eubo(
            append_winner(X, winner), add_second_mean=winner is None
        )

    @property
    def closed_form_gradient(self) -> bool:
        r"""Whether :meth:`value_and_grad` is available: moments read once from
        the model (:func:`pair_moments`) with a ``ScaleKernel(RBFKernel)``."""
        moments = self.moments
        return isinstance(moments, KernelPairMoments) and moments.rbf is not None

    def value_and_grad(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""EUBO of ``b x q x d`` questions and its gradient in ``X``, both
        from the written-out forward pass, without autograd.

        The numbers ``forward`` and its backward give, for optimisers that want
        both at once (:func:`~prefbo.acquisition.gen_candidates_eubo`).
        Needs :attr:`closed_form_gradient`.

        Args:
            X: ``b x q x d`` questions (``q = 2``, or ``q = 1`` with a
                previous winner) in the model's dtype.

        Returns:
            ``(values, grad)``: ``b`` values and the ``b x q x d`` gradient.
        """
        if not self.closed_form_gradient:
            raise UnsupportedError(
                f"{type(self).__name__}.value_and_grad needs the written-out "
                "gradient (a prefbo GP whose moments are read once, with a "
                "ScaleKernel(RBFKernel)); use forward and autograd for this model."
            )
        self._check_questions(X)
        return self._value_and_grad(X)

    def _value_and_grad(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r""":meth:`value_and_grad` of checked questions."""
        winner = self.previous_winner
        values, grad = self.moments.eubo_and_grad(
            append_winner(X.detach(), winner), add_second_mean=winner is None
        )
        return values, grad[..., : X.shape[-2], :]

    @property
    def numpy_ready(self) -> bool:
        r"""Whether :meth:`numpy_value_and_grad` is available (the written-out
        gradient, float64 on the CPU, a winner that needs no gradient)."""
        winner = self.previous_winner
        return (
            self.closed_form_gradient
            and self.moments.numpy_ready
            and (winner is None or not winner.requires_grad)
        )

    def numpy_value_and_grad(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r""":meth:`value_and_grad` of a float64 ``b x q x d`` array, computed in
        NumPy (the same formula, to rounding; a fraction of torch's
        per-operation cost at these sizes). Needs :attr:`numpy_ready`.

        Args:
            X: ``b x q x d`` float64 questions.

        Returns:
            ``(values, grad)``: ``b`` values and the ``b x q x d`` gradient.
        """
        if not self.numpy_ready:
            raise UnsupportedError(
                f"{type(self).__name__}.numpy_value_and_grad needs the written-out "
                "gradient of a float64 model on the CPU; use value_and_grad."
            )
        q = 1 if self.previous_winner is not None else 2
        if X.ndim != 3 or X.shape[-2] != q:
            raise UnsupportedError(
                f"{type(self).__name__} takes b x {q} x d arrays here; got shape "
                f"{X.shape}."
            )
        winner = self.previous_winner
        if winner is not None:
            w = winner.detach().cpu().numpy()
            X = np.concatenate([X, np.broadcast_to(w, (X.shape[0], 1, X.shape[-1]))], 1)
        values, grad = self.moments.numpy_eubo_and_grad(
            X, add_second_mean=winner is None
        )
        return values, grad[:, :q]

    def _check_questions(self, X: Tensor) -> None:
        q = 1 if self.previous_winner is not None else 2
        if X.shape[-2] != q:
            raise UnsupportedError(
                f"{type(self).__name__} takes q={q} option(s) per question "
                f"({'with' if q == 1 else 'without'} a previous winner); got "
                f"X of shape {tuple(X.shape)}."
            )
        check_question_points(self.model, self.moments, X)


class _EUBOWithGradient(torch.autograd.Function):
    r"""EUBO of ``... x q x d`` questions (and, as a second, non-differentiable
    output, its gradient) whose backward is the gradient
    :meth:`FastAnalyticEUBO.value_and_grad` wrote out in the forward pass.

    A backward that builds a graph (``create_graph=True``, Hessians,
    ``torch.func`` transforms) differentiates the autograd form of the same
    EUBO instead, so higher derivatives stay exact.
    """

    @staticmethod
    def forward(X, acqf):  # noqa: D102
        return acqf._value_and_grad(X)  # (forward checked the questions)

    @staticmethod
    def setup_context(ctx, inputs, output):  # noqa: D102
        X, acqf = inputs
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(X, output[1])
        ctx.acqf = acqf

    @staticmethod
    def backward(ctx, grad_out, _):  # noqa: D102
        X, grad = ctx.saved_tensors
        if torch.is_grad_enabled():  # a graph is wanted: the autograd form
            winner = ctx.acqf.previous_winner
            with torch.enable_grad():
                values = ctx.acqf.moments.eubo(
                    append_winner(X, winner), add_second_mean=winner is None
                )
                (g,) = torch.autograd.grad(values, X, grad_out, create_graph=True)
            return g, None
        return grad_out[..., None, None] * grad, None


def check_question_points(model: Model, moments: PairMoments, X: Tensor) -> None:
    r"""The options ``X`` (``... x q x d``) an acquisition function scores:
    real, of the model's width ``d`` and (for a kernel expansion) its dtype,
    and finite.

    Raises:
        InputTypeError: ``X`` is not real, or not of the model's dtype.
        InputDataError: ``X`` of another ``d``, or a non-finite option.
    """
    if not X.is_floating_point():
        raise InputTypeError(
            f"X must be a real tensor (of the model's dtype); got {X.dtype}."
        )
    _check_dim(model, X)
    check_finite_points(X, "X")
    if isinstance(moments, KernelPairMoments) and X.dtype != moments.Z.dtype:
        raise InputTypeError(
            f"X must have the model's dtype {moments.Z.dtype}; got {X.dtype}."
        )


def _check_dim(model: Model, X: Tensor) -> None:
    r"""``X``'s last dimension against the model's input dimension, where the
    model says it (prefbo's models hold their raw ``datapoints``)."""
    datapoints = getattr(model, "datapoints", None)
    if isinstance(datapoints, Tensor) and X.shape[-1] != datapoints.shape[-1]:
        raise InputDataError(
            f"X must have d={datapoints.shape[-1]} features (the model's "
            f"datapoints); got X of shape {tuple(X.shape)}."
        )


def check_winner(previous_winner: object, d: int, like: Tensor) -> Tensor:
    r"""A ``d`` or ``1 x d`` finite tensor as a ``1 x d`` winner in ``like``'s
    dtype and device."""
    if not isinstance(previous_winner, Tensor):
        raise InputTypeError(
            "previous_winner must be a torch.Tensor of shape d or 1 x d; got "
            f"{type(previous_winner).__name__}."
        )
    if previous_winner.shape not in ((d,), (1, d)):
        raise InputDataError(
            f"previous_winner must have shape ({d},) or (1, {d}); got "
            f"{tuple(previous_winner.shape)}."
        )
    if not bool(torch.isfinite(previous_winner).all()):
        raise InputDataError(
            f"previous_winner must be finite; got {previous_winner.tolist()}."
        )
    return previous_winner.reshape(1, d).to(like)
