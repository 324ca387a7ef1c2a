r"""The exact skew-GP posterior of pairwise preferences, by sampling.

Probit answers (``noise="probit"``, Benavoli et al. 2021): with
``Σ = D K Dᵀ + s² I`` (``m x m``) and ``C* = K(X*, X) Dᵀ`` the posterior utility
at any ``X*`` is

    f* = C* Σ⁻¹ r1 + r0,   r1 ~ N(0, Σ) truncated to r1 > 0,
                          r0 ~ N(0, K** - C* Σ⁻¹ C*ᵀ),

so one ``m``-dimensional truncated-normal sample (drawn by
:class:`~prefbo.sampling.GibbsSampler` or :class:`~prefbo.sampling.LinESS`)
serves every test point. The hard-constraint
models sample the utilities at the designs instead (``f ~ N(0, K)`` restricted
to a polytope) and predict by Gaussian conditioning:

- ``noise="none"``: consistent preferences, ``f_w - f_l > 0``;
- ``noise="jnd"``: just-noticeable difference ``δ``: ``f_w - f_l > δ`` for
  answers and ``|f_i - f_j| ≤ δ`` for indiscernible pairs;
- ``noise="shared"``: one noise draw per design, ``[f; v]`` with
  ``v ~ N(0, σ² I)`` and ``f_w + v_w - f_l - v_l > 0``.

In all cases the test-point posterior is ``K(X*, X) w_s + r0`` with a stored
weight vector ``w_s`` per draw and ``Cov(r0) = K** - K(X*, X) Q K(X, X*)``; the
sample-based :class:`~prefbo.posteriors.SkewGPPosterior` carries both.
Hyperparameters are not learnt from the (orthant-probability) evidence:
:meth:`SkewGP.fit_hyperparameters` fits them by the EP or Laplace evidence.

Size: a resample holds about ``3 p²`` numbers (``p = m`` for the probit model)
and its draws twice; above ``max_dimension`` SkewGP refuses, naming
:class:`~prefbo.models.PairwiseEPGP` (:mod:`prefbo.models.skew_checks`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models.model import Model
from botorch.models.transforms.input import InputTransform
from gpytorch.kernels import Kernel
from torch import Tensor

from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.inference.cholesky import jittered_cholesky
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.likelihoods.pairwise import PairwiseProbitLikelihood
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.models.ep import PairwiseEPGP
from prefbo.models.laplace import PairwiseLaplaceGP
from prefbo.models.prediction import check_finite_points
from prefbo.models.skew_checks import (
    check_consistent,
    check_jnd,
    check_progress,
    check_skew_data,
    check_skew_size,
    progress_hook,
    sampler_options,
)
from prefbo.models.training_data import warn_outside_unit_cube
from prefbo.posteriors.samples import SkewGPPosterior
from prefbo.sampling import GibbsSampler, LinESS
from prefbo.utils.checks import (
    check_int,
    check_nonneg_float,
    check_seed,
)

NOISE_MODELS = ("probit", "none", "jnd", "shared")


def _preference_kernel(
    covar_module: Kernel | None,
    datapoints: Tensor,
    input_transform: InputTransform | None,
) -> Kernel:
    r"""``covar_module`` (checked) or BoTorch ``PairwiseGP``'s default kernel
    over the (transformed) designs' dimension, in ``datapoints``' dtype and
    device."""
    if covar_module is None:
        d = datapoints.shape[-1]
        if input_transform is not None:
            with torch.no_grad():
                d = input_transform.preprocess_transform(datapoints).shape[-1]
        covar_module = default_preference_covar_module(d, dtype=datapoints.dtype)
        if input_transform is None:
            warn_outside_unit_cube(datapoints, None)
    if not isinstance(covar_module, Kernel):
        raise InputTypeError(
            "covar_module must be a gpytorch Kernel; got "
            f"{type(covar_module).__name__}."
        )
    return covar_module.to(datapoints)


class SkewGP(Model):
    r"""Exact (sampled) posterior of a GP utility given pairwise answers.

    Example:
        >>> model = SkewGP(datapoints, comparisons)
        >>> model.fit_hyperparameters()          # EP evidence, then resample
        >>> qEUBO = qExpectedUtilityOfBestOption(pref_model=model)
    """

    _num_outputs = 1

    def __init__(
        self,
        datapoints: Tensor,
        comparisons: Tensor,
        covar_module: Kernel | None = None,
        noise: str = "probit",
        *,
        noise_std: float = 1.0,
        jnd_threshold: float | None = None,
        indiscernible: Tensor | None = None,
        input_transform: InputTransform | None = None,
        num_samples: int = 2048,
        num_chains: int = 16,
        burnin: int | None = None,
        thinning: int | None = None,
        sampler: str = "gibbs",
        seed: int | None = None,
        nugget: float | None = None,
        max_dimension: int | None = 2000,
        progress: bool | Callable[[int, int], None] | None = None,
    ) -> None:
        r"""
        Args:
            datapoints: ``n x d`` designs (batched data are not supported).
            comparisons: ``m x 2`` ``[winner, loser]`` indices.
            covar_module: GPyTorch kernel; default BoTorch ``PairwiseGP``'s.
            noise: ``"probit"``, ``"none"``, ``"jnd"`` or ``"shared"``.
            noise_std: σ of the probit / shared-noise models (``s = √2σ``).
            jnd_threshold: δ of ``noise="jnd"``.
            indiscernible: ``m_b x 2`` pairs answered "no noticeable
                difference" (``noise="jnd"`` only).
            input_transform: An input transform applied to designs.
            num_samples: Stored exact draws, exactly this many (``≥ 1``): each
                chain runs ``ceil(num_samples / num_chains)`` kept draws and
                the surplus of the last round is dropped.
            num_chains: Chains run in parallel (``≥ 1``).
            burnin: Transitions discarded per chain (``≥ 0``; default 200 Gibbs
                sweeps, 1000 LinESS steps).
            thinning: Transitions skipped between kept draws (``≥ 0``; default
                8 Gibbs sweeps, 4 LinESS steps).
            sampler: ``"gibbs"`` (exact coordinate-wise conditionals; by far
                the most effective samples per second on these targets, see
                ``benchmarks/sampler_throughput.py``) or ``"lin_ess"``
                (rejection-free linear elliptical slice sampling).
            seed: Seed of the sampler (an ``int`` or ``None``).
            nugget: Relative diagonal (finite, ``≥ 0``) added to ``K`` in the
                hard-constraint models (default ``1e-6`` float64 / ``1e-4``
                float32).
            max_dimension: Largest sampled dimension ``p`` (``m`` answers for
                the probit, ``n`` or ``2n`` designs otherwise) to sample;
                above it :meth:`resample` raises, naming the memory it would
                need and :class:`~prefbo.models.PairwiseEPGP`. ``None``: no
                limit. See :mod:`prefbo.models.skew_checks` for the sizes.
            progress: ``True`` shows a tqdm bar over the sampler's
                transitions (on stderr), ``False`` none, a callable is called
                as ``progress(done, total)`` per chain transitions; ``None``
                (default) shows the bar when ``p >= 500``. Never changes the
                draws.

        Raises:
            InputDataError: Malformed data, an unknown ``noise`` or ``sampler``,
                a count below its minimum, a non-finite or non-positive
                ``jnd_threshold`` or a negative / non-finite ``nugget``.
            InputTypeError: A count or ``seed`` that is not an integer, a
                non-numeric ``jnd_threshold`` or ``nugget``, ``covar_module``
                not a Kernel, or ``progress`` not a bool, callable or None.
            UnsupportedError: Batched data, or a sampled dimension above
                ``max_dimension``.
        """
        super().__init__()
        if noise not in NOISE_MODELS:
            raise InputDataError(f"noise must be one of {NOISE_MODELS}; got {noise!r}.")
        datapoints, comparisons = check_skew_data(datapoints, comparisons)
        jnd_threshold, indiscernible = check_jnd(
            noise, jnd_threshold, indiscernible, datapoints.shape[-2]
        )
        if noise == "none":
            check_consistent(comparisons, datapoints.shape[-2])
        self.noise = noise
        self.likelihood = PairwiseProbitLikelihood(noise_std=noise_std)
        self.jnd_threshold = jnd_threshold
        self.indiscernible = indiscernible
        self.datapoints, self.comparisons = datapoints, comparisons
        if input_transform is not None:
            input_transform.to(datapoints)
            self.input_transform = input_transform
        self.covar_module = _preference_kernel(
            covar_module, datapoints, input_transform
        )
        self._sampler_options = sampler_options(
            sampler, num_chains, burnin, thinning, seed
        )
        self._sampler_cls = GibbsSampler if sampler == "gibbs" else LinESS
        self.num_samples = check_int("num_samples", num_samples, 1)
        if nugget is not None:
            nugget = check_nonneg_float("nugget", nugget)
        self._nugget = nugget
        if max_dimension is not None:
            max_dimension = check_int("max_dimension", max_dimension, 1)
        self.max_dimension = max_dimension
        check_progress(progress)
        self.progress = progress
        self.weights: Tensor | None = None  # S x n
        self.Q: Tensor | None = None  # n x n
        self.latent_samples: Tensor | None = None  # S x p (r1, f or [f; v])
        self.resample()

    # -------------------------------------------------------------- BoTorch
    @property
    def num_outputs(self) -> int:  # noqa: D102
        return self._num_outputs

    @property
    def batch_shape(self) -> torch.Size:  # noqa: D102
        return torch.Size()

    def _train_inputs(self) -> Tensor:
        if hasattr(self, "input_transform"):
            return self.input_transform.preprocess_transform(self.datapoints)
        return self.datapoints

    # -------------------------------------------------------------- sampling
    def _difference_matrix(self, rows: Tensor) -> Tensor:
        n = self.datapoints.shape[-2]
        D = self.datapoints.new_zeros(rows.shape[0], n)
        k = torch.arange(rows.shape[0], device=rows.device)
        D[k, rows[:, 0]] = 1.0
        D[k, rows[:, 1]] = -1.0
        return D

    def resample(self, num_samples: int | None = None, seed: int | None = None) -> None:
        r"""(Re)draw the exact posterior samples at the current hyperparameters.

        Args:
            num_samples: New number of draws, exactly this many (default:
                unchanged).
            seed: New sampler seed, an ``int`` (default: unchanged).

        Raises:
            InputTypeError: ``num_samples`` or ``seed`` is not an integer.
            InputDataError: ``num_samples < 1``, or ``seed`` outside what a
                ``torch.Generator`` takes.
            UnsupportedError: The sampled dimension is above
                ``max_dimension`` (checked before anything large is
                formed).
        """
        if num_samples is not None:
            num_samples = check_int("num_samples", num_samples, 1)
        # both are checked before either is set
        seed = check_seed("seed", seed, allow_none=True)
        if num_samples is not None:
            self.num_samples = num_samples
        if seed is not None:
            self._sampler_options["seed"] = seed
        n, m = self.datapoints.shape[-2], self.comparisons.shape[-2]
        check_skew_size(
            self.noise,
            n,
            m,
            m + (0 if self.indiscernible is None else 2 * len(self.indiscernible)),
            self.num_samples,
            self.datapoints.element_size(),
            self.max_dimension,
            num_chains=self._sampler_options["num_chains"],
        )
        chains = self._sampler_options["num_chains"]
        draws = -(-self.num_samples // chains)
        with torch.no_grad():
            X = self._train_inputs()
            K = self.covar_module(X).to_dense()
            n = K.shape[-1]
            D = self._difference_matrix(self.comparisons)  # m x n
            if self.noise == "probit":
                S = D @ K @ D.T
                S.diagonal().add_(self.likelihood.scale**2)
                L_S = jittered_cholesky(S, name="Σ = D K Dᵀ + s² I")
                S.zero_().fill_diagonal_(-1.0)  # -I, in Σ's memory (skew_checks)
                # start every chain at |r| with r ~ N(0, Σ): in the orthant and
                # at the target's scale (an LP's max-slack point is far out)
                g = torch.Generator(device=K.device)
                g.manual_seed(self._sampler_options["seed"] or 0)
                eps = torch.randn(
                    chains, m, generator=g, dtype=K.dtype, device=K.device
                )
                start = (eps @ L_S.T).abs().clamp_min(1e-6)
                z = self._sample(
                    S,  # the constraints -I
                    torch.zeros(m, dtype=K.dtype, device=K.device),
                    L_S,
                    chains,
                    draws,
                    start=start,
                )  # S x m
                del S  # m x m: freed before the weights' copies of L_S and z
                self.latent_samples = z
                self.weights = torch.cholesky_solve(z.T, L_S).T @ D  # S x n
                self.Q = D.T @ torch.cholesky_solve(D, L_S)
                return
            nugget = self._nugget
            if nugget is None:
                nugget = 1e-6 if K.dtype == torch.float64 else 1e-4
            K = K + nugget * K.diagonal().mean() * torch.eye(
                n, dtype=K.dtype, device=K.device
            )
            L = jittered_cholesky(K, name="prior covariance K")
            tkwargs = {"dtype": K.dtype, "device": K.device}
            del K  # n x n: not needed past its factor, freed before sampling
            D = D.to(**tkwargs)
            if self.noise == "none":
                A, b, root = -D, torch.zeros(D.shape[0], **tkwargs), L
            elif self.noise == "jnd":
                # f_w - f_l > δ and |f_i - f_j| <= δ, with δ exact in K's dtype
                delta = self.jnd_threshold
                rows = [-D]
                rhs = [torch.full((D.shape[0],), -delta, **tkwargs)]
                if self.indiscernible is not None:
                    E = self._difference_matrix(self.indiscernible).to(**tkwargs)
                    rows += [E, -E]
                    rhs += [torch.full((2 * E.shape[0],), delta, **tkwargs)]
                A, b, root = torch.cat(rows), torch.cat(rhs), L
            else:  # shared: z = [f; v], v ~ N(0, σ² I)
                A = -torch.cat([D, D], dim=-1)
                b = torch.zeros(D.shape[0], **tkwargs)
                root = torch.block_diag(
                    L, self.likelihood.noise_std * torch.eye(n, **tkwargs)
                )
            z = self._sample(A, b, root, chains, draws)  # S x p
            del A, b, root  # the k x p constraints (and shared's 2n x 2n root)
            self.latent_samples = z
            f = z[:, :n]
            self.weights = torch.cholesky_solve(f.T, L).T  # S x n: K⁻¹ f
            self.Q = torch.cholesky_inverse(L)

    def _sample(
        self,
        A: Tensor,
        b: Tensor,
        root: Tensor,
        chains: int,
        draws: int,
        start: Tensor | None = None,
    ) -> Tensor:
        burnin, thinning = (
            self._sampler_options["burnin"],
            self._sampler_options["thinning"],
        )
        bar, hook = progress_hook(
            self.progress, burnin + draws * (thinning + 1), A.shape[-1]
        )
        try:
            sampler = self._sampler_cls(
                A,
                b,
                covariance_root=root,
                start=start,
                num_chains=chains,
                burnin=burnin,
                thinning=thinning,
                seed=self._sampler_options["seed"],
                progress=hook,
            )
            z = sampler.draw(draws)  # draws x chains x p
        finally:
            if bar is not None:
                bar.close()
        return z.reshape(-1, z.shape[-1])[: self.num_samples]

    # ------------------------------------------------------------ posterior
    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool = False,
        posterior_transform: Any = None,
        **kwargs: Any,
    ) -> SkewGPPosterior:
        r"""Sample-based posterior of the utility at ``X``.

        Args:
            X: ``batch_shape x q x d`` points.
            output_indices: Must be ``None`` or ``[0]``.
            observation_noise: If True, add the utility noise σ² (probit and
                shared models).
            posterior_transform: Not supported (one output).

        Returns:
            A :class:`~prefbo.posteriors.SkewGPPosterior` whose samples have
            shape ``sample_shape x batch_shape x q x 1``.
        """
        if output_indices is not None and list(output_indices) != [0]:
            raise UnsupportedError(
                f"output_indices must be None or [0]; got {output_indices}."
            )
        if posterior_transform is not None:
            raise UnsupportedError(
                "SkewGP has one output; posterior_transform is not supported."
            )
        if (
            not isinstance(X, Tensor)
            or X.ndim < 2
            or X.shape[-1] != self.datapoints.shape[-1]
        ):
            got = tuple(X.shape) if isinstance(X, Tensor) else type(X).__name__
            raise InputDataError(
                "X must be a batch_shape x q x d tensor with "
                f"d={self.datapoints.shape[-1]}; got {got}."
            )
        check_finite_points(X, "X")
        Xt = self.transform_inputs(X)
        Xtr = self._train_inputs()
        k_star = self.covar_module(Xt, Xtr).to_dense()  # batch x q x n
        k_ss = self.covar_module(Xt).to_dense()  # batch x q x q
        locations = torch.einsum("...qn,sn->s...q", k_star, self.weights)
        resid = k_ss - k_star @ self.Q @ k_star.transpose(-1, -2)
        resid = 0.5 * (resid + resid.transpose(-1, -2))
        if observation_noise and self.noise in ("probit", "shared"):
            resid = resid + self.likelihood.noise_std**2 * torch.eye(
                resid.shape[-1], dtype=resid.dtype, device=resid.device
            )
        return SkewGPPosterior(locations, resid)

    def predict_preference(self, X1: Tensor, X2: Tensor) -> Tensor:
        r"""``P(x1 ≻ x2)`` averaged over the exact draws.

        Args:
            X1: ``batch_shape x q x d``.
            X2: ``batch_shape x q x d``.

        Returns:
            ``batch_shape x q`` probabilities (answer noise included for the
            probit and shared models).
        """
        if X1.shape != X2.shape:
            raise InputDataError(
                f"X1 and X2 must have the same shape; got {tuple(X1.shape)} and "
                f"{tuple(X2.shape)}."
            )
        post = self.posterior(torch.stack([X1, X2], dim=-2))
        mu = post.locations[..., 0] - post.locations[..., 1]  # S x batch x q
        R = post.residual_covariance
        var = (R[..., 0, 0] + R[..., 1, 1] - 2 * R[..., 0, 1]).clamp_min(0)
        if self.noise in ("probit", "shared"):
            var = var + self.likelihood.scale**2
        return torch.special.ndtr(mu / var.clamp_min(1e-300).sqrt()).mean(0)

    def fit_hyperparameters(self, method: str = "ep", **fit_kwargs: Any) -> None:
        r"""Fit the kernel by the EP (or Laplace) evidence, then resample.

        The exact evidence is an ``m``-dimensional orthant probability; its EP
        approximation is accurate and differentiable. The kernel
        module is shared, so the fitted values are this model's.

        Args:
            method: ``"ep"`` or ``"laplace"``.
            **fit_kwargs: Passed to ``botorch.fit.fit_gpytorch_mll``.
        """
        if method not in ("ep", "laplace"):
            raise InputDataError(f"method must be 'ep' or 'laplace'; got {method!r}.")
        cls, mll_cls = (
            (PairwiseEPGP, PairwiseEPMLL)
            if method == "ep"
            else (PairwiseLaplaceGP, PairwiseLaplaceMLL)
        )
        surrogate = cls(
            self.datapoints,
            self.comparisons,
            likelihood=self.likelihood,
            covar_module=self.covar_module,
            input_transform=getattr(self, "input_transform", None),
        )
        fit_gpytorch_mll(mll_cls(surrogate.likelihood, surrogate), **fit_kwargs)
        self.resample()
