r"""Label-preference likelihoods.

Each context ``x`` (a row of the features) has one latent utility per label,
``u_ℓ(x)``, ``ℓ = 0..L−1``, so utilities are ``batch_shape x N x L`` (``N``
contexts, ``L`` labels; the prior over labels may be independent or
coregionalised — the likelihood does not care). An answer about one context
touches only that context's ``L`` utilities, so the per-context covariance
``batch_shape x N x L x L`` is all the expectations need.

- :class:`PairedLabelLikelihood`: "label ``i`` beats label ``j`` at context
  ``c``", ``Φ((u_i − u_j)/s)`` (probit) or ``sigmoid((u_i − u_j)/s)``
  (logit, Bradley–Terry).
- :class:`ThurstoneRankingLikelihood`: an ordering ``π_1 ≻ … ≻ π_r`` of some
  labels, best first, with one noise draw per label shared by the
  consecutive pairs it appears in:
  ``P(u_{π_1} + ε_1 > … > u_{π_r} + ε_r)``, ``ε ~ N(0, σ² I)``. Computed by
  a one-dimensional recursion on a grid in log space (see the class).
- :class:`PlackettLuceLikelihood`:
  ``Π_i exp(u_{π_i}/s) / Σ_{j ≥ i} exp(u_{π_j}/s)``; partial orderings rank a
  subset of the labels (the PL marginal), or, with
  ``rest_ranked_below=True``, the top ``r`` of all ``L`` labels.

Noise convention: differences are standardised by ``s = √2·σ`` everywhere, so
for two labels every model reduces to the pairwise probit / logit with the
same σ. Plackett–Luce written as ``exp(u)`` and paired label comparisons as
``Φ(u_i − u_j)`` are ``noise_std = 1/√2`` (``s = 1``).

Answers of the ordering likelihoods: ``orderings``, a ``k x r`` long tensor
of labels, best first, ``-1`` padded at the end of a row; optional
``contexts``, a ``k`` long tensor of context indices (default: ordering ``i``
is about context ``i``, which needs ``N = k``, the layout of
:class:`prefbo.data.containers.Rankings`). Results are ``batch_shape x k``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from prefbo.data.containers import LabelComparisons, Rankings, validate_orderings
from prefbo.exceptions import InputDataError
from prefbo.likelihoods.base import (
    AnswerIndex,
    PreferenceLikelihood,
    check_index_tensor,
)
from prefbo.likelihoods.difference import DifferenceLikelihood
from prefbo.utils.checks import check_int
from prefbo.utils.normal import log_phi

_LINKS = ("probit", "logit")


def check_orderings(
    orderings: object, num_labels: int, name: str = "orderings"
) -> Tensor:
    r"""Check ``-1``-padded orderings of labels, best first.

    Args:
        orderings: A ``k x r`` long tensor; row ``i`` lists distinct labels in
            ``[0, num_labels)``, best first, then ``-1`` padding.
        num_labels: ``L``.
        name: The argument's name, for messages.

    Returns:
        The orderings as a long tensor.
    """
    orderings = check_index_tensor(
        orderings, name, num_labels, padding=True, shape_text="k x r"
    )
    return validate_orderings(orderings, num_labels, name=name)


def _contexts(
    contexts: object, num_contexts: int, k: int, device: torch.device
) -> Tensor:
    if contexts is None:
        if num_contexts != k:
            raise InputDataError(
                f"without contexts, answer i belongs to context i, so utilities need "
                f"one row per answer; got N={num_contexts} contexts and k={k} answers. "
                "Pass contexts (a k long tensor of context indices)."
            )
        return torch.arange(k, device=device)
    return check_index_tensor(
        contexts, "contexts", num_contexts, ndim=1, shape_text="k"
    )


class PairedLabelLikelihood(DifferenceLikelihood):
    r"""Paired label comparisons: "label ``i`` beats label ``j`` at context ``c``".

    Answers: ``comparisons``, an ``m x 3`` long tensor of
    ``[context, winner label, loser label]`` rows. Utilities are
    ``batch_shape x N x L``; results ``batch_shape x m``.
    """

    data_type = LabelComparisons

    def __init__(
        self, link: str = "probit", noise_std: float = 1.0, num_points: int = 20
    ):
        r"""
        Args:
            link: ``"probit"`` (``Φ``) or ``"logit"`` (``sigmoid``, Bradley–Terry).
            noise_std: σ; differences are standardised by ``s = √2·σ``.
            num_points: Gauss–Hermite nodes for expectations.
        """
        if link not in _LINKS:
            raise InputDataError(f"link must be one of {_LINKS}; got {link!r}.")
        super().__init__(noise_std=noise_std, num_points=num_points)
        self.link = link

    def _index(
        self, num_designs: int, num_outputs: int, comparisons: Tensor
    ) -> AnswerIndex:
        comparisons = check_index_tensor(
            comparisons,
            "comparisons",
            max(num_designs, num_outputs),
            width=3,
            shape_text="m x 3 ([context, winner label, loser label])",
        )
        if comparisons.numel() > 0:
            hi_c, hi_l = int(comparisons[:, 0].max()), int(comparisons[:, 1:].max())
            if hi_c >= num_designs:
                raise InputDataError(
                    "comparisons' context column must hold indices in "
                    f"[0, {num_designs - 1}]; got max {hi_c}."
                )
            if hi_l >= num_outputs:
                raise InputDataError(
                    "comparisons' label columns must hold indices in "
                    f"[0, {num_outputs - 1}]; got max {hi_l}."
                )
            same = comparisons[:, 1] == comparisons[:, 2]
            if bool(same.any()):
                row = int(same.nonzero()[0])
                raise InputDataError(
                    f"comparisons must compare two different labels; row {row} is "
                    f"{comparisons[row].tolist()}."
                )
        return AnswerIndex(
            designs=comparisons[:, :1].expand(-1, 2), outputs=comparisons[:, 1:]
        )

    def _log_prob_difference(self, delta: Tensor, index: AnswerIndex) -> Tensor:
        z = delta / self.scale
        if self.link == "probit":
            return torch.special.log_ndtr(z)
        return torch.nn.functional.logsigmoid(z)

    def _log_marginal_difference(
        self, mean_diff: Tensor, var_diff: Tensor, index: AnswerIndex
    ) -> Tensor:
        r"""Probit: the closed form ``log Φ(μ / √(s² + var))``; logit:
        Gauss–Hermite (no closed form; see
        :func:`~prefbo.likelihoods.quadrature.gaussian_expectation_1d` for
        its accuracy when ``√var ≫ s``)."""
        if self.link == "probit":
            return torch.special.log_ndtr(mean_diff / (self.scale**2 + var_diff).sqrt())
        return super()._log_marginal_difference(mean_diff, var_diff, index)


class _OrderingLikelihood(PreferenceLikelihood):
    r"""Shared answer handling of ordering likelihoods.

    Answers: ``orderings``, a ``k x r`` long tensor of labels, best first,
    ``-1`` padded at the end of a row; optional ``contexts``, a ``k`` long
    tensor of context indices (default: ordering ``i`` is about context
    ``i``, which needs ``N = k``). Utilities are ``batch_shape x N x L``;
    results ``batch_shape x k``.
    """

    data_type = Rankings

    def _index(
        self,
        num_designs: int,
        num_outputs: int,
        orderings: Tensor,
        contexts: Tensor | None = None,
    ) -> AnswerIndex:
        orderings = check_orderings(orderings, num_outputs)
        ctx = _contexts(contexts, num_designs, orderings.shape[0], orderings.device)
        if ctx.shape[0] != orderings.shape[0]:
            raise InputDataError(
                f"contexts must have one entry per ordering (k={orderings.shape[0]}); "
                f"got {ctx.shape[0]}."
            )
        valid = orderings >= 0
        return AnswerIndex(
            designs=ctx.unsqueeze(-1).expand_as(orderings),
            outputs=orderings.clamp_min(0),
            mask=valid,
        )


class ThurstoneRankingLikelihood(_OrderingLikelihood):
    r"""Thurstone (case V) orderings of labels with shared per-label noise.

    ``P(π) = P(X_{π_1} > … > X_{π_r})`` with independent
    ``X_ℓ ~ N(u_ℓ, σ²)``: the consecutive pairs of an ordering share the
    noise draw of the label between them (correlation ``−1/2`` between
    consecutive differences), unlike a product of independent pairwise
    probits. For ``r = 2`` it is ``Φ((u_{π_1} − u_{π_2}) / s)``.

    Computed exactly up to quadrature error by the recursion
    ``H_1(x) = P(X_{π_1} > x)``,
    ``H_j(x) = ∫_x^∞ φ_σ(y − u_{π_j}) H_{j−1}(y) dy``, ``P(π) = H_r(−∞)``,
    on a uniform grid of ``num_grid`` points spanning the ordering's utilities
    ± 8σ, in log space (``logcumsumexp`` of trapezoid segments with the
    Euler–Maclaurin end correction, whose derivative is known in closed
    form), so strongly contradicted orderings keep finite log-probabilities.
    The error is ``O(h⁴)`` in the grid step ``h``: with ``num_grid = 128``
    about ``1e-7`` in ``log p`` when the utilities span a few σ, and ``7e-4``
    relative for an ordering contradicted by 10σ steps (``log p ≈ −107``;
    ``3e-6`` with 512 points).
    Expected log-likelihoods use QMC (``num_samples`` points) over the ``r``
    utilities; their cost is ``O(num_samples · k · r · num_grid)`` per
    evaluation, the most expensive of prefbo's likelihoods (Plackett–Luce
    is the cheap alternative for long orderings). The log marginal is the
    log of a plain QMC mean of ``P(π)``: exact at zero covariance, with an
    error that falls with ``num_samples``, but biased low for orderings
    that are unlikely under the latent distribution (raise ``num_samples``
    there). It equals the orthant probability of the ``r − 1`` consecutive
    differences of ``X/σ ~ N(m/σ, C/σ² + I)``, which
    :func:`~prefbo.likelihoods.orthant.log_orthant_probability` computes
    accurately in the tails; that is not the default because its randomised
    error at 128 points (~1e-3 nats for ``r = 5``) would lose the exactness
    at zero covariance.

    Answers: ``orderings`` (``k x r``, ``-1`` padded) and optional
    ``contexts`` (``k``), see the module docstring.
    """

    def __init__(
        self,
        noise_std: float = 1.0,
        num_grid: int = 128,
        num_samples: int = 128,
        qmc_seed: int = 0,
    ) -> None:
        r"""
        Args:
            noise_std: σ, the noise on each label's utility.
            num_grid: Grid points of the one-dimensional recursion.
            num_samples: Sobol points for expectations.
            qmc_seed: Scrambling seed of the Sobol points.
        """
        super().__init__(
            noise_std=noise_std, num_samples=num_samples, qmc_seed=qmc_seed
        )
        self.num_grid = check_int("num_grid", num_grid, 8)

    def _log_prob_latents(self, latents: Tensor, index: AnswerIndex) -> Tensor:
        return thurstone_log_prob(
            latents / self.noise_std, index.mask, num_grid=self.num_grid
        )


def thurstone_log_prob(
    utilities: Tensor, mask: Tensor, num_grid: int = 128, width: float = 8.0
) -> Tensor:
    r"""``log P(X_1 > … > X_r)`` for independent ``X_j ~ N(utilities_j, 1)``.

    Args:
        utilities: A ``... x k x r`` tensor of standardised utilities
            (``u / σ``) of the ordered labels, best first.
        mask: A ``k x r`` bool tensor, ``True`` on listed labels (a prefix of
            each row).
        num_grid: Number of grid points ``G``.
        width: The grid spans ``[min u − width, max u + width]``.

    Returns:
        A ``... x k`` tensor (0 for orderings of one label).
    """
    y = torch.where(mask, utilities, torch.zeros_like(utilities))
    lengths = mask.sum(-1)  # k
    lo = torch.where(mask, y, math.inf).amin(-1) - width  # ... x k
    hi = torch.where(mask, y, -math.inf).amax(-1) + width
    t = torch.linspace(0.0, 1.0, num_grid, dtype=y.dtype, device=y.device)
    grid = lo.unsqueeze(-1) + (hi - lo).unsqueeze(-1) * t  # ... x k x G
    h = ((hi - lo) / (num_grid - 1)).unsqueeze(-1)  # ... x k x 1
    log_half_h = torch.log(h / 2.0)
    em = h**2 / 12.0  # Euler–Maclaurin coefficient
    y0 = y[..., 0:1]
    log_h = torch.special.log_ndtr(y0 - grid)  # log H_1 on the grid
    log_f = log_phi(grid - y0)  # log f_1 = -dH_1/dx
    result = torch.zeros_like(lo)
    for j in range(1, y.shape[-1]):
        yj = y[..., j : j + 1]  # ... x k x 1
        log_p = log_phi(grid - yj)
        log_fj = log_p + log_h  # ... x k x G
        seg = log_half_h + torch.logaddexp(log_fj[..., :-1], log_fj[..., 1:])
        top = torch.special.log_ndtr(yj - grid[..., -1:]) + log_h[..., -1:]
        log_t = torch.logcumsumexp(torch.cat([seg, top], -1).flip(-1), -1).flip(-1)
        # H_j(x) ≈ T(x) + (h²/12) f_j'(x), f_j' = -[(x - y_j) f_j + φ(x - y_j) f_{j-1}]
        corr = -em * (
            (grid - yj) * torch.exp(log_fj - log_t) + torch.exp(log_p + log_f - log_t)
        )
        log_hj = log_t + torch.log1p(corr.clamp(-0.5, 0.5))
        bottom = torch.special.log_ndtr(grid[..., 0] - yj[..., 0]) + log_hj[..., 0]
        total = torch.logaddexp(log_hj[..., 0], bottom)  # ... x k
        result = torch.where(lengths - 1 == j, total, result)
        keep = mask[..., j : j + 1]  # k x 1
        log_h = torch.where(keep, log_hj, log_h)
        log_f = torch.where(keep, log_fj, log_f)
    return result.clamp_max(0.0)


class PlackettLuceLikelihood(_OrderingLikelihood):
    r"""Plackett–Luce orderings: ``Π_i exp(u_{π_i}/s) / Σ_{j ≥ i} exp(u_{π_j}/s)``.

    A row lists ``r ≤ L`` labels, best first. By default it is an ordering
    of that subset (the other labels say nothing: the PL marginal). With
    ``rest_ranked_below=True`` it is a top-``r`` list: every unlisted label
    ranks below the listed ones, and joins each denominator. Expectations
    use QMC over the touched utilities; the log marginal (no closed form) is
    the log of a plain QMC mean, whose error falls with ``num_samples`` but
    which is biased low for orderings that are unlikely under the latent
    distribution (raise ``num_samples`` there).

    Answers: ``orderings`` (``k x r``, ``-1`` padded) and optional
    ``contexts`` (``k``), see the module docstring.
    """

    def __init__(
        self,
        noise_std: float = 1.0,
        rest_ranked_below: bool = False,
        num_samples: int = 256,
        qmc_seed: int = 0,
    ) -> None:
        r"""
        Args:
            noise_std: σ; utilities enter as ``u / s``, ``s = √2·σ`` (so two
                labels give the pairwise logit with the same σ).
            rest_ranked_below: Read rows as top-``r`` lists of all ``L``
                labels instead of orderings of subsets.
            num_samples: Sobol points for expectations.
            qmc_seed: Scrambling seed of the Sobol points.
        """
        super().__init__(
            noise_std=noise_std, num_samples=num_samples, qmc_seed=qmc_seed
        )
        self.rest_ranked_below = bool(rest_ranked_below)

    def _index(
        self,
        num_designs: int,
        num_outputs: int,
        orderings: Tensor,
        contexts: Tensor | None = None,
    ) -> AnswerIndex:
        index = super()._index(num_designs, num_outputs, orderings, contexts)
        if not self.rest_ranked_below:
            return index
        listed = index.mask  # k x r
        k, r = listed.shape
        # order all L labels: listed ones by position, then unlisted by label
        keys = torch.arange(num_outputs, device=listed.device) + r
        keys = torch.cat([keys, keys.new_zeros(1)]).expand(k, -1).clone()  # k x L+1
        target = torch.where(listed, index.outputs, num_outputs)
        positions = torch.arange(r, device=listed.device).expand(k, -1)
        keys.scatter_(1, target, positions)
        outputs = keys[:, :num_outputs].argsort(dim=1)  # k x L
        return AnswerIndex(
            designs=index.designs[:, :1].expand(-1, num_outputs),
            outputs=outputs,
            extra=torch.arange(num_outputs, device=listed.device)
            < listed.sum(-1, keepdim=True),  # k x L: the listed positions
        )

    def _log_prob_latents(self, latents: Tensor, index: AnswerIndex) -> Tensor:
        x = latents / self.scale  # ... x k x p
        p = x.shape[-1]
        valid = (
            index.mask
            if index.mask is not None
            else torch.ones_like(index.outputs, dtype=torch.bool)
        )
        scored = valid if index.extra is None else index.extra  # k x p
        later = torch.ones(p, p, dtype=torch.bool, device=valid.device).triu()
        include = (later & valid.unsqueeze(-2)) | torch.eye(
            p, dtype=torch.bool, device=valid.device
        )  # k x p(i) x p(j)
        logits = x.unsqueeze(-2) + torch.where(
            include, 0.0, -math.inf
        )  # ... x k x p x p
        terms = x - torch.logsumexp(logits, dim=-1)  # ... x k x p
        return torch.where(scored, terms, 0.0).sum(-1)
