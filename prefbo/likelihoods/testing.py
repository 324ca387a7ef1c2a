r"""A contract test suite every prefbo preference likelihood passes.

In the spirit of GPyTorch's ``test/base_likelihood_test_case.py``: subclass
:class:`LikelihoodContract` in a pytest module (the subclass name must start
with ``Test``), implement :meth:`~LikelihoodContract.create_likelihood` and
:meth:`~LikelihoodContract.create_answers`, optionally
:meth:`~LikelihoodContract.reference_log_prob` (an independent
implementation), and the inherited tests run. Each test takes a ``tkwargs``
fixture, a dict ``{"device": ..., "dtype": ...}`` (prefbo's ``conftest.py``
provides it over CPU/CUDA and float64/float32).

The contract:

- ``log_prob_answers`` has shape ``batch_shape x k`` for batch shapes
  ``[]``, ``[3]``, ``[2, 3]``, and every batch entry equals the unbatched
  evaluation (vectorisation is exact);
- it matches the subclass's independent reference, if any;
- ``expected_log_prob_answers`` and ``log_marginal_answers`` match plain
  Monte Carlo estimates from the same Gaussian (within 4 standard errors
  plus a quadrature tolerance);
- at zero covariance the expectation is the exact log-probability;
- the three covariance layouts (variances, per design, joint) agree;
- GPyTorch's ``expected_log_prob`` / ``log_marginal`` on a (multitask)
  ``MultivariateNormal`` (interleaved or not) equal the tensor methods;
- gradients with respect to the mean, the covariance and the likelihood's
  parameters are finite, also at large utilities;
- ``forward`` returns a torch ``Distribution`` over the answers.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from torch import Tensor
from torch.distributions import Bernoulli, Distribution

from prefbo.likelihoods.base import PreferenceLikelihood

BATCH_SHAPES = (torch.Size([]), torch.Size([3]), torch.Size([2, 3]))


class LikelihoodContract(ABC):
    r"""Base class of likelihood contract tests (pytest style, not collected).

    Attributes:
        num_designs: ``n`` (designs or contexts) in the test data.
        num_outputs: ``d`` latents per design for multi-output likelihoods;
            ``None`` for single-utility ones (utilities ``batch_shape x n``).
        mc_samples: Monte Carlo draws for the expectation checks.
        utility_scale: Scale of the random utilities.
        expectation_rtol: Allowed quadrature / QMC error of the expected
            log-likelihood, relative to ``1 + |value|`` (float64; 2.5x in
            float32), on top of 4 Monte Carlo standard errors.
        marginal_rtol: The same for the log marginal (QMC of a log-mean-exp
            is less accurate for unlikely answers).
    """

    num_designs: int = 5
    num_outputs: int | None = None
    mc_samples: int = 4096
    utility_scale: float = 1.0
    expectation_rtol: float = 2e-3
    marginal_rtol: float = 2e-2

    # -------------------------------------------------------------- to implement
    @abstractmethod
    def create_likelihood(self) -> PreferenceLikelihood:
        r"""A fresh likelihood to test."""

    @abstractmethod
    def create_answers(self, generator: torch.Generator) -> tuple[Tensor, ...]:
        r"""Valid answer tensors (CPU) for ``num_designs`` designs."""

    def reference_log_prob(
        self, utilities: Tensor, answers: tuple[Tensor, ...]
    ) -> Tensor:
        r"""Independent ``k`` log-probabilities for ``n (x d)`` float64 utilities.

        Return ``NotImplemented`` to skip the check.
        """
        return NotImplemented

    def forward_answers(self, answers: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        r"""The arguments ``forward`` takes after the utilities."""
        return answers

    # ------------------------------------------------------------------- helpers
    def _latent_shape(self, batch_shape: torch.Size) -> torch.Size:
        tail = (self.num_designs,) + (
            () if self.num_outputs is None else (self.num_outputs,)
        )
        return torch.Size(batch_shape) + tail

    def _setup(self, tkwargs: dict, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        lik = self.create_likelihood().to(**tkwargs)
        answers = tuple(a.to(tkwargs["device"]) for a in self.create_answers(g))
        return g, lik, answers

    def _utilities(
        self, batch_shape: torch.Size, g: torch.Generator, **tkwargs
    ) -> Tensor:
        u = torch.randn(
            self._latent_shape(batch_shape), generator=g, dtype=torch.float64
        )
        return (self.utility_scale * u).to(**tkwargs)

    def _moments(
        self, batch_shape: torch.Size, g: torch.Generator, **tkwargs
    ) -> tuple[Tensor, Tensor]:
        r"""A random mean and joint (design-major) covariance."""
        mean = self._utilities(batch_shape, g, dtype=torch.float64)
        p = math.prod(self._latent_shape(())) if self.num_outputs else self.num_designs
        a = torch.randn(batch_shape + (p, p), generator=g, dtype=torch.float64)
        cov = 0.5 * a @ a.transpose(-1, -2) / p + 0.1 * torch.eye(
            p, dtype=torch.float64
        )
        return mean.to(**tkwargs), cov.to(**tkwargs)

    def _monte_carlo(
        self,
        lik: PreferenceLikelihood,
        mean: Tensor,
        cov: Tensor,
        answers: tuple,
        seed: int,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""Plain MC: (E log p, its s.e., log E p, its s.e.), in float64."""
        g = torch.Generator().manual_seed(seed)
        mean64, cov64 = mean.double().cpu(), cov.double().cpu()
        flat = mean64.reshape(mean64.shape[: -2 if self.num_outputs else -1] + (-1,))
        z = torch.randn(
            (self.mc_samples,) + flat.shape, generator=g, dtype=torch.float64
        )
        chol = torch.linalg.cholesky(cov64)
        draws = flat + (chol @ z.unsqueeze(-1)).squeeze(-1)  # S x batch x p
        draws = draws.reshape((self.mc_samples,) + mean64.shape)
        lik64 = self.create_likelihood().double()
        lik64.load_state_dict(lik.state_dict())
        logp = lik64.log_prob_answers(draws, *(a.cpu() for a in answers)).detach()
        s = self.mc_samples
        ell, ell_se = logp.mean(0), logp.std(0) / math.sqrt(s)
        p = logp.exp()
        lm = torch.log(p.mean(0))
        lm_se = p.std(0) / math.sqrt(s) / p.mean(0)
        return ell, ell_se, lm, lm_se

    @staticmethod
    def _tol(dtype: torch.dtype, float64: float, float32: float) -> float:
        return float64 if dtype == torch.float64 else float32

    # --------------------------------------------------------------------- tests
    def test_log_prob_batch_shapes(self, tkwargs):
        g, lik, answers = self._setup(tkwargs)
        for batch_shape in BATCH_SHAPES:
            u = self._utilities(batch_shape, g, **tkwargs)
            out = lik.log_prob_answers(u, *answers)
            assert out.dtype == tkwargs["dtype"]
            assert out.shape[:-1] == batch_shape
            assert bool(torch.isfinite(out).all()) and bool((out <= 0).all())
            flat = u.reshape((-1,) + u.shape[len(batch_shape) :])
            single = torch.stack([lik.log_prob_answers(x, *answers) for x in flat])
            torch.testing.assert_close(out.reshape(single.shape), single)

    def test_log_prob_matches_reference(self, tkwargs):
        g, lik, answers = self._setup(tkwargs)
        for _ in range(3):
            u = self._utilities(torch.Size(), g, dtype=torch.float64)
            ref = self.reference_log_prob(u, tuple(a.cpu() for a in answers))
            if ref is NotImplemented:
                return
            out = lik.log_prob_answers(u.to(**tkwargs), *answers)
            tol = self._tol(tkwargs["dtype"], 1e-5, 1e-3)
            torch.testing.assert_close(out.double().cpu(), ref, rtol=tol, atol=tol)

    def test_expectations_match_monte_carlo(self, tkwargs):
        g, lik, answers = self._setup(tkwargs, seed=1)
        tol = self.expectation_rtol * self._tol(tkwargs["dtype"], 1.0, 2.5)
        tol_lm = self.marginal_rtol * self._tol(tkwargs["dtype"], 1.0, 2.5)
        for i, batch_shape in enumerate(BATCH_SHAPES[:2]):
            mean, cov = self._moments(batch_shape, g, **tkwargs)
            ell = lik.expected_log_prob_answers(mean, cov, *answers)
            lm = lik.log_marginal_answers(mean, cov, *answers)
            assert ell.shape == lm.shape == batch_shape + ell.shape[-1:]
            mc, mc_se, mc_lm, mc_lm_se = self._monte_carlo(lik, mean, cov, answers, i)
            err = (ell.double().cpu() - mc).abs()
            assert bool((err <= 4 * mc_se + tol * (1 + mc.abs())).all()), (
                ell,
                mc,
                mc_se,
            )
            err = (lm.double().cpu() - mc_lm).abs()
            assert bool((err <= 4 * mc_lm_se + tol_lm * (1 + mc_lm.abs())).all()), (
                lm,
                mc_lm,
            )
            assert bool((lm >= ell).all())  # Jensen

    def test_zero_covariance_gives_log_prob(self, tkwargs):
        g, lik, answers = self._setup(tkwargs)
        mean, cov = self._moments(torch.Size([3]), g, **tkwargs)
        exact = lik.log_prob_answers(mean, *answers)
        tol = self._tol(tkwargs["dtype"], 1e-6, 1e-3)
        for fn in (lik.expected_log_prob_answers, lik.log_marginal_answers):
            out = fn(mean, torch.zeros_like(cov), *answers)
            torch.testing.assert_close(out, exact, rtol=tol, atol=tol)

    def test_covariance_layouts_agree(self, tkwargs):
        g, lik, answers = self._setup(tkwargs)
        mean, _ = self._moments(torch.Size([2]), g, **tkwargs)
        var = 0.2 + torch.rand(mean.shape, generator=g, dtype=torch.float64).to(
            **tkwargs
        )
        joint = torch.diag_embed(var.reshape(2, -1))  # 2 x p x p
        out_var = lik.expected_log_prob_answers(mean, var, *answers)
        out_joint = lik.expected_log_prob_answers(mean, joint, *answers)
        torch.testing.assert_close(out_var, out_joint)
        if self.num_outputs is not None:
            n, d = mean.shape[-2:]
            a = torch.randn(2, n, d, d, generator=g, dtype=torch.float64)
            blocks = (a @ a.transpose(-1, -2) / d + 0.1 * torch.eye(d)).to(**tkwargs)
            joint = torch.zeros(2, n * d, n * d, **tkwargs)
            for i in range(n):
                joint[:, i * d : (i + 1) * d, i * d : (i + 1) * d] = blocks[:, i]
            torch.testing.assert_close(
                lik.expected_log_prob_answers(mean, blocks, *answers),
                lik.expected_log_prob_answers(mean, joint, *answers),
            )

    def test_gpytorch_hooks(self, tkwargs):
        g, lik, answers = self._setup(tkwargs)
        mean, cov = self._moments(torch.Size([2]), g, **tkwargs)
        expected = lik.expected_log_prob_answers(mean, cov, *answers)
        marginal = lik.log_marginal_answers(mean, cov, *answers)
        if self.num_outputs is None:
            dists = [MultivariateNormal(mean, cov)]
        else:
            n, d = mean.shape[-2:]
            task_major = (
                cov.reshape(2, n, d, n, d)
                .permute(0, 2, 1, 4, 3)
                .reshape(2, n * d, n * d)
            )
            dists = [
                MultitaskMultivariateNormal(mean, cov, interleaved=True),
                MultitaskMultivariateNormal(mean, task_major, interleaved=False),
            ]
        for dist in dists:
            tol = self._tol(tkwargs["dtype"], 1e-10, 1e-4)
            torch.testing.assert_close(
                lik.expected_log_prob(answers[0], dist, *answers[1:]),
                expected,
                rtol=tol,
                atol=tol,
            )
            torch.testing.assert_close(
                lik.log_marginal(answers[0], dist, *answers[1:]),
                marginal,
                rtol=tol,
                atol=tol,
            )

    def test_gradients_finite(self, tkwargs):
        g, lik, answers = self._setup(tkwargs)
        mean, cov = self._moments(torch.Size([3]), g, **tkwargs)
        factor = torch.linalg.cholesky(cov).detach().requires_grad_(True)
        mean = mean.detach().requires_grad_(True)
        for fn in (lik.expected_log_prob_answers, lik.log_marginal_answers):
            lik.zero_grad()
            out = fn(mean, factor @ factor.transpose(-1, -2), *answers)
            mean.grad = factor.grad = None
            out.sum().backward()
            assert bool(torch.isfinite(out).all())
            assert bool(torch.isfinite(mean.grad).all()) and bool(
                mean.grad.abs().sum() > 0
            )
            assert bool(torch.isfinite(factor.grad).all())
            for param in lik.parameters():
                assert param.grad is not None and bool(torch.isfinite(param.grad).all())
        for scale in (10.0, 30.0):
            u = (scale * self._utilities(torch.Size([3]), g, **tkwargs)).requires_grad_(
                True
            )
            logp = lik.log_prob_answers(u, *answers)
            logp.sum().backward()
            assert bool(torch.isfinite(logp).all()), logp
            assert bool(torch.isfinite(u.grad).all()), u.grad

    def test_forward_distribution(self, tkwargs):
        g, lik, answers = self._setup(tkwargs)
        samples = self._utilities(torch.Size([4, 2]), g, **tkwargs)
        dist = lik(samples, *self.forward_answers(answers))
        assert isinstance(dist, Distribution)
        assert dist.batch_shape[:2] == torch.Size([4, 2])
        if isinstance(dist, Bernoulli):
            torch.testing.assert_close(
                dist.log_prob(torch.ones_like(dist.probs)),
                lik.log_prob_answers(samples, *answers),
            )
