r"""Sparse variational preference GP (SVGP, Hensman et al. 2015).

:class:`VariationalPreferenceGP` is a GPyTorch ``ApproximateGP`` and a BoTorch
``Model`` with ``t = num_utilities`` latent functions (one per utility, or
one per label), a whitened Cholesky variational distribution
``q(u) = N(m, S)`` over ``M`` inducing values per latent function, any prefbo
likelihood, and data from a :mod:`prefbo.data` container (the one the
likelihood declares as its ``data_type``). Fit it with
:func:`prefbo.fit.fit_variational` (minibatch ELBO over answers); the ELBO's
terms are in :mod:`prefbo.models.variational_terms`.

Latents and outputs: with ``Q`` latent GPs ``g_q`` and a mixing matrix
``W`` (``Q x t``), utility ``j`` is ``f_j = Σ_q W[q, j] g_q``. Independent
utilities (``IndependentMultitaskVariationalStrategy``) have ``W = I``; the
linear model of coregionalisation (``LMCVariationalStrategy``) learns ``W``.
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.models.likelihoods import pairwise as botorch_pairwise
from botorch.models.model import Model
from botorch.models.utils.inducing_point_allocators import InducingPointAllocator
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.means import ConstantMean, Mean, ZeroMean
from gpytorch.models import ApproximateGP
from gpytorch.variational import (
    CholeskyVariationalDistribution,
    IndependentMultitaskVariationalStrategy,
    LMCVariationalStrategy,
    VariationalStrategy,
)
from torch import Tensor

from prefbo.data.containers import (
    ChoiceSets,
    LabelComparisons,
    PairwiseComparisons,
    Rankings,
)
from prefbo.data.minibatch import PreferenceData
from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.inducing.allocators import ConditionalVarianceReduction
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.likelihoods.base import PreferenceLikelihood
from prefbo.likelihoods.pairwise import as_prefbo_likelihood
from prefbo.models.training_data import warn_outside_unit_cube
from prefbo.models.variational_terms import VariationalTermsMixin, data_inputs
from prefbo.utils.checks import check_int

COREGIONALIZATIONS = ("independent", "lmc")
DEFAULT_NUM_INDUCING = 128
_CONTAINERS = (PairwiseComparisons, LabelComparisons, Rankings, ChoiceSets)


def _resolve_likelihood(likelihood: object) -> PreferenceLikelihood:
    if likelihood is None or isinstance(
        likelihood, botorch_pairwise.PairwiseLikelihood
    ):
        return as_prefbo_likelihood(likelihood)
    if isinstance(likelihood, PreferenceLikelihood):
        return likelihood
    raise InputTypeError(
        "likelihood must be None (pairwise probit), a prefbo PreferenceLikelihood "
        "(e.g. a PairwiseLikelihood), or a BoTorch pairwise likelihood; got "
        f"{type(likelihood).__name__}."
    )


class VariationalPreferenceGP(VariationalTermsMixin, Model, ApproximateGP):
    r"""Sparse variational GP over ``t`` utilities for any preference likelihood.

    Example:
        >>> data = PairwiseComparisons(X, comparisons)
        >>> model = VariationalPreferenceGP(data, inducing_points=100)
        >>> fit_variational(model, batch_size=1024, epochs=50, seed=0)
        >>> model.posterior(torch.rand(5, 2, X.shape[-1])).mean  # 5 x 2 x 1
    """

    def __init__(
        self,
        data: PreferenceData | None = None,
        likelihood: Any = None,
        *,
        num_utilities: int | None = None,
        inducing_points: Tensor | int | None = None,
        inducing_point_allocator: InducingPointAllocator | None = None,
        learn_inducing_points: bool = True,
        covar_module: Kernel | None = None,
        mean_module: Mean | None = None,
        coregionalization: str = "independent",
        num_latents: int | None = None,
    ) -> None:
        r"""
        Args:
            data: A :class:`~prefbo.data.PairwiseComparisons`,
                :class:`~prefbo.data.ChoiceSets`, :class:`~prefbo.data.Rankings`
                or :class:`~prefbo.data.LabelComparisons` with unbatched
                ``n x d`` designs (contexts); or ``None`` (then pass
                ``inducing_points`` as a tensor and the data to
                :func:`~prefbo.fit.fit_variational`). It must be the
                likelihood's ``data_type``; its ``answers`` are the
                likelihood's ``*answers``.
            likelihood: ``None`` (pairwise probit, σ = 1), any prefbo
                :class:`~prefbo.likelihoods.PreferenceLikelihood` (e.g. a
                :class:`~prefbo.likelihoods.PairwiseLikelihood`), or a BoTorch
                pairwise likelihood. Its parameters (e.g. the JND threshold)
                are learned with the hyperparameters.
            num_utilities: ``t``, the number of latent utilities (labels for
                label data); default ``num_labels`` for label data, else 1.
            inducing_points: An ``M x d`` tensor of locations; or their
                number ``M``, chosen among the designs by
                ``inducing_point_allocator``; default
                ``min(n, 128)`` chosen that way.
            inducing_point_allocator: A BoTorch ``InducingPointAllocator``
                (e.g. :class:`~prefbo.inducing.ConditionalVarianceReduction`,
                the default, :class:`~prefbo.inducing.EntropyDPP`,
                :class:`~prefbo.inducing.KMeans`) run on the designs with
                the model's kernel.
            learn_inducing_points: Whether the locations are learned.
            covar_module: A GPyTorch kernel with batch shape ``[]`` or
                ``[Q]``; default
                :func:`~prefbo.kernels.default_preference_covar_module`
                (BoTorch ``PairwiseGP``'s), one per latent GP.
            mean_module: A GPyTorch mean. Default for label data
                (:class:`~prefbo.data.Rankings`,
                :class:`~prefbo.data.LabelComparisons`): a learned constant
                per latent GP (``ConstantMean``) — the population's baseline
                preference for each label, which label comparisons identify
                (up to one common shift); otherwise ``ZeroMean``, since a
                constant is invisible to comparisons of designs.
            coregionalization: ``"independent"`` (one GP per utility) or
                ``"lmc"`` (``Q`` GPs mixed by learned coefficients).
            num_latents: ``Q`` for ``"lmc"``; default ``t``.
        """
        likelihood = _resolve_likelihood(likelihood)
        if data is not None and not isinstance(data, _CONTAINERS):
            raise InputTypeError(
                "data must be a PairwiseComparisons, ChoiceSets, Rankings or "
                f"LabelComparisons container, or None; got {type(data).__name__}."
            )
        X = None if data is None else data_inputs(data)
        if X is not None and X.ndim != 2:
            raise UnsupportedError(
                "VariationalPreferenceGP needs unbatched n x d designs; got "
                f"datapoints of shape {tuple(X.shape)}."
            )
        t = self._num_utilities(num_utilities, data, likelihood)
        if coregionalization not in COREGIONALIZATIONS:
            raise InputDataError(
                f"coregionalization must be one of {COREGIONALIZATIONS}; got "
                f"{coregionalization!r}."
            )
        lmc = coregionalization == "lmc"
        if num_latents is not None and not lmc:
            raise InputDataError(
                "num_latents is only used with coregionalization='lmc'; got "
                f"num_latents={num_latents} with {coregionalization!r}."
            )
        q = check_int("num_latents", num_latents, 1) if num_latents is not None else t
        latent_shape = torch.Size([q]) if (lmc or t > 1) else torch.Size()
        Z = self._inducing_tensor(inducing_points, inducing_point_allocator, X)
        dim, tkw = Z.shape[-1], {"dtype": Z.dtype, "device": Z.device}
        if covar_module is None:
            covar_module = default_preference_covar_module(
                dim, batch_shape=latent_shape, dtype=Z.dtype
            ).to(Z.device)
            if X is not None:
                warn_outside_unit_cube(
                    X,
                    None,
                    remedy=f"scale the designs to [0, 1]^{dim} before building the "
                    "data, e.g. botorch.utils.transforms.normalize(X, bounds)",
                )
        if not isinstance(covar_module, Kernel):
            raise InputTypeError(
                "covar_module must be a GPyTorch Kernel; got "
                f"{type(covar_module).__name__}."
            )
        if covar_module.batch_shape not in (torch.Size(), latent_shape):
            raise InputDataError(
                "covar_module must have batch shape [] or the latent batch shape "
                f"{list(latent_shape)}; got {list(covar_module.batch_shape)}."
            )
        if not isinstance(inducing_points, Tensor):
            allocator = inducing_point_allocator or ConditionalVarianceReduction()
            Z = allocator.allocate_inducing_points(X, covar_module, Z.shape[-2])
        q_u = CholeskyVariationalDistribution(Z.shape[-2], batch_shape=latent_shape)
        strategy = VariationalStrategy(
            self, Z, q_u, learn_inducing_locations=learn_inducing_points
        )
        if lmc:
            strategy = LMCVariationalStrategy(
                strategy, num_tasks=t, num_latents=q, latent_dim=-1
            )
        elif t > 1:
            strategy = IndependentMultitaskVariationalStrategy(
                strategy, num_tasks=t, task_dim=-1
            )
        super().__init__(variational_strategy=strategy)
        self.likelihood = likelihood
        self.covar_module = covar_module
        if mean_module is None:
            if getattr(data, "num_labels", None) is not None:
                mean_module = ConstantMean(batch_shape=latent_shape)
            else:
                mean_module = ZeroMean(batch_shape=latent_shape)
        self.mean_module = mean_module
        self._num_outputs = t
        self._num_latents = q if latent_shape else 1
        self.coregionalization = coregionalization
        self.to(**tkw)
        # q(u) starts at the whitened prior N(0, I), deterministically (GPyTorch
        # would add N(0, 1e-3²) noise to the mean on the first call)
        self.base_variational_strategy.variational_params_initialized.fill_(1)
        self.data: PreferenceData | None = None
        if data is not None:
            self.set_data(data)

    # ------------------------------------------------------------ construction
    @staticmethod
    def _num_utilities(
        num_utilities: object, data: PreferenceData | None, likelihood: Any
    ) -> int:
        labels = getattr(data, "num_labels", None)
        if num_utilities is None:
            t = 1 if labels is None else labels
        else:
            t = check_int("num_utilities", num_utilities, 1)
        if not likelihood.multi_output and t != 1:
            raise UnsupportedError(
                f"{type(likelihood).__name__} scores one utility per design; got "
                f"num_utilities={t}. Use a multi-utility likelihood (Pareto, choice, "
                "labels) or num_utilities=1."
            )
        return t

    @staticmethod
    def _inducing_tensor(
        inducing_points: object, allocator: object, X: Tensor | None
    ) -> Tensor:
        r"""The given ``M x d`` locations, or a placeholder of ``M`` rows of ``X``."""
        if isinstance(inducing_points, Tensor):
            if allocator is not None:
                raise InputDataError(
                    "pass inducing_points as a number (chosen by "
                    "inducing_point_allocator) or as a tensor of locations, not "
                    "both; got a tensor and an allocator."
                )
            if not inducing_points.is_floating_point() or inducing_points.ndim != 2:
                raise InputDataError(
                    "inducing_points must be a floating M x d tensor; got "
                    f"{inducing_points.dtype} of shape {tuple(inducing_points.shape)}."
                )
            if X is not None and (
                inducing_points.shape[-1] != X.shape[-1]
                or inducing_points.dtype != X.dtype
            ):
                raise InputDataError(
                    f"inducing_points must be M x {X.shape[-1]} of dtype {X.dtype} "
                    "like the designs; got "
                    f"{tuple(inducing_points.shape)} of dtype {inducing_points.dtype}."
                )
            finite = torch.isfinite(inducing_points)
            if not bool(finite.all()):
                raise InputDataError(
                    "inducing_points must be finite; got "
                    f"{int((~finite).sum())} NaN or infinite entries (first at "
                    f"{tuple((~finite).nonzero()[0].tolist())})."
                )
            return inducing_points.detach().clone()
        if X is None:
            raise InputDataError(
                "without data, inducing_points must be an M x d tensor of locations; "
                f"got {type(inducing_points).__name__}."
            )
        if allocator is not None and not isinstance(allocator, InducingPointAllocator):
            raise InputTypeError(
                "inducing_point_allocator must be a BoTorch InducingPointAllocator; "
                f"got {type(allocator).__name__}."
            )
        n = X.shape[-2]
        if inducing_points is None:
            num = min(n, DEFAULT_NUM_INDUCING)
        else:
            num = check_int("inducing_points", inducing_points, 1)
            if num > n:
                raise InputDataError(
                    f"inducing_points (a number) must be at most the number of designs "
                    f"n={n}; got {num}."
                )
        return X[:num]

    def set_data(self, data: PreferenceData) -> None:
        r"""Attach (or replace) the training data.

        Args:
            data: A container whose inputs are ``n x d`` like the inducing
                points and whose answers the likelihood reads.
        """
        if not isinstance(data, _CONTAINERS):
            raise InputTypeError(
                "data must be a PairwiseComparisons, ChoiceSets, Rankings or "
                f"LabelComparisons container; got {type(data).__name__}."
            )
        X = data_inputs(data)
        Z = self.base_variational_strategy.inducing_points
        if X.ndim != 2 or X.shape[-1] != Z.shape[-1] or X.dtype != Z.dtype:
            raise InputDataError(
                f"data must have n x {Z.shape[-1]} inputs of dtype {Z.dtype}; got "
                f"{tuple(X.shape)} of dtype {X.dtype}."
            )
        self.likelihood.check_data(data)
        labels = getattr(data, "num_labels", None)
        if labels is not None and labels != self.num_outputs:
            raise InputDataError(
                f"label data need one utility per label: num_labels={labels}, got "
                f"num_utilities={self.num_outputs}."
            )
        self.data = data

    # -------------------------------------------------------------- properties
    @property
    def num_outputs(self) -> int:
        r"""``t``, the number of utilities."""
        return self._num_outputs

    @property
    def batch_shape(self) -> torch.Size:
        r"""Always ``torch.Size([])``: the model is unbatched."""
        return torch.Size()

    @property
    def base_variational_strategy(self) -> VariationalStrategy:
        r"""The whitened ``VariationalStrategy`` of the ``Q`` latent GPs."""
        strategy = self.variational_strategy
        return getattr(strategy, "base_variational_strategy", strategy)

    @property
    def datapoints(self) -> Tensor:
        r"""The ``n x d`` training inputs (the inducing points without data)."""
        if self.data is None:
            return self.base_variational_strategy.inducing_points
        return data_inputs(self.data)

    def mixing_matrix(self) -> Tensor:
        r"""``W``, ``Q x t``: utility ``j`` is ``Σ_q W[q, j] g_q``."""
        if self.coregionalization == "lmc":
            return self.variational_strategy.lmc_coefficients
        Z = self.base_variational_strategy.inducing_points
        return torch.eye(self.num_outputs, dtype=Z.dtype, device=Z.device)

    # ---------------------------------------------------------------- GPyTorch
    def forward(self, X: Tensor) -> MultivariateNormal:
        r"""The prior of the ``Q`` latent GPs at ``X`` (``... x n x d``)."""
        return MultivariateNormal(self.mean_module(X), self.covar_module(X))

    def _add_observation_noise(
        self, mvn: MultivariateNormal, observation_noise: bool | Tensor
    ) -> MultivariateNormal:
        r"""``mvn`` with the utility noise added to its covariance's diagonal."""
        mean = mvn.mean  # batch x q (one utility) or batch x q x t
        if observation_noise is True:
            sigma = getattr(self.likelihood, "noise_std", None)
            if sigma is None:
                raise UnsupportedError(
                    f"observation_noise=True needs a likelihood with noise_std; "
                    f"{type(self.likelihood).__name__} has none. Pass a tensor."
                )
            noise = torch.full_like(mean, float(sigma) ** 2)
        elif isinstance(observation_noise, Tensor):
            noise = observation_noise.to(mean)
            if self.num_outputs == 1 and noise.ndim == mean.ndim + 1:
                noise = noise.squeeze(-1)
            noise = noise.expand(mean.shape)
        else:
            raise InputTypeError(
                "observation_noise must be a bool or a tensor; got "
                f"{type(observation_noise).__name__}."
            )
        cov = mvn.lazy_covariance_matrix.add_diagonal(
            noise.reshape(mean.shape[: -2 if self.num_outputs > 1 else -1] + (-1,))
        )
        return type(mvn)(mean, cov)

    # ------------------------------------------------------------------ BoTorch
    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ) -> GPyTorchPosterior:
        r"""The variational posterior of the utilities at ``X``.

        Args:
            X: A ``batch_shape x q x d`` tensor of designs.
            output_indices: Not supported (must be ``None``).
            observation_noise: If True, add the likelihood's utility noise
                ``σ²`` (``noise_std²``) to every utility's variance (the noisy
                utility an answer compares; BoTorch's ``qMaxValueEntropy``
                asks for it); a tensor broadcastable to the ``batch_shape x q
                x t`` output is added as given.
            posterior_transform: An optional BoTorch posterior transform.

        Returns:
            A ``GPyTorchPosterior`` over ``batch_shape x q x t``.
        """
        if output_indices is not None:
            raise UnsupportedError(
                "VariationalPreferenceGP.posterior does not support output_indices; "
                f"got output_indices={output_indices}."
            )
        dim = self.base_variational_strategy.inducing_points.shape[-1]
        if not isinstance(X, Tensor) or X.ndim < 2 or X.shape[-1] != dim:
            got = tuple(X.shape) if isinstance(X, Tensor) else type(X).__name__
            raise InputDataError(
                f"X must be a batch_shape x q x {dim} tensor; got {got}."
            )
        self.eval()
        if self._num_latents > 1 and X.ndim > 2:
            X = X.unsqueeze(-3)  # batch x 1 x q x d, broadcasts with the Q GPs
        mvn = self(X)
        if observation_noise is not False:
            mvn = self._add_observation_noise(mvn, observation_noise)
        posterior = GPyTorchPosterior(mvn)
        if posterior_transform is not None:
            posterior = posterior_transform(posterior)
        return posterior
