r"""The shared functions of a collaborative preference model.

``K + 1`` functions over the designs, ``F_0 = g`` (the shared utility) and
``F_1..F_K = h_1..h_K`` (the latent tastes people weigh), each

.. math::
    F_j(x) = s_j\, a(x)^\top v_j + t_j\, e_{j, i(x)},
    \qquad a(x) = L^{-1} k(Z, x),\; L L^\top = k(Z, Z),

with ``M`` inducing points ``Z`` shared by all functions, ``k`` an ARD RBF
kernel of unit outputscale, ``v_j ~ N(0, I)`` whitened inducing values
(Hensman, Matthews & Ghahramani 2015) and, where designs are items of a pool
known by id, ``e_{j,i} ~ N(0, 1)`` each item's own effect beyond its features
(``t_j`` its scale; designs that are no item have none). ``F_j`` is thus a GP
with the Nyström kernel ``s_j² k(x, Z) k(Z, Z)⁻¹ k(Z, x)`` (the deterministic
training conditional prior; Quiñonero-Candela & Rasmussen 2005) plus an item
effect: a finite model in ``R = M (+ number of items)`` coordinates per
function, which is what lets a person's posterior be updated exactly in a few
dimensions. The variational posterior over ``u_j = [v_j; e_j]``,

.. math::
    q(u_j) = N\big(m_j,\ \mathrm{blockdiag}(C_j C_j^\top,\
    \mathrm{diag}(\sigma_j^2))\big),

is independent between functions and structured mean-field within one: a
full covariance over the ``M`` inducing values, each item's effect
independent of them and of the others (Hoffman & Blei 2015, "Structured
stochastic variational inference"). Items are looked up by id, never
expanded into a basis, so a pool of ``N`` items costs ``O(N)`` parameters
per function and ``O(1)`` time per design, not the ``O((M + N)²)`` and
``O((M + N)³)`` of one full covariance; what is lost is the posterior
correlation between an item's effect and the smooth part at it.

A person's own residual (see :mod:`~prefbo.models.collaborative.people`)
uses the first ``M_r`` inducing points of ``Z`` with its own scale ``s_r``:
:meth:`SharedFunctions.residual_basis`.
"""

from __future__ import annotations

import math

import gpytorch
import torch
from gpytorch.constraints import Interval
from linear_operator import to_dense
from torch import Tensor

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.inducing import ConditionalVarianceReduction
from prefbo.kernels.defaults import default_preference_covar_module
from prefbo.utils import seeds

#: Jitter on ``k(Z, Z)``'s unit diagonal before its Cholesky factor, by dtype.
JITTER = {torch.float64: 1e-6, torch.float32: 1e-4}
#: Designs the inducing points are chosen from at most (a seeded subsample).
INDUCING_CANDIDATES = 50_000
#: Start of the shared utility's scale ``s_0``, the tastes' ``s_k``, the
#: residual's ``s_r`` and the item effects' ``t_j``.
START_SCALES = {"shared": 1.0, "taste": 0.5, "residual": 0.3, "item": 0.3}
#: Box of every scale.
SCALE_BOUNDS = (1e-3, 30.0)
#: A scale below this has collapsed: its part is switched off, and at the
#: bound its gradient vanishes (:meth:`SharedFunctions.revive`).
COLLAPSED = 1e-2
#: Prior of the people's own prior variance (tastes' and residual's,
#: ``Σ_k s_k² + s_r²``) over the shared utility's (``s_0²``), the own
#: share ``ρ``: a half-normal on ``log ρ`` below ``log`` :data:`OWN_SHARE`
#: (:data:`OWN_SHARE_PRIOR_SCALE` e-folds), flat above it. A person's own
#: part and the shared utility explain a handful of people's answers
#: nearly equally well, and without it fits on a small study switched
#: every person's own part off and put the shared scale at its ceiling:
#: everyone pooled, and a newcomer's answers unable to move their utility
#: away from the others'. Flat above: people who answer the same
#: questions oppositely have no utility in common, and a prior holding
#: the share near :data:`OWN_SHARE` (a log-normal, as the exact population
#: model's on its deviation) made such fits pool them, or in a study
#: collapse the whole utility, every answer a coin flip
#: (``benchmarks/results/population_study_collaborative.md``).
OWN_SHARE = 0.25
OWN_SHARE_PRIOR_SCALE = 1.0
#: Start of the variational Cholesky factors ``C_j`` (times the identity)
#: and of the items' posterior sds ``σ_j``, and the spread of the tastes'
#: random starting means, which break the symmetry between tastes.
START_CHOLESKY = 0.3
START_TASTE_MEANS = 0.3


