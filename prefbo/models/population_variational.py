r"""A sparse variational population model for many participants and answers.

Participant ``p``'s utility is ``f_p = g + h_p`` (see
:mod:`prefbo.kernels.population`): ``g ~ GP(0, k_pop)`` shared,
``h_p ~ GP(0, k_ind)`` independent between people. Each part has its own
inducing variables, so the prior over them is block-diagonal and the
variational posterior factorises (Hensman, Fusi & Lawrence 2013; Hensman,
Matthews & Ghahramani 2015, whitened):

- ``g``: ``M_g`` inducing points ``Z_g``, ``q(v_g) = N(m_g, S_g)``;
- ``h_p``: ``M_h`` inducing points ``Z_h`` shared by everyone (inter-domain
  values ``h_p(Z_h)``), ``q(v_p) = N(m_p, S_p)`` per participant.

An answer of participant ``p`` about designs ``(w, l)`` needs the joint
marginal of ``(f_p(w), f_p(l))``: the sum of ``g``'s and ``h_p``'s, the
latter read from participant ``p``'s own ``(m_p, S_p)`` only. A minibatch of
``k`` answers costs ``O(k (M_g² + M_h²))``, and the KL terms ``O(P M_h²)``
(``S_p`` stored by its Cholesky factor), so thousands of participants and
millions of answers train on one machine. The hyperparameters of both
kernels are learnt with the variational parameters by Adam on the ELBO
(plus the kernels' log-priors), in minibatches of answers.
"""

from __future__ import annotations

from typing import Any

import gpytorch
import torch
from botorch.models.model import Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from linear_operator import to_dense
from torch import Tensor

from prefbo.data.validation import validate_comparisons
from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.kernels.population import POPULATION
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.likelihoods.quadrature import gaussian_expectation_1d
from prefbo.utils.checks import check_int

JITTER = 1e-6  # added to K_ZZ before its Cholesky factor, as GPyTorch's jitter_val


class _Part(gpytorch.Module):
    r"""One whitened sparse GP part: a kernel, inducing points and ``q(v)``
    (``batch`` distributions over the same points)."""

    def __init__(self, kernel: Kernel, Z: Tensor, batch: int | None) -> None:
        super().__init__()
        self.kernel = kernel
        self.Z = torch.nn.Parameter(Z.clone())
        M, shape = Z.shape[0], () if batch is None else (batch,)
        self.m = torch.nn.Parameter(torch.zeros(*shape, M, dtype=Z.dtype))
        self.L = torch.nn.Parameter(
            torch.eye(M, dtype=Z.dtype).expand(*shape, M, M).clone()
        )

    def root(self) -> Tensor:
        K = to_dense(self.kernel(self.Z))
        eye = torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
        return torch.linalg.cholesky(K + JITTER * K.diagonal().mean() * eye)

    def chol(self) -> Tensor:
        return self.L.tril()

    def kl(self) -> Tensor:
        r"""``Σ KL(q(v) ‖ N(0, I))`` over the batch."""
        L = self.chol()
        M = L.shape[-1]
        diag = L.diagonal(dim1=-2, dim2=-1)
        return (
            0.5
            * (
                (L**2).sum((-2, -1))
                + (self.m**2).sum(-1)
                - M
                - 2.0 * diag.abs().clamp_min(1e-30).log().sum(-1)
            ).sum()
        )

    def moments(self, X: Tensor, which: Tensor | None) -> tuple[Tensor, Tensor]:
        r"""Mean ``k x p`` and covariance ``k x p x p`` at ``X`` (``k x p x d``),
        under the distributions ``which`` (``k``; ``None`` for an unbatched
        part; entries ``< 0``: the prior)."""
        A = torch.linalg.solve_triangular(
            self.root(),
            to_dense(self.kernel(self.Z, X.reshape(-1, X.shape[-1]))),
            upper=False,
        )  # M x (k p)
        k, p = X.shape[:2]
        A = A.T.reshape(k, p, -1)  # k x p x M
        prior = to_dense(self.kernel(X))  # k x p x p
        if which is None:
            m, L = self.m.expand(k, -1), self.chol().expand(k, -1, -1)
            known = torch.ones(k, dtype=torch.bool, device=X.device)
        else:
            known = which >= 0
            idx = which.clamp_min(0)
            m, L = self.m[idx], self.chol()[idx]
        AL = A @ L  # k x p x M
        mean = (A @ m.unsqueeze(-1)).squeeze(-1)
        cov = prior - A @ A.mT + AL @ AL.mT
        mean = torch.where(known.unsqueeze(-1), mean, torch.zeros_like(mean))
        cov = torch.where(known.view(-1, 1, 1), cov, prior)
        return mean, cov


