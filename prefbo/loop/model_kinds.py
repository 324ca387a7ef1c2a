r"""Model kinds of the loop: how a preference model is built, fitted and
warm-started, by name.

:class:`~prefbo.loop.PreferentialOptimizer`'s ``model`` names a
:class:`ModelKind` registered here: ``"laplace"``
(:class:`~prefbo.models.PairwiseLaplaceGP`), ``"ep"``
(:class:`~prefbo.models.PairwiseEPGP`, the default), ``"skew"``
(:class:`~prefbo.models.SkewGP`) and ``"variational"``
(:class:`~prefbo.models.VariationalPreferenceGP`). A new kind subclasses
:class:`ModelKind` and is added with :func:`register_model_kind`; the
optimiser itself does not change.

Example:
    >>> class MyKind(ModelKind):
    ...     model_class = MyPreferenceGP
    ...     def build(self, designs, comparisons, covar_module=None): ...
    ...     def fit(self, model, fit_options): ...
    >>> register_model_kind("mine", MyKind)
    >>> PreferentialOptimizer(bounds, model="mine")
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any

import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models.model import Model
from torch import Tensor

from prefbo.data.containers import PairwiseComparisons
from prefbo.fit.variational import fit_variational
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.likelihoods.pairwise import PairwiseLikelihood
from prefbo.loop.fit_warnings import accept_optimizer_stops, expected_fit_warnings
from prefbo.loop.registry import Registry
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP, SkewGP
from prefbo.models.variational import VariationalPreferenceGP

# model="laplace" without a covar_module: BoTorch's default kernel with the
# outputscale's box prior ending at 20 instead of 100. With nearly noiseless
# answers the exact Laplace evidence keeps rising with the outputscale, the
# curvature of decisive answers then vanishes, their variance stops shrinking
# and EUBO re-asks them; the lower cap reduces this (see
# benchmarks/decisions.md)
LAPLACE_OUTPUTSCALE_BOUNDS = (1e-2, 20.0)
# site tolerance of the loop's EP posteriors (PairwiseEPGP's default: 1e-9):
# the moments EUBO and best() read are then accurate far below what changes
# a question, in a fraction of the sweeps
EP_POSTERIOR_TOL = 1e-6
DEFAULT_SKEW_OPTIONS = {"num_samples": 256, "burnin": 50}
# full-batch Adam for the small data sets of an interactive session; at every
# answer q(u) is refitted under the kernel of the latest hyperparameter fit
DEFAULT_VARIATIONAL_FIT = {"epochs": 300, "lr": 0.05, "early_stopping_patience": 30}


class ModelKind(ABC):
    r"""How the loop builds, fits and warm-starts one kind of model.

    An instance holds one optimiser's ``model_options`` and ``seed``. The
    loop calls :meth:`build` for the model conditioned on every answer
    (under the kernel of the latest fit) and, at each refit,
    :meth:`build_for_fit`, :meth:`warm_start` from the previous fit's model
    and :meth:`fit`.

    Attributes:
        model_class: The class built; ``model_options`` are checked against
            its constructor's keywords.
        loop_options: Further ``model_options`` keys the kind itself takes.
        gaussian_posterior: Whether the posterior is Gaussian (strategies
            such as max-value entropy need one). Off unless a kind declares
            it, so a strategy that needs it is refused at construction.
        pathwise_samples: Whether BoTorch's pathwise posterior samples
            (``draw_matheron_paths``) are registered for the model (Thompson
            sampling needs them). Off unless a kind declares it.
    """

    model_class: type = Model
    loop_options: tuple[str, ...] = ()
    gaussian_posterior: bool = False
    pathwise_samples: bool = False

    def __init__(self, model_options: dict[str, Any], seed: int) -> None:
        r"""
        Args:
            model_options: The optimiser's ``model_options`` (checked).
            seed: The optimiser's seed.
        """
        self.model_options = model_options
        self.seed = seed

    def _constructor_options(self, covar_module: Any) -> dict[str, Any]:
        # modules (a kernel, a likelihood) are copied: every model, and so
        # every fit, starts at the user's object and never changes it
        opts = {
            k: copy.deepcopy(v) if isinstance(v, torch.nn.Module) else v
            for k, v in self.model_options.items()
            if k not in self.loop_options
        }
        if covar_module is not None:
            opts["covar_module"] = copy.deepcopy(covar_module)
        return opts

    @abstractmethod
    def build(
        self, designs: Tensor, comparisons: Tensor, covar_module: Any = None
    ) -> Model:
        r"""The model of ``comparisons``, ready for its posterior.

        Args:
            designs: ``n x d`` float64 designs.
            comparisons: ``m x 2`` long ``[winner, loser]`` indices.
            covar_module: A fitted kernel to use (copied), or ``None`` for
                the kind's default hyperparameters.

        Returns:
            The model (in training mode; the loop calls ``eval``).
        """

    def build_for_fit(self, designs: Tensor, comparisons: Tensor, start: Any) -> Model:
        r"""An unfitted model whose kernel starts at ``start`` (copied; ``None``:
        the defaults). Default: :meth:`build`."""
        return self.build(designs, comparisons, start)

    @abstractmethod
    def fit(self, model: Model, fit_options: dict[str, Any]) -> None:
        r"""Fit ``model``'s hyperparameters in place.

        Args:
            model: A model from :meth:`build_for_fit`.
            fit_options: The optimiser's ``fit_options`` (scipy L-BFGS-B).

        Raises:
            botorch.exceptions.ModelFittingError: The fit failed; the loop
                keeps the starting hyperparameters.
        """

    def warm_start(self, model: Model, previous: Model) -> None:
        r"""Start ``model``'s approximation where ``previous`` left it.

        ``previous`` is a model of this kind fitted on a prefix of
        ``model``'s answers. Only the starting point may change, never the
        result. Default: nothing (the kind has no warm start).
        """
        return None


class _PairwiseKind(ModelKind):
    r"""Laplace and EP: fitted by BoTorch on the approximate evidence."""

    mll_class: type
    gaussian_posterior = True
    pathwise_samples = True

    def fit(self, model: Model, fit_options: dict[str, Any]) -> None:  # noqa: D102
        fit_gpytorch_mll(
            self.mll_class(model.likelihood, model),
            warning_handler=accept_optimizer_stops,
            optimizer_kwargs={"options": dict(fit_options)},
        )

    def warm_start(self, model: Model, previous: Model) -> None:  # noqa: D102
        model.warm_start(previous)


class LaplaceKind(_PairwiseKind):
    r""":class:`~prefbo.models.PairwiseLaplaceGP`; unless ``model_options`` give
    a ``covar_module``, BoTorch's default kernel with the outputscale prior's
    box ending at :data:`LAPLACE_OUTPUTSCALE_BOUNDS`\ ``[1]``."""

    model_class = PairwiseLaplaceGP
    mll_class = PairwiseLaplaceMLL

    def build(self, designs, comparisons, covar_module=None):  # noqa: D102
        opts = self._constructor_options(covar_module)
        if "covar_module" not in opts:
            opts["covar_module"] = default_preference_covar_module(
                designs.shape[-1], outputscale_bounds=LAPLACE_OUTPUTSCALE_BOUNDS
            )
        return PairwiseLaplaceGP(designs, comparisons, **opts)


class EPKind(_PairwiseKind):
    r""":class:`~prefbo.models.PairwiseEPGP` with site tolerance
    :data:`EP_POSTERIOR_TOL` unless ``model_options`` give ``tol``."""

    model_class = PairwiseEPGP
    mll_class = PairwiseEPMLL

    def build(self, designs, comparisons, covar_module=None):  # noqa: D102
        opts = self._constructor_options(covar_module)
        return PairwiseEPGP(designs, comparisons, **{"tol": EP_POSTERIOR_TOL, **opts})


class SkewKind(ModelKind):
    r""":class:`~prefbo.models.SkewGP` (sampled exact posterior; hyperparameters
    by the EP evidence), seeded by the optimiser's seed."""

    model_class = SkewGP

    def build(self, designs, comparisons, covar_module=None):  # noqa: D102
        opts = self._constructor_options(covar_module)
        opts = {**DEFAULT_SKEW_OPTIONS, "seed": self.seed, **opts}
        return SkewGP(designs, comparisons, **opts)

    def fit(self, model, fit_options):  # noqa: D102
        model.fit_hyperparameters("ep")


