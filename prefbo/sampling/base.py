r"""Shared set-up of the samplers of a linearly truncated Gaussian.

The target of every sampler in :mod:`prefbo.sampling` is

.. math::

    x \sim \mathcal N(\mu, \Sigma) \quad \text{restricted to} \quad
    \{x \in \mathbb R^d : A x \le b\},

with ``A`` a ``k x d`` matrix and ``b`` a ``k`` vector (BoTorch's convention for
``inequality_constraints``). :class:`TruncatedGaussianSampler` validates the
problem once, factors ``Σ = L Lᵀ``, finds a strictly feasible start when none is
given (:func:`find_interior_point`), runs ``num_chains`` Markov chains in
parallel as a leading batch dimension and hands out thinned draws; subclasses
implement one transition kernel in :meth:`~TruncatedGaussianSampler._advance`.

Chains are stored centred, ``w = x - μ``, so the constraints read
``A w ≤ b̃`` with ``b̃ = b - A μ``. Two structures are detected once because
the samplers exploit them:

- *axis-aligned* constraints (one non-zero per row of ``A``: orthants and
  boxes, e.g. the skew-GP's ``r > 0``): a constraint value is one scaled entry
  of ``w``;
- a *cone* (``b̃ = 0``): every constraint passes through the mean, so the
  feasible part of any ellipse centred at the mean is a single arc.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
import torch
from scipy.optimize import linprog
from torch import Tensor

from prefbo.exceptions import (
    InfeasibleConstraintsError,
    InputDataError,
    InputTypeError,
    NumericalError,
)
from prefbo.utils.checks import check_int, check_seed

_LP_SLACK_TOL = 1e-7  # whitened slack below which the domain counts as empty


def _as_tensor(name: str, value: object, dtype: torch.dtype | None = None) -> Tensor:
    r"""Check that ``value`` is a finite floating tensor (of ``dtype`` if given)."""
    if not isinstance(value, Tensor):
        raise InputTypeError(
            f"{name} must be a torch.Tensor; got {type(value).__name__}."
        )
    if dtype is None:
        if value.dtype not in (torch.float32, torch.float64):
            raise InputTypeError(
                f"{name} must be a float32 or float64 tensor; got {value.dtype}. "
                f"Convert with {name}.double()."
            )
    elif value.dtype != dtype:
        raise InputTypeError(
            f"{name} must have the dtype of A ({dtype}); got {value.dtype}."
        )
    finite = torch.isfinite(value)
    if not bool(finite.all()):
        raise InputDataError(
            f"{name} must be finite; got {int((~finite).sum())} non-finite "
            f"entries (first at index {tuple((~finite).nonzero()[0].tolist())})."
        )
    return value


def find_interior_point(
    A: Tensor, b: Tensor, mean: Tensor, covariance_root: Tensor
) -> Tensor:
    r"""A point well inside ``{x : A x ≤ b}`` and close to the mean.

    Works in the whitened coordinates ``z = L⁻¹ (x - μ)``, where the
    constraints read ``Ã z ≤ b̃`` with ``Ã = A L`` and ``b̃ = b - A μ``, with
    two linear programs (SciPy's HiGHS):

    1. the Chebyshev centre: ``max t  s.t.  Ã_j z + ‖Ã_j‖ t ≤ b̃_j,  t ≤ 1``,
       the largest ball (of radius at most one standard deviation) inside the
       domain. ``t`` is free below, so the program is always feasible and
       bounded, and the domain has an interior exactly when ``t* > 0``;
    2. the point of smallest ``‖z‖₁`` whose whitened distance to every face is
       at least ``t* / 2``, so that chains start near the bulk of the mass
       (for ``-x ≤ 0`` with a diagonal ``Σ`` this is ``x = sqrt(diag Σ) / 2``).

    Axis-aligned constraints (one non-zero per row: orthants, boxes) skip the
    programs: each coordinate gets its own interval ``[lo_i, hi_i]`` and
    ``x_i = clip(μ_i, lo_i + δ_i, hi_i - δ_i)`` with
    ``δ_i = min(sqrt(Σ_ii) / 2, (hi_i - lo_i) / 4)``, so the skew-GP's
    ``r > 0`` starts at ``r = sqrt(diag Σ) / 2`` at any size.

    Args:
        A: A ``k x d`` constraint matrix.
        b: A ``k`` right-hand side.
        mean: The ``d`` mean ``μ``.
        covariance_root: A ``d x d`` root ``L`` with ``L Lᵀ = Σ``.

    Returns:
        A ``d`` point (dtype and device of ``A``) with ``A x < b``.

    Raises:
        InfeasibleConstraintsError: If no point has positive slack in every
            constraint (an empty domain, or a flat one such as ``x ≤ 0`` with
            ``-x ≤ 0``, or a cycle of strict preferences ``f_1 > f_2 > f_3 > f_1``).
    """
    A64 = A.detach().to(device="cpu", dtype=torch.float64)
    root = covariance_root.detach().to(device="cpu", dtype=torch.float64)
    mean64 = mean.detach().to(device="cpu", dtype=torch.float64)
    b64 = b.detach().to(device="cpu", dtype=torch.float64)
    if bool(((A64 != 0).sum(-1) == 1).all()):
        return _axis_interior_point(A64, b64, mean64, root).to(A)
    A_white = (A64 @ root).numpy()
    b_white = (b64 - A64 @ mean64).numpy()
    norms = np.linalg.norm(A_white, axis=-1)  # k
    k, d = A_white.shape
    res = linprog(
        np.concatenate([np.zeros(d), [-1.0]]),
        A_ub=np.concatenate([A_white, norms[:, None]], axis=-1),
        b_ub=b_white,
        bounds=[(None, None)] * d + [(None, 1.0)],
        method="highs",
    )
    if res.status != 0:
        raise NumericalError(
            "find_interior_point: the linear program for a feasible start failed "
            f"({res.message}); pass a strictly feasible start instead."
        )
    radius = float(res.x[-1]) + 0.0  # + 0.0: no "-0" in the message
    if radius <= _LP_SLACK_TOL:
        raise InfeasibleConstraintsError(
            f"The constraints A x <= b (k={k} rows, d={d}) admit no point with "
            f"positive slack: the largest ball that fits inside has radius "
            f"{radius:.3g} standard deviations (radius <= 0: the domain is empty "
            "or flat), e.g. contradictory bounds or a cycle of strict preferences "
            "(f_1 > f_2 > ... > f_1). Check A and b."
        )
    z = res.x[:-1]
    eye = np.eye(d)
    res = linprog(  # variables (z, s) with s >= |z|: minimise sum(s)
        np.concatenate([np.zeros(d), np.ones(d)]),
        A_ub=np.block([[A_white, np.zeros((k, d))], [eye, -eye], [-eye, -eye]]),
        b_ub=np.concatenate([b_white - 0.5 * radius * norms, np.zeros(2 * d)]),
        bounds=[(None, None)] * (2 * d),
        method="highs",
    )
    if res.status == 0:  # otherwise keep the Chebyshev centre
        z = res.x[:d]
    x = mean64 + root @ torch.as_tensor(z, dtype=torch.float64)
    return x.to(A)


def _axis_interior_point(A: Tensor, b: Tensor, mean: Tensor, root: Tensor) -> Tensor:
    r""":func:`find_interior_point` for one non-zero per row of ``A`` (float64)."""
    k, d = A.shape
    cols = (A != 0).to(torch.int8).argmax(-1)  # k
    vals = A.gather(-1, cols[:, None]).squeeze(-1)
    bound = b / vals  # x[cols] <= bound where vals > 0, >= where vals < 0
    inf = torch.full((d,), math.inf, dtype=A.dtype)
    pos = vals > 0
    hi = inf.scatter_reduce(0, cols[pos], bound[pos], "amin")
    lo = (-inf).scatter_reduce(0, cols[~pos], bound[~pos], "amax")
    empty = ~(lo < hi)
    if bool(empty.any()):
        i = int(empty.nonzero()[0, 0])
        raise InfeasibleConstraintsError(
            f"The constraints A x <= b (k={k} rows, d={d}) admit no point with "
            f"positive slack: they confine x[{i}] to [{lo[i].item() + 0.0:.3g}, "
            f"{hi[i].item() + 0.0:.3g}], an empty or flat interval, e.g. contradictory "
            "bounds. Check A and b."
        )
    margin = torch.minimum(0.5 * root.norm(dim=-1), (hi - lo) / 4)  # d
    return torch.minimum(torch.maximum(mean, lo + margin), hi - margin)


class TruncatedGaussianSampler(ABC):
    r"""Markov chains on ``N(mean, covariance)`` restricted to ``A x ≤ b``.

    Subclasses implement :meth:`_advance`, one or more transitions of all
    chains at once. Everything after construction runs on the device of ``A``
    without host synchronisation.
    """

    def __init__(
        self,
        A: Tensor,
        b: Tensor,
        mean: Tensor | None = None,
        covariance_matrix: Tensor | None = None,
        *,
        covariance_root: Tensor | None = None,
        start: Tensor | None = None,
        num_chains: int = 1,
        burnin: int = 0,
        thinning: int = 0,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        r"""Validate the problem, factor the covariance and start the chains.

        Args:
            A: A ``k x d`` constraint matrix (float32 or float64; sets the dtype
                and device of the sampler). All-zero rows (``0 ≤ b_j``) are
                dropped, so ``self.A`` may have fewer rows.
            b: A ``k`` (or BoTorch's ``k x 1``) right-hand side of ``A x ≤ b``.
            mean: The ``d`` mean (default zero).
            covariance_matrix: A ``d x d`` symmetric positive definite covariance
                (default identity). Give this or ``covariance_root``.
            covariance_root: A ``d x d`` lower-triangular ``L`` with
                ``L Lᵀ = covariance`` (e.g. a Cholesky factor already at hand).
            start: A strictly feasible ``d`` point or ``num_chains x d`` points
                (``A x < b``). Default: :func:`find_interior_point`. Chains that
                start together need ``burnin`` to become independent.
            num_chains: Number of chains run in parallel.
            burnin: Transitions run (and discarded) at construction.
            thinning: Transitions skipped between two kept draws.
            seed: Seed of a private ``torch.Generator`` (on ``A``'s device).
            generator: A ``torch.Generator`` to draw from instead (not with
                ``seed``). With neither, torch's global generator is used.
            progress: Called as ``progress(t)`` after every ``t`` transitions
                run (burn-in included), e.g. a tqdm bar's ``update``, for
                long runs. It observes only: the chains are the same with or
                without it.
        """
        A = _as_tensor("A", A)
        if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
            raise InputDataError(
                f"A must be a k x d matrix with k >= 1 constraints on d >= 1 "
                f"dimensions; got shape {tuple(A.shape)}. Without constraints, "
                "sample the Gaussian directly."
            )
        k, d = A.shape
        tkwargs = {"dtype": A.dtype, "device": A.device}
        b = _as_tensor("b", b, A.dtype).to(A.device)
        if b.shape not in ((k,), (k, 1)):
            raise InputDataError(
                f"b must have shape (k,) or (k, 1) with k={k} (the rows of A); "
                f"got {tuple(b.shape)}."
            )
        b = b.reshape(k)
        zero_rows = (A == 0).all(-1)
        if bool((zero_rows & (b < 0)).any()):
            j = int((zero_rows & (b < 0)).nonzero()[0, 0])
            raise InfeasibleConstraintsError(
                f"Constraint {j} reads 0 <= b[{j}] = {b[j].item():.3g}, which no "
                "point satisfies. Check A and b."
            )
        if bool(zero_rows.all()):
            raise InputDataError(
                f"A must have a non-zero row; got all {k} rows zero (no "
                "constraint). Sample the Gaussian directly."
            )
        if bool(zero_rows.any()):  # 0 <= b_j holds everywhere: drop the row
            A, b = A[~zero_rows], b[~zero_rows]
            k = A.shape[0]
        if mean is None:
            mean = torch.zeros(d, **tkwargs)
        mean = _as_tensor("mean", mean, A.dtype).to(A.device)
        if mean.shape not in ((d,), (d, 1)):
            raise InputDataError(
                f"mean must have shape (d,) or (d, 1) with d={d} (the columns of "
                f"A); got {tuple(mean.shape)}."
            )
        mean = mean.reshape(d)
        root = self._covariance_root(covariance_matrix, covariance_root, d, A)

        self.A, self.b, self.mean, self.covariance_root = A, b, mean, root
        self.num_chains = check_int("num_chains", num_chains, 1)
        self.thinning = check_int("thinning", thinning, 0)
        burnin = check_int("burnin", burnin, 0)
        self._b_tilde = b - A @ mean  # k: the constraints on w = x - mean
        self._is_cone = bool((self._b_tilde == 0).all())
        nonzero = A != 0
        self._axis_aligned = bool((nonzero.sum(-1) == 1).all())
        if self._axis_aligned:
            self._axis_cols = nonzero.to(torch.int8).argmax(-1)  # k
            self._axis_vals = A.gather(-1, self._axis_cols[:, None]).squeeze(-1)
        seed = check_seed("seed", seed, allow_none=True)
        if seed is not None and generator is not None:
            raise InputDataError("Pass seed or generator, not both; got both.")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise InputTypeError(
                "generator must be a torch.Generator or None; got "
                f"{type(generator).__name__}."
            )
        if seed is not None:
            generator = torch.Generator(device=A.device).manual_seed(seed)
        self.generator = generator
        if progress is not None and not callable(progress):
            raise InputTypeError(
                "progress must be a callable taking the number of transitions "
                f"run, or None; got {type(progress).__name__}."
            )
        self.progress = progress
        self._w = self._initial_state(start, A, b, mean, root)  # num_chains x d
        self.lifetime_steps = 0
        self._setup()
        if burnin > 0:
            self._advance(1, burnin)

    @staticmethod
    def _covariance_root(
        covariance_matrix: Tensor | None,
        covariance_root: Tensor | None,
        d: int,
        A: Tensor,
    ) -> Tensor:
        r"""The ``d x d`` lower-triangular root of the covariance."""
        if covariance_matrix is not None and covariance_root is not None:
            raise InputDataError(
                "Pass covariance_matrix or covariance_root, not both; got both."
            )
        name = "covariance_matrix" if covariance_root is None else "covariance_root"
        cov = covariance_matrix if covariance_root is None else covariance_root
        if cov is None:
            return torch.eye(d, dtype=A.dtype, device=A.device)
        cov = _as_tensor(name, cov, A.dtype).to(A.device)
        if cov.shape != (d, d):
            raise InputDataError(
                f"{name} must have shape (d, d) with d={d} (the columns of A); "
                f"got {tuple(cov.shape)}."
            )
        # max |entry| without a d x d temporary (the covariance may be large)
        scale = torch.stack(cov.aminmax()).abs().max()
        scale = scale.clamp_min(torch.finfo(cov.dtype).tiny)
        tol = math.sqrt(torch.finfo(cov.dtype).eps) * scale
        if covariance_root is not None:
            upper = cov.triu(1).abs_().max()
            if bool(upper > 0) or bool((cov.diagonal() == 0).any()):
                raise InputDataError(
                    "covariance_root must be lower triangular with a non-zero "
                    f"diagonal (a Cholesky factor); got max |upper entry| "
                    f"{upper.item():.3g} and min |diagonal| "
                    f"{cov.diagonal().abs().min().item():.3g}."
                )
            return cov
        asym = (cov - cov.mT).abs().max()
        if bool(asym > tol):
            raise InputDataError(
                f"covariance_matrix must be symmetric; got max |S - S^T| = "
                f"{asym.item():.3g} (tolerance {tol.item():.3g})."
            )
        root, info = torch.linalg.cholesky_ex(cov)
        if bool(info > 0):
            eig_min = torch.linalg.eigvalsh(cov).min().item()
            raise InputDataError(
                "covariance_matrix must be positive definite; its Cholesky "
                f"factorisation failed at column {int(info)} (smallest eigenvalue "
                f"{eig_min:.3g}). Add a small multiple of the identity."
            )
        return root

    def _initial_state(
        self, start: Tensor | None, A: Tensor, b: Tensor, mean: Tensor, root: Tensor
    ) -> Tensor:
        r"""Centred ``num_chains x d`` start, checked to be strictly feasible."""
        d = A.shape[1]
        if start is None:
            start = find_interior_point(A, b, mean, root)
            name = "the start found by find_interior_point"
        else:
            start = _as_tensor("start", start, A.dtype).to(A.device)
            name = "start"
        if start.shape not in ((d,), (self.num_chains, d)):
            raise InputDataError(
                f"start must have shape (d,) or (num_chains, d) = "
                f"({self.num_chains}, {d}); got {tuple(start.shape)}."
            )
        excess = (start @ A.mT - b).amax()
        if bool(excess >= 0):
            raise InputDataError(
                f"{name} must satisfy A x < b strictly; got max(A x - b) = "
                f"{excess.item():.3g}. Move it inside the domain."
            )
        w = (start - mean).expand(self.num_chains, d)  # num_chains x d
        return w.clone()

    @property
    def state(self) -> Tensor:
        r"""The current points of the chains, ``num_chains x d``."""
        return self._w + self.mean

    def draw(self, n: int = 1) -> Tensor:
        r"""Advance the chains and keep ``n`` thinned draws of each.

        Args:
            n: Number of draws per chain; ``thinning`` transitions are skipped
                between two of them.

        Returns:
            A ``n x num_chains x d`` tensor (draw, chain, coordinate). Use
            ``samples.flatten(0, 1)`` for BoTorch's ``(n * num_chains) x d``
            layout.
        """
        n = check_int("n", n, 1)
        return self._advance(n, self.thinning + 1)

    def _standard_normal(self, *shape: int) -> Tensor:
        r"""Standard normals of ``shape``.

        float64 uses Box-Muller on float64 uniforms: as exact as, and on CPU
        faster than, ``torch.randn``'s float64 path.
        """
        tkwargs = {"dtype": self.A.dtype, "device": self.A.device}
        if self.A.dtype != torch.float64:
            return torch.randn(shape, generator=self.generator, **tkwargs)
        numel = math.prod(shape)
        half = (numel + 1) // 2
        u = torch.rand(2, half, generator=self.generator, **tkwargs)
        radius = torch.log1p(-u[0]).mul_(-2.0).sqrt_()  # u < 1: finite radius
        angle = u[1].mul_(2.0 * math.pi)
        out = torch.empty(2, half, **tkwargs)
        torch.mul(radius, angle.cos(), out=out[0])
        torch.mul(radius, angle.sin(), out=out[1])
        return out.view(-1)[:numel].view(shape)

    def _uniform(self, *shape: int) -> Tensor:
        r"""Uniforms on the open interval ``(0, 1)``."""
        u = torch.rand(
            shape, generator=self.generator, dtype=self.A.dtype, device=self.A.device
        )
        return u.clamp_min_(torch.finfo(u.dtype).eps)

    def _report(self, steps: int) -> None:
        r"""Tell :attr:`progress` that ``steps`` more transitions have run."""
        if self.progress is not None:
            self.progress(steps)

    @abstractmethod
    def _setup(self) -> None:
        r"""Precompute what the transition kernel needs (called once, before
        burn-in, after the problem is validated and the chains are started)."""

    @abstractmethod
    def _advance(self, num_kept: int, stride: int) -> Tensor:
        r"""Run ``num_kept * stride`` transitions, keeping every ``stride``-th.

        Returns:
            A ``num_kept x num_chains x d`` tensor of kept states (``x``, not
            centred). Updates ``self._w`` and ``self.lifetime_steps``.
        """
