r"""The answer terms of a sparse variational preference GP's ELBO.

:class:`VariationalTermsMixin` gives
:class:`~prefbo.models.VariationalPreferenceGP` what the evidence lower
bound (Hensman et al. 2015) is made of: ``KL(q(u) ‖ p(u))``, the joint ``q``
marginal of the latents each answer touches, and the likelihood's
expectations of each answer under it.

Why answers need their own marginals: a preference answer touches several
latent values (two designs, a choice set, the labels of one context), so the
expected log-likelihood needs the *joint* Gaussian marginal of those values.
GPyTorch's ``VariationalStrategy`` in training mode returns only the
marginal *variances* when a batch has more inputs than inducing points,
which would silently drop the covariance of ``f_w`` and ``f_l``; the full
``u x u`` covariance at the ``u`` designs a minibatch touches is ``O(u²)``
memory. :meth:`VariationalTermsMixin.answer_moments` therefore gathers, for
each answer, the ``p x p`` covariance of exactly the latents it touches from
the strategy's own quantities (``A = L⁻¹ K_ZX``, ``q(u)``, jitter) —
``O(M·u + k·p²)`` memory — and equals GPyTorch's dense ``q(f)`` entry for
entry (tested).
"""

from __future__ import annotations

import torch
from gpytorch.utils.memoize import clear_cache_hook
from torch import Tensor

from prefbo.data.containers import LabelComparisons, Rankings
from prefbo.data.minibatch import AnswerLoader, PreferenceData
from prefbo.exceptions import InputDataError
from prefbo.inference.cholesky import jittered_cholesky
from prefbo.inference.variational import whitened_answer_moments


def data_inputs(data: PreferenceData) -> Tensor:
    r"""The ``n x d`` inputs of a container: its designs or its contexts."""
    if isinstance(data, Rankings | LabelComparisons):
        return data.features
    return data.datapoints