def start_scales(num_tastes: int) -> dict[str, list[float] | float]:
    r"""Where the scales of a model with ``num_tastes`` tastes start
    (:data:`START_SCALES`), by the name of their raw parameter."""
    return {
        "raw_scale": [START_SCALES["shared"]] + [START_SCALES["taste"]] * num_tastes,
        "raw_item_scale": [START_SCALES["item"]] * (num_tastes + 1),
        "raw_residual_scale": START_SCALES["residual"],
    }


def choose_inducing(designs: Tensor, num_inducing: int, seed: int) -> Tensor:
    r"""``M`` inducing points among the distinct ``designs`` (``n x d``): all
    of them when there are at most ``M``, else greedy conditional variance
    reduction (Burt et al. 2020) under the default preference kernel at its
    starting lengthscale, on at most :data:`INDUCING_CANDIDATES` of them."""
    distinct = torch.unique(designs, dim=0)
    if distinct.shape[0] <= num_inducing:
        return distinct
    g = torch.Generator().manual_seed(seed)
    if distinct.shape[0] > INDUCING_CANDIDATES:
        keep = torch.randperm(distinct.shape[0], generator=g)[:INDUCING_CANDIDATES]
        distinct = distinct[keep.to(distinct.device)]
    # chosen in float64 whatever the model's dtype: the choice is the same
    kernel = default_preference_covar_module(designs.shape[-1], dtype=torch.float64)
    kernel = kernel.base_kernel.to(device=designs.device, dtype=torch.float64)
    with torch.no_grad():
        Z = ConditionalVarianceReduction().allocate_inducing_points(
            distinct.double(), kernel, num_inducing, torch.Size()
        )
    return Z.detach().to(designs.dtype)