class VariationalKind(ModelKind):
    r""":class:`~prefbo.models.VariationalPreferenceGP` with all designs as
    inducing points unless ``model_options`` say otherwise.

    Hyperparameters and ``q(u)`` by full-batch Adam on the ELBO
    (:func:`~prefbo.fit.fit_variational`; ``model_options["fit"]`` overrides
    :data:`DEFAULT_VARIATIONAL_FIT`); between refits ``q(u)`` is refitted
    under the fitted kernel at every answer, starting from the Laplace
    posterior.
    """

    model_class = VariationalPreferenceGP
    loop_options = ("fit",)
    gaussian_posterior = True
    pathwise_samples = True

    def _model(self, designs: Tensor, comparisons: Tensor, covar_module: Any) -> Any:
        opts = self._constructor_options(covar_module)
        opts.setdefault("inducing_points", designs.shape[-2])
        return VariationalPreferenceGP(
            PairwiseComparisons(designs, comparisons), **opts
        )

    def _fit_variational(self, model: Any, learn_hyperparameters: bool) -> None:
        settings = {**DEFAULT_VARIATIONAL_FIT, **self.model_options.get("fit", {})}
        settings.setdefault("batch_size", max(1, model.data.num_answers))
        with torch.enable_grad():  # the model may be built under no_grad
            fit_variational(
                model,
                seed=self.seed,
                learn_hyperparameters=learn_hyperparameters,
                **settings,
            )

    def build(self, designs, comparisons, covar_module=None):  # noqa: D102
        model = self._model(designs, comparisons, covar_module)
        if covar_module is not None:  # condition q(u) on all answers, kernel fixed
            with expected_fit_warnings():
                _laplace_start(model, designs, comparisons, covar_module)
                self._fit_variational(model, learn_hyperparameters=False)
        return model

    def build_for_fit(self, designs, comparisons, start):  # noqa: D102
        if start is None:
            return self.build(designs, comparisons)
        return self._model(designs, comparisons, start)  # q(u) is fitted next

    def fit(self, model, fit_options):  # noqa: D102
        self._fit_variational(model, learn_hyperparameters=True)