class VariationalPopulationGP(Model, gpytorch.Module):
    r"""Sparse variational population preference GP (see the module docstring).

    Args:
        X: ``n x d`` designs (the unit cube).
        participants: ``n`` long tensor, the participant of each design, in
            ``[0, num_participants)``.
        comparisons: ``m x 2`` long ``[winner, loser]`` rows of ``X``; both
            designs of a row belong to one participant.
        num_participants: ``P``; default ``participants.max() + 1``.
        num_inducing: ``(M_g, M_h)``; inducing points start at a random
            subset of the distinct designs.
        likelihood: A :class:`~prefbo.likelihoods.PairwiseProbitLikelihood`
            (default ``noise_std=1``).
        population_kernel, individual_kernel: Default
            :func:`~prefbo.kernels.default_preference_covar_module` each, the
            individual outputscale starting at 0.25.
        seed: Seed of the inducing points' start.
    """

    def __init__(
        self,
        X: Tensor,
        participants: Tensor,
        comparisons: Tensor,
        num_participants: int | None = None,
        num_inducing: tuple[int, int] = (64, 16),
        likelihood: PairwiseProbitLikelihood | None = None,
        population_kernel: Kernel | None = None,
        individual_kernel: Kernel | None = None,
        seed: int = 0,
    ) -> None:
        gpytorch.Module.__init__(self)
        if not isinstance(X, Tensor) or not X.is_floating_point() or X.ndim != 2:
            raise InputTypeError("X must be an n x d floating tensor.")
        n, d = X.shape
        for name, t in (("participants", participants), ("comparisons", comparisons)):
            if not isinstance(t, Tensor) or t.is_floating_point() or t.is_complex():
                raise InputTypeError(
                    f"{name} must be an integer tensor; got "
                    f"{t.dtype if isinstance(t, Tensor) else type(t).__name__}."
                )
        participants, comparisons = participants.long(), comparisons.long()
        if participants.shape != (n,):
            raise InputDataError(
                f"participants must hold one id per design ({n}); got shape "
                f"{tuple(participants.shape)}."
            )
        if comparisons.ndim != 2:
            raise InputDataError(
                f"comparisons must be m x 2; got shape {tuple(comparisons.shape)}."
            )
        comparisons = validate_comparisons(comparisons, n)  # shape, range, w != l
        if bool(
            (participants[comparisons[:, 0]] != participants[comparisons[:, 1]]).any()
        ):
            raise InputDataError(
                "each comparison must be between designs of one participant."
            )
        P = (
            int(participants.max()) + 1
            if num_participants is None
            else num_participants
        )
        P = check_int("num_participants", P, 1)
        if participants.min() < 0 or participants.max() >= P:
            raise InputDataError(f"participant ids must lie in [0, {P}).")
        self.X, self.participants, self.comparisons = X, participants, comparisons
        self.num_participants = P
        self.likelihood = likelihood or PairwiseProbitLikelihood()
        g = torch.Generator().manual_seed(seed)
        distinct = torch.unique(X, dim=0)
        Mg, Mh = (
            min(check_int("num_inducing", M, 1), len(distinct)) for M in num_inducing
        )
        Zg = distinct[torch.randperm(len(distinct), generator=g)[:Mg]]
        Zh = distinct[torch.randperm(len(distinct), generator=g)[:Mh]]
        pop = population_kernel or default_preference_covar_module(d, dtype=X.dtype)
        if individual_kernel is None:
            individual_kernel = default_preference_covar_module(d, dtype=X.dtype)
            individual_kernel.outputscale = 0.25
        self.population = _Part(pop, Zg, None)
        self.individual = _Part(individual_kernel, Zh, P)

    @property
    def num_outputs(self) -> int:  # noqa: D102
        return 1

    # ------------------------------------------------------------ the ELBO
    def answer_moments(self, comparisons: Tensor) -> tuple[Tensor, Tensor]:
        r"""Mean ``k x 2`` and covariance ``k x 2 x 2`` of ``(f_p(w), f_p(l))``
        for ``k`` rows of the training comparisons."""
        X = self.X[comparisons]  # k x 2 x d
        who = self.participants[comparisons[:, 0]]
        mg, cg = self.population.moments(X, None)
        mh, ch = self.individual.moments(X, who)
        return mg + mh, cg + ch

    def elbo(self, rows: Tensor | None = None) -> Tensor:
        r"""The ELBO per answer (an unbiased estimate from ``rows``, the
        indices of a minibatch of answers; all answers by default), plus the
        kernels' log-priors, divided by the number of answers."""
        m = self.comparisons.shape[0]
        rows = torch.arange(m) if rows is None else rows
        mean, cov = self.answer_moments(self.comparisons[rows])
        delta = mean[:, 0] - mean[:, 1]
        var = (cov[:, 0, 0] + cov[:, 1, 1] - 2 * cov[:, 0, 1]).clamp_min(0)
        s = self.likelihood.scale
        ell = gaussian_expectation_1d(
            lambda z: torch.special.log_ndtr(z / s), delta, var, num_points=20
        )
        total = ell.mean() * m - self.population.kl() - self.individual.kl()
        for _, module, prior, closure, _ in self.named_priors():
            total = total + prior.log_prob(closure(module)).sum()
        return total / m

    def fit(
        self, epochs: int = 200, batch_size: int = 4096, lr: float = 0.05, seed: int = 0
    ) -> list[float]:
        r"""Adam on the negative ELBO in minibatches of answers.

        Returns:
            The mean ELBO per answer of each epoch.
        """
        epochs, batch_size = (
            check_int("epochs", epochs, 1),
            check_int("batch_size", batch_size, 1),
        )
        self.train()
        opt = torch.optim.Adam(self.parameters(), lr=lr)
        g = torch.Generator().manual_seed(seed)
        m, history = self.comparisons.shape[0], []
        for _ in range(epochs):
            order, total = torch.randperm(m, generator=g), 0.0
            for start in range(0, m, batch_size):
                rows = order[start : start + batch_size]
                opt.zero_grad()
                loss = -self.elbo(rows)
                loss.backward()
                opt.step()
                total += loss.item() * len(rows)
            history.append(-total / m)
        self.eval()
        return history

    # ------------------------------------------------------------ predictions
    def posterior(
        self, X: Tensor, participant: int = POPULATION, **kwargs: Any
    ) -> GPyTorchPosterior:
        r"""The posterior of a utility at ``[b x] n x d`` designs: the
        population's (default, ``-1``), participant ``p``'s, or a new one's
        (``p ≥ num_participants``: the population's plus a deviation's
        prior). A batch is ``b`` independent ``n x n`` blocks (memory
        ``b n²``)."""
        if isinstance(participant, bool) or not isinstance(participant, int):
            raise InputTypeError(
                f"participant must be an int; got {type(participant).__name__}."
            )
        if participant < POPULATION:
            raise InputDataError(
                f"participant must be >= {POPULATION} (the population); got "
                f"{participant}."
            )
        shape = X.shape[:-1]
        blocks = X.reshape(-1, shape[-1], X.shape[-1])  # B x n x d
        with gpytorch.settings.fast_computations(False):
            mean, cov = self.population.moments(blocks, None)
            if participant >= 0:
                p = participant if participant < self.num_participants else -1
                which = torch.full((blocks.shape[0],), p, dtype=torch.long)
                mh, ch = self.individual.moments(blocks, which)
                mean, cov = mean + mh, cov + ch
        mean, cov = mean.reshape(shape), cov.reshape(*shape, shape[-1])
        eye = torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
        return GPyTorchPosterior(MultivariateNormal(mean, cov + 1e-10 * eye))

    def disagreement(self) -> float:
        r"""``k_ind(x, x) / (k_pop(x, x) + k_ind(x, x))`` averaged over the designs."""
        with torch.no_grad():
            pop = to_dense(self.population.kernel(self.X, diag=True)).mean()
            ind = to_dense(self.individual.kernel(self.X, diag=True)).mean()
        return float(ind / (pop + ind))