class SharedFunctions(gpytorch.Module):
    r"""The ``K + 1`` shared functions (see the module docstring).

    Args:
        inducing_points: ``M x d`` points ``Z``.
        num_tastes: ``K ≥ 0``.
        num_items: Items with their own effect (``0``: none); an item's id
            is its row in the model's design table.
        num_residual: ``M_r ≤ M``: the person residual's inducing points
            (the first ``M_r`` rows of ``Z``); ``0``: no residual.
        seed: Seed of the tastes' starting means.
    """

    def __init__(
        self,
        inducing_points: Tensor,
        num_tastes: int,
        num_items: int = 0,
        num_residual: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        M, d = inducing_points.shape
        dtype, device = inducing_points.dtype, inducing_points.device
        self.num_tastes, self.num_items = num_tastes, num_items
        self.num_residual = min(num_residual, M)
        self.register_buffer("Z", inducing_points.clone())
        self._cached: tuple | None = None
        self.kernel = default_preference_covar_module(d, dtype=dtype).base_kernel.to(
            device=device, dtype=dtype
        )
        J, R = num_tastes + 1, M + num_items
        starts = start_scales(num_tastes)
        for name in self.scale_names():
            start = torch.tensor(starts[name], dtype=dtype, device=device)
            self.register_parameter(name, torch.nn.Parameter(torch.zeros_like(start)))
            self.register_constraint(name, Interval(*SCALE_BOUNDS))
            self._set(name, start)
        g = torch.Generator().manual_seed(seed)
        mean = torch.zeros(J, R, dtype=dtype)
        mean[1:] = START_TASTE_MEANS * torch.randn(J - 1, R, generator=g, dtype=dtype)
        self.mean = torch.nn.Parameter(mean.to(device))
        eye = torch.eye(M, dtype=dtype, device=device)
        self.chol = torch.nn.Parameter((START_CHOLESKY * eye).expand(J, M, M).clone())
        if num_items:
            log_std = math.log(START_CHOLESKY)
            self.item_log_std = torch.nn.Parameter(
                torch.full((J, num_items), log_std, dtype=dtype, device=device)
            )

    # ----------------------------------------------------------- scales
    def _raw(self, name: str) -> torch.nn.Parameter:
        r"""The raw parameter ``name`` of a scale; ``UnsupportedError`` where
        the model has no such part."""
        if not hasattr(self, name):
            missing = {
                "raw_item_scale": "item effects (item_effects=False)",
                "raw_residual_scale": "residual (num_residual=0)",
            }
            raise UnsupportedError(
                f"{name.removeprefix('raw_')} is not defined: the model has no "
                f"{missing[name]}."
            )
        return getattr(self, name)

    def _scale(self, name: str) -> Tensor:
        r"""The scale of raw parameter ``name``, through its constraint."""
        raw = self._raw(name)
        return getattr(self, f"{name}_constraint").transform(raw)

    def _set(self, name: str, value: Tensor) -> None:
        raw = self._raw(name)
        value = torch.as_tensor(value).to(self.Z)
        if value.numel() != 1 and value.shape != raw.shape:
            values = f"{raw.numel()} values" if raw.ndim else "a single value"
            raise InputDataError(
                f"{name.removeprefix('raw_')} must be one value or {values}; got "
                f"shape {tuple(value.shape)}."
            )
        constraint = getattr(self, f"{name}_constraint")
        lo, hi = constraint.lower_bound.to(value), constraint.upper_bound.to(value)
        if not bool(((value > lo) & (value < hi)).all()):
            raise InputDataError(
                f"{name.removeprefix('raw_')} must lie strictly between "
                f"{SCALE_BOUNDS[0]} and {SCALE_BOUNDS[1]}; got {value.tolist()}."
            )
        raw.data.copy_(constraint.inverse_transform(value).expand_as(raw))

    @property
    def scale(self) -> Tensor:
        r"""``K + 1`` scales ``s_j`` of the inducing parts."""
        return self._scale("raw_scale")

    @scale.setter
    def scale(self, value: Tensor) -> None:
        self._set("raw_scale", value)

    @property
    def item_scale(self) -> Tensor:
        r"""``K + 1`` scales ``t_j`` of the item effects."""
        return self._scale("raw_item_scale")

    @item_scale.setter
    def item_scale(self, value: Tensor) -> None:
        self._set("raw_item_scale", value)

    @property
    def residual_scale(self) -> Tensor:
        r"""The scale ``s_r`` of a person's residual."""
        return self._scale("raw_residual_scale")

    @residual_scale.setter
    def residual_scale(self, value: Tensor) -> None:
        self._set("raw_residual_scale", value)

    def scale_names(self) -> list[str]:
        r"""The raw parameters of the scales this model has: ``"raw_scale"``,
        and where present ``"raw_item_scale"`` and ``"raw_residual_scale"``."""
        names = ["raw_scale"]
        if self.num_items:
            names.append("raw_item_scale")
        if self.num_residual:
            names.append("raw_residual_scale")
        return names

    def collapsed(self) -> dict[str, Tensor]:
        r"""Masks of the scales below :data:`COLLAPSED`, by the name of
        their raw parameter (:meth:`scale_names`)."""
        with torch.no_grad():
            return {
                name: getattr(self, name.removeprefix("raw_")) < COLLAPSED
                for name in self.scale_names()
            }

    def revive(self, parts: dict[str, Tensor], seed: int) -> None:
        r"""Restart the ``parts`` (masks as :meth:`collapsed` gives them)
        where they started: their scale at :data:`START_SCALES`, and a
        function whose inducing scale is revived at its starting
        variational posterior (a taste's mean drawn anew from ``seed``).

        A collapsed taste is a saddle of the ELBO, not only a bound: its
        function's mean, the people's weights on it and its scale all go
        to zero together, where each one's gradient vanishes with the
        others, so no descent leaves it (the pruning of variational
        low-rank models; MacKay 2001, "Local minima, symmetry-breaking,
        and model pruning in variational free energy minimization"). A fit
        that started with few answers stays there however many come later;
        a revived one can leave it.
        """
        g = torch.Generator().manual_seed(seeds.revive_seed(seed))
        starts = start_scales(self.num_tastes)
        with torch.no_grad():
            for name, mask in parts.items():
                raw = getattr(self, name)
                start = raw.new_tensor(starts[name])
                fresh = getattr(self, f"{name}_constraint").inverse_transform(start)
                raw.copy_(torch.where(mask.to(raw.device), fresh, raw))
            R, M = self.mean.shape[-1], self.chol.shape[-1]
            eye = torch.eye(M, dtype=self.mean.dtype, device=self.mean.device)
            for j in parts["raw_scale"].nonzero().squeeze(-1).tolist():
                self.chol[j] = START_CHOLESKY * eye
                if self.num_items:
                    self.item_log_std[j] = math.log(START_CHOLESKY)
                if j == 0:
                    self.mean[j] = 0.0
                    continue
                mean = torch.randn(R, generator=g, dtype=self.mean.dtype)
                self.mean[j] = START_TASTE_MEANS * mean.to(self.mean.device)

    def to_prior(self) -> None:
        r"""Set every function's variational posterior to its prior
        ``N(0, I)`` (means zero, Cholesky factors and the items' sds one):
        the shared part of a study before its first answer, where a
        newcomer's utility is the model's prior. The scales and the
        kernel stay as they are."""
        with torch.no_grad():
            self.mean.zero_()
            M = self.chol.shape[-1]
            eye = torch.eye(M, dtype=self.chol.dtype, device=self.chol.device)
            self.chol.copy_(eye.expand_as(self.chol))
            if self.num_items:
                self.item_log_std.zero_()

    # ----------------------------------------------------------- bases
    def _factor(self) -> Tensor:
        r"""The lower Cholesky factor of ``k(Z, Z)`` (with jitter), kept
        while no gradient is taken and the lengthscales are unchanged."""
        key = torch.cat(
            [self.kernel.raw_lengthscale.detach().reshape(-1), self.Z.reshape(-1)]
        )
        if not torch.is_grad_enabled() and self._cached is not None:
            old = self._cached[0]
            if (old.dtype, old.device) == (key.dtype, key.device) and torch.equal(
                old, key
            ):
                return self._cached[1]
        K = to_dense(self.kernel(self.Z))
        eye = torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
        L = torch.linalg.cholesky(K + JITTER.get(K.dtype, 1e-4) * eye)
        if not torch.is_grad_enabled():
            self._cached = (key.clone(), L)
        return L

    def whitened(self, X: Tensor) -> Tensor:
        r"""``a(x) = L⁻¹ k(Z, x)`` at ``n x d`` designs: ``n x M``. Its first
        ``M_r`` columns are the residual's (the Cholesky factor of a
        leading block of ``k(Z, Z)`` is the leading block of ``L``)."""
        cross = to_dense(self.kernel(self.Z, X))  # M x n
        return torch.linalg.solve_triangular(self._factor(), cross, upper=False).mT

    def basis(self, X: Tensor, a: Tensor | None = None) -> Tensor:
        r"""The ``(K + 1) x n x M`` scaled inducing bases ``b_j(x) = s_j a(x)``
        at ``n x d`` designs ``X``, so ``F_j(x) = b_j(x) v_j + t_j e_{j,i(x)}``
        (the item part by index: :meth:`means`, :meth:`item_variances`);
        ``a``: :meth:`whitened` at ``X`` if already computed."""
        a = self.whitened(X) if a is None else a  # n x M
        return self.scale.view(-1, 1, 1) * a

    def residual_basis(self, X: Tensor, a: Tensor | None = None) -> Tensor:
        r"""The ``n x M_r`` scaled residual basis ``s_r a_r(x)`` at ``X``
        (``a``: :meth:`whitened` at ``X`` if already computed)."""
        if not self.num_residual:
            return X.new_zeros(X.shape[0], 0)
        a = self.whitened(X) if a is None else a
        return self.residual_scale * a[:, : self.num_residual]

    # ----------------------------------------------------------- moments
    def means(self, basis: Tensor, items: Tensor | None = None) -> Tensor:
        r"""Means ``(K + 1) x n`` of the functions at designs with bases
        ``basis`` (:meth:`basis`) and item ids ``items`` (``n`` long, ``-1``
        for no item; ``None``: none)."""
        M = self.chol.shape[-1]
        means = (basis @ self.mean[:, :M].unsqueeze(-1)).squeeze(-1)
        if not self.num_items or items is None:
            return means
        known = items >= 0
        effects = self.mean[:, M:][:, items.clamp_min(0)] * known  # J x n
        return means + self.item_scale[:, None] * effects

    def item_covariance(self, items: Tensor) -> Tensor:
        r"""Covariances ``(K + 1) x ... x q x q`` of the items' effects within
        blocks of ``q`` designs with item ids ``items`` (``... x q``, ``-1``
        for no item): an effect's variance where two designs are the same
        item, else ``0`` (add it to the inducing part's, from :meth:`roots`)."""
        var = self.item_variances(items.reshape(-1)).reshape(-1, *items.shape)
        same = (items.unsqueeze(-1) == items.unsqueeze(-2)) & (items >= 0).unsqueeze(-1)
        return same * var.unsqueeze(-1)

    def roots(self, basis: Tensor) -> Tensor:
        r"""Covariance roots ``(K + 1) x n x M`` of the inducing parts at
        designs with bases ``basis``: ``b_j C_j``, so that part's covariance
        is ``root_j root_jᵀ`` (items' effects: :meth:`item_variances`)."""
        return basis @ self.chol.tril()

    def item_variances(self, items: Tensor) -> Tensor:
        r"""``(K + 1) x n`` posterior variances ``t_j² σ_{j,i}²`` of the
        effects of items ``items`` (``n`` long, ``-1``: no item, ``0``)."""
        if not self.num_items:
            return self.mean.new_zeros(self.mean.shape[0], len(items))
        known = items >= 0
        var = (self.item_scale[:, None] * self.item_log_std.exp()) ** 2  # J x N
        return var[:, items.clamp_min(0)] * known

    def person_rows(
        self, X: Tensor, items: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""What a person's utility at ``n x d`` designs ``X`` (item ids
        ``items``) is made of, at the shared functions' means: ``f_p(X) =
        offset + rows @ z_p``.

        Returns:
            ``(basis, offset, rows)``: the ``(K + 1) x n x M`` bases
            (:meth:`basis`), the shared utility's ``n`` means, and the
            ``n x D`` rows (the tastes' means, then the residual basis).
        """
        a = self.whitened(X)  # n x M
        basis = self.basis(X, a)
        means = self.means(basis, items)  # J x n
        rows = torch.cat([means[1:].mT, self.residual_basis(X, a)], dim=-1)
        return basis, means[0], rows

    def answer_differences(
        self,
        designs: Tensor,
        items: Tensor,
        winners: Tensor,
        losers: Tensor,
        variance: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        r"""What ``B x A`` answers (``winners`` over ``losers``, rows of the
        ``designs`` table with item ids ``items``) need of the shared
        functions: :meth:`person_rows` at the winner minus at the loser.

        Returns:
            ``(delta, offset, var)``: ``B x A x D`` rows ``Δ``, ``B x A``
            shared utility mean differences ``c``, and with ``variance`` the
            ``(K + 1) x B x A`` variances of each function's difference
            under ``q(u_j)`` (else ``None``).
        """
        J, D = self.num_tastes + 1, self.num_tastes + self.num_residual
        if winners.numel() == 0:  # no answers
            zeros = designs.new_zeros(*winners.shape, D)
            var = designs.new_zeros(J, *winners.shape) if variance else None
            return zeros, zeros[..., 0], var
        used, inverse = torch.unique(
            torch.stack([winners, losers]).reshape(-1), return_inverse=True
        )
        used_items = items[used]
        basis, offset, rows = self.person_rows(designs[used], used_items)
        shape = (2, *winners.shape)
        offset = offset[inverse].reshape(shape)  # 2 x B x A
        rows = rows[inverse].reshape(*shape, D)  # 2 x B x A x D
        var = None
        if variance:
            root = self.roots(basis)  # J x used x M
            root = root[:, inverse].reshape(J, *shape, -1)
            var = ((root[:, 0] - root[:, 1]) ** 2).sum(-1)  # J x B x A
            if self.num_items:  # independent effects: their variances add
                own = self.item_variances(used_items)[:, inverse].reshape(J, *shape)
                sides = inverse.reshape(shape)  # a row is one item: same row, 0
                var = var + (own[:, 0] + own[:, 1]) * (sides[0] != sides[1])
        return rows[0] - rows[1], offset[0] - offset[1], var

    def kl(self) -> Tensor:
        r"""``Σ_j KL(q(u_j) ‖ N(0, I))``."""
        C = self.chol.tril()
        J, M = C.shape[0], C.shape[-1]
        logdet = C.diagonal(dim1=-2, dim2=-1).abs().clamp_min(1e-30).log().sum()
        total = 0.5 * ((C**2).sum() + (self.mean**2).sum() - M * J) - logdet
        if self.num_items:
            log_std = self.item_log_std
            total = total + 0.5 * ((2 * log_std).exp() - 1).sum() - log_std.sum()
        return total

    def log_prior(self) -> Tensor:
        r"""The hyperparameters' log-prior: the kernel's (its lengthscales')
        and, where people have parts of their own that are on (tastes or a
        residual), the penalty of :data:`OWN_SHARE_PRIOR_SCALE` on
        :meth:`own_share` below :data:`OWN_SHARE`."""
        total = self.Z.new_zeros(())
        for _, module, prior, closure, _ in self.kernel.named_priors():
            total = total + prior.log_prob(closure(module)).sum()
        share = self.own_share()
        if share is not None:
            z = (share.log() - math.log(OWN_SHARE)) / OWN_SHARE_PRIOR_SCALE
            total = total - 0.5 * z.clamp_max(0.0) ** 2
        return total

    def own_share(self) -> Tensor | None:
        r"""The people's own prior variance over the shared utility's,
        ``(Σ_k s_k² + s_r²) / s_0²`` over the own parts that are on (scale
        at least :data:`COLLAPSED`; the tastes' weights have unit prior
        variance), or ``None`` where none is: a part switched off is no
        part of the model, and at its bound, where its gradient vanishes, a
        prior counting it would pull the shared scale down instead."""
        own = self.scale[1:]
        if self.num_residual:
            own = torch.cat([own, self.residual_scale.reshape(1)])
        own = own[own.detach() >= COLLAPSED]
        if not len(own):
            return None
        return (own**2).sum() / self.scale[0] ** 2