def _laplace_start(
    model: VariationalPreferenceGP, designs: Tensor, comps: Tensor, covar: Any
) -> None:
    r"""Start ``q(u)`` at the Laplace posterior under the same kernel.

    With a pairwise likelihood the Laplace posterior at the inducing points
    is close to the ELBO's optimum, so refitting ``q(u)`` after each answer
    takes a few Adam epochs (early stopping) instead of hundreds from the
    prior. Other likelihoods keep the prior start.
    """
    if not isinstance(model.likelihood, PairwiseLikelihood):
        return
    laplace = PairwiseLaplaceGP(
        designs, comps, likelihood=model.likelihood, covar_module=copy.deepcopy(covar)
    )
    with torch.no_grad():
        Z = model.base_variational_strategy.inducing_points
        post = laplace.posterior(Z)
        model.set_inducing_distribution(
            post.mean.squeeze(-1), post.distribution.covariance_matrix
        )


MODEL_KINDS: Registry[type[ModelKind]] = Registry(
    "model",
    "kind",
    "a ModelKind subclass",
    lambda entry: isinstance(entry, type) and issubclass(entry, ModelKind),
    {
        "laplace": LaplaceKind,
        "ep": EPKind,
        "skew": SkewKind,
        "variational": VariationalKind,
    },
)


def register_model_kind(name: str, kind: type[ModelKind]) -> None:
    r"""Make ``kind`` available as ``PreferentialOptimizer(model=name)``.

    A kind is registered as a class: each optimiser builds its own instance
    with its ``model_options`` and seed.

    Args:
        name: A new name.
        kind: A :class:`ModelKind` subclass.

    Raises:
        InputTypeError: ``name`` is not a string or ``kind`` not a
            :class:`ModelKind` subclass.
        InputDataError: ``name`` is already registered.
    """
    MODEL_KINDS.register(name, kind)


def model_kind_names() -> tuple[str, ...]:
    r"""The registered model kinds' names, in order of registration."""
    return MODEL_KINDS.names()


def get_model_kind(name: str) -> type[ModelKind]:
    r"""The model kind registered as ``name``.

    Raises:
        InputTypeError: ``name`` is not a string.
        InputDataError: No kind has that name.
    """
    return MODEL_KINDS.get(name)