class VariationalTermsMixin:
    r"""``q(u)``, the answers' ``q`` marginals and the ELBO of a variational GP.

    Mixed into :class:`~prefbo.models.VariationalPreferenceGP`, which
    provides ``base_variational_strategy`` (the whitened GPyTorch
    ``VariationalStrategy`` of the ``Q`` latent GPs), ``variational_strategy``,
    ``covar_module``, ``mean_module``, ``likelihood`` (a prefbo
    :class:`~prefbo.likelihoods.PreferenceLikelihood`), ``coregionalization``,
    ``num_outputs``, :meth:`mixing_matrix` and ``data``.
    """

    # ------------------------------------------------------------------- q(u)
    def whitening_root(self) -> Tensor:
        r"""``L`` with ``L Lᵀ = K_ZZ + jitter·I`` (GPyTorch's jitter), ``[Q] x M x M``.

        ``q(u)`` is stored whitened: ``u - m(Z) = L v`` with ``v ~ q(v)``.
        Computed without autograd.
        """
        strategy = self.base_variational_strategy
        shape = strategy._variational_distribution.variational_mean.shape
        with torch.no_grad():
            K = self.covar_module(strategy.inducing_points)
            K = K.add_jitter(strategy.jitter_val).to_dense()
            return torch.linalg.cholesky(K.expand(shape + shape[-1:]))

    def set_inducing_distribution(self, mean: Tensor, covariance: Tensor) -> None:
        r"""Set ``q(u)`` to ``N(mean, covariance)`` over the inducing values.

        Useful to warm-start the ELBO from another approximation, e.g. a
        Laplace or EP posterior evaluated at the inducing points
        (``model.base_variational_strategy.inducing_points``). Stored in
        GPyTorch's whitened form: with ``K_ZZ + jitter·I = L Lᵀ``,
        ``m̃ = L⁻¹ (mean - m(Z))`` and ``S̃ = L⁻¹ covariance L⁻ᵀ``.

        Args:
            mean: ``[Q] x M`` means of the latent GPs' inducing values.
            covariance: ``[Q] x M x M`` their covariance (symmetric PSD).

        Raises:
            InputDataError: ``mean`` or ``covariance`` has the wrong shape or a
                NaN or infinite entry.
        """
        strategy = self.base_variational_strategy
        q_u = strategy._variational_distribution
        shape = q_u.variational_mean.shape  # [Q] x M
        if mean.shape != shape or covariance.shape != shape + shape[-1:]:
            raise InputDataError(
                f"mean must be {list(shape)} and covariance "
                f"{list(shape + shape[-1:])}; got {list(mean.shape)} and "
                f"{list(covariance.shape)}."
            )
        for name, value in (("mean", mean), ("covariance", covariance)):
            finite = torch.isfinite(value)
            if not bool(finite.all()):
                raise InputDataError(
                    f"{name} must be finite; got {int((~finite).sum())} NaN or "
                    f"infinite entries (first at "
                    f"{tuple((~finite).nonzero()[0].tolist())})."
                )
        with torch.no_grad():
            Z = strategy.inducing_points
            L = self.whitening_root()
            centred = (mean - self.mean_module(Z)).unsqueeze(-1)
            m_w = torch.linalg.solve_triangular(L, centred, upper=False).squeeze(-1)
            A = torch.linalg.solve_triangular(L, covariance, upper=False)
            S_w = torch.linalg.solve_triangular(L, A.mT, upper=False)
            S_w = 0.5 * (S_w + S_w.mT)
            chol = jittered_cholesky(S_w, name="whitened q(u) covariance")
            q_u.variational_mean.copy_(m_w.to(q_u.variational_mean))
            q_u.chol_variational_covar.copy_(chol.to(q_u.chol_variational_covar))
        self._refresh()
        clear_cache_hook(strategy)

    def kl_divergence(self) -> Tensor:
        r"""``KL(q(u) ‖ p(u))`` summed over the latent GPs (a 0-d tensor)."""
        self._refresh()
        return self.variational_strategy.kl_divergence().sum()

    def _refresh(self) -> None:
        r"""Drop the strategy's memoised ``q(u)`` while training (as GPyTorch does)."""
        if self.training:
            clear_cache_hook(self.base_variational_strategy)

    # ----------------------------------------------------------- answer moments
    def answer_moments(
        self,
        X: Tensor,
        designs: Tensor,
        outputs: Tensor,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        r"""Joint ``q`` marginal of the latents each answer touches.

        Answer ``k`` touches ``f_{outputs[k, i]}(X[designs[k, i]])``,
        ``i < p``. Equal to gathering GPyTorch's dense ``q(f)`` at ``X``
        (:func:`~prefbo.likelihoods.latent_moments`), in ``O(M·u + k·p²)``
        memory instead of ``O(u²·t²)``.

        Args:
            X: A ``u x d`` tensor of inputs.
            designs: A ``k x p`` long tensor of rows of ``X``.
            outputs: A ``k x p`` long tensor of utilities in ``[0, t)``.
            mask: An optional ``k x p`` bool tensor, ``False`` on padding,
                which gets mean 0 and unit variance, independent of the rest.

        Returns:
            ``(mean, covariance)``: ``k x p`` and ``k x p x p``.
        """
        self._refresh()
        strategy = self.base_variational_strategy
        q_u = strategy.variational_distribution
        lmc = self.coregionalization == "lmc"
        return whitened_answer_moments(
            self.covar_module,
            self.mean_module,
            strategy.inducing_points,
            q_u.mean,
            q_u.lazy_covariance_matrix.to_dense(),
            X,
            designs,
            outputs,
            self.mixing_matrix(),
            jitter=strategy.jitter_val,
            output_jitter=self.variational_strategy.jitter_val if lmc else 0.0,
            mask=mask,
        )

    # ------------------------------------------------------------ answer terms
    def _answer_terms(
        self, data: PreferenceData, log_marginal: bool, num_samples: int | None
    ) -> Tensor:
        X = data_inputs(data)
        answers = tuple(a.to(X.device) for a in data.answers)
        lik = self.likelihood
        index = lik._index(X.shape[-2], self.num_outputs, *answers)
        mean, cov = self.answer_moments(X, index.designs, index.outputs, index.mask)
        num = lik.num_samples if num_samples is None else int(num_samples)
        return lik._expectation(mean, cov, index, num, log_marginal)

    def expected_log_likelihood(
        self, data: PreferenceData, num_samples: int | None = None
    ) -> Tensor:
        r"""``E_q[log p(answer_k | f)]`` for each answer of ``data``.

        Args:
            data: A container (e.g. a minibatch's ``data``) whose inputs are
                evaluated under ``q``; answers as the likelihood reads them.
            num_samples: Overrides the likelihood's QMC points.

        Returns:
            A ``k`` tensor, in the order of the likelihood's results.
        """
        return self._answer_terms(data, False, num_samples)

    def predictive_log_prob(
        self, data: PreferenceData, chunk_size: int = 10_000
    ) -> Tensor:
        r"""``log E_q[p(answer_k | f)]``, the predictive log-probability of answers.

        Args:
            data: A container (e.g. held-out answers on new designs).
            chunk_size: Answers per chunk (bounds memory).

        Returns:
            A ``k`` tensor in the order of ``data``'s answers.
        """
        out = None
        for batch in AnswerLoader(data, chunk_size, shuffle=False):
            values = self._answer_terms(batch.data, True, None)
            if out is None:
                out = values.new_empty(data.num_answers)
            out[batch.answer_index.to(out.device)] = values
        return out

    def elbo(
        self,
        data: PreferenceData | None = None,
        chunk_size: int = 10_000,
        num_samples: int | None = None,
    ) -> Tensor:
        r"""The evidence lower bound ``Σ_k E_q[log p(answer_k | f)] − KL(q(u) ‖ p(u))``.

        Over all answers (no minibatch noise), in chunks of answers; wrap in
        ``torch.no_grad()`` for large data.

        Args:
            data: The data; default the model's.
            chunk_size: Answers per chunk.
            num_samples: Overrides the likelihood's QMC points.

        Returns:
            A 0-d tensor.
        """
        data = self._data_or_raise(data)
        total = self.kl_divergence().neg()
        for batch in AnswerLoader(data, chunk_size, shuffle=False):
            ell = self.expected_log_likelihood(batch.data, num_samples)
            total = total + ell.sum()
        return total

    def _data_or_raise(self, data: PreferenceData | None) -> PreferenceData:
        if data is None:
            if self.data is None:
                raise InputDataError(
                    "the model has no data: pass data (a preference container) or "
                    "call set_data first; got data=None."
                )
            return self.data
        return data
