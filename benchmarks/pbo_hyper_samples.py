r"""The loop's hyperparameters integrated out instead of point-estimated (a screen).

The loop's default fits one set of hyperparameters (``d`` lengthscales and
the outputscale) to the answers and conditions EP on it. The drifting runs
of ``results/pbo_regret_diagnosis.md`` (sections 10, 12 and 17) turn on a
refit that jumps (a lengthscale halving after two unlikely answers, the
outputscale running from one end of its box to the other). The variant
``hyper-samples-K`` averages over the hyperparameters' posterior instead:

- after each fit, the log posterior ``log Z_EP(θ) + log p(θ)`` of ``z = log
  θ`` (plus ``Σ z``, the change of variables) is approximated by a normal
  at the fit, ``N(ẑ, Σ)``, with ``Σ⁻¹`` the negative Hessian from forward
  differences of its gradient (step ``1e-2``), its eigenvalues kept in
  ``[1, 10⁴]`` (a standard deviation of ``log θ`` between 0.01 and 1);
- ``K`` draws ``z_k = ẑ ± L ε_k`` (antithetic pairs, seeded by the run's
  seed and the number of answers, drawn once per answer count: the rounds
  of virtual comparisons re-weight them) are weighted by importance,
  ``w_k ∝ exp(log Z_EP(θ_k) + log p(θ_k) + Σ z_k + ½ |ε_k|²)``, on the data
  of the model that asks (the answers and the virtual comparisons); the
  target is truncated to the outputscale's constraint (a draw outside it,
  where the kernel cannot be set, gets weight 0);
- the question maximises ``Σ_k w_k EUBO_k`` (EUBO is linear in the
  posterior: the mixture's EUBO) with the loop's ``optimize_acqf``
  settings (its gradient by autograd through BoTorch's
  ``gen_candidates_scipy``; the default's single EUBO has a written-out
  gradient, the same to rounding), the loop's rule
  against resolved repeats (read from the fitted model) and its virtual
  comparisons at the faces; the recommendation is the told design of
  highest mixture mean ``Σ_k w_k μ_k``.

The fits usually sit at the upper end of the outputscale's box prior
``SmoothedBox(0.01, 100)``, beyond which the prior falls steeply; there the
forward difference reads that tail as the posterior's curvature (a standard
deviation of 0.01 for the log outputscale) and half the draws land in it
(weight about 0), so ``hyper-samples-K`` integrates out the lengthscales
but hardly the outputscale. ``hyper-folded-K`` takes the outputscale's
difference inside the box at that end and reflects draws beyond either end
of the box back into it, weighted by the folded proposal's density
(:func:`fold_into_box`); at the end, the two draws of an antithetic pair
then share their outputscale.

``hyper-samples-0`` is the control: the fit alone (weight 1) through the
same code, so the default's model, questions and recommendation up to the
gradient's rounding; its runs measure how far that alone moves a run.
Everything else is the loop's default. Run on the tuning seeds like
``pbo_variants.py``'s::

    OMP_NUM_THREADS=1 python benchmarks/pbo_hyper_samples.py \
        --variants hyper-samples-8 --seeds 3 \
        --store benchmarks/results/pbo_regret_tuning_screen.jsonl --shard 0/2
"""

from __future__ import annotations

import copy
import math
import os
import sys
from pathlib import Path
from typing import Any

from _shard_threads import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

import torch
from torch import Tensor

from prefbo.exceptions import UnsupportedError
from prefbo.loop.strategies import AcquisitionStrategy
from prefbo.mlls import PairwiseEPMLL

sys.path.insert(0, str(Path(__file__).parent))
import pbo_regret  # noqa: E402
import pbo_variants  # noqa: E402

STEP = 1e-2  # finite-difference step of the Hessian, in log θ
PRECISION = (1.0, 1e4)  # the eigenvalues of Σ⁻¹ are kept in this range
EDGE = 1e-3  # a log outputscale this close to its box's end is at the end


def get_z(kernel: Any) -> Tensor:
    r"""``log θ``: the ``d`` log lengthscales and the log outputscale."""
    ls = kernel.base_kernel.lengthscale.detach().reshape(-1)
    return torch.cat([ls, kernel.outputscale.detach().reshape(1)]).log()


def set_z(kernel: Any, z: Tensor) -> None:
    r"""Set the kernel's hyperparameters to ``exp(z)``."""
    with torch.no_grad():
        kernel.base_kernel.lengthscale = z[:-1].exp().reshape(1, -1)
        kernel.outputscale = z[-1].exp()


def log_posterior(
    model: Any, z: Tensor, grad: bool = False
) -> tuple[float, Tensor | None]:
    r"""``log Z_EP + log p(θ) + Σ z`` at ``θ = exp(z)`` (the model's kernel is
    set to it), and its gradient in ``z`` if ``grad``."""
    k = model.covar_module
    set_z(k, z)
    model.train()
    raw_ls, raw_os = k.base_kernel.raw_lengthscale, k.raw_outputscale
    with torch.set_grad_enabled(grad):
        out = model(*model.train_inputs)
        value = PairwiseEPMLL(model.likelihood, model)(out, model.train_targets)
    model.eval()
    lp = float(value.detach()) + float(z.sum())
    if not grad:
        return lp, None
    g_ls, g_os = torch.autograd.grad(value, [raw_ls, raw_os])
    # d raw / d z: the lengthscales are untransformed (raw = θ = exp(z)); the
    # outputscale's raw value goes through its constraint's transform
    r = raw_os.detach().clone().requires_grad_(True)
    (dt,) = torch.autograd.grad(k.raw_outputscale_constraint.transform(r).sum(), r)
    theta = z.exp()
    g_os = g_os.reshape(-1) / dt.reshape(-1)
    g = torch.cat([g_ls.reshape(-1) * theta[:-1], g_os * theta[-1:]])
    return lp, g + 1.0


def box_edges(kernel: Any) -> tuple[float, float]:
    r"""``(log a, log b)`` of the outputscale's ``SmoothedBox(a, b)`` prior."""
    prior = kernel.outputscale_prior
    return math.log(float(prior.a)), math.log(float(prior.b))


def normal_at_fit(model: Any, inside: bool = False) -> tuple[Tensor, Tensor]:
    r"""``(ẑ, L)``: the fit's ``log θ`` and a Cholesky factor of ``Σ``.

    With ``inside``, a fit at the upper end of the outputscale's box (within
    :data:`EDGE`) takes that coordinate's difference inside the box (a
    backward step): a forward step would read the prior's steep tail beyond
    it as the posterior's curvature.
    """
    work = copy.deepcopy(model)
    z0 = get_z(work.covar_module)
    _, hi = box_edges(work.covar_module)
    _, g0 = log_posterior(work, z0, grad=True)
    n = z0.numel()
    H = torch.empty(n, n, dtype=torch.float64)
    for i in range(n):
        step = STEP
        if inside and i == n - 1 and float(z0[-1]) >= hi - EDGE:
            step = -STEP
        z = z0.clone()
        z[i] += step
        _, g = log_posterior(work, z, grad=True)
        H[:, i] = (g - g0) / step
    P = -(H + H.T) / 2  # precision
    vals, vecs = torch.linalg.eigh(P)
    cov = vecs @ torch.diag(1.0 / vals.clamp(*PRECISION)) @ vecs.T
    return z0, torch.linalg.cholesky(cov)


def fold_into_box(
    z0: Tensor, L: Tensor, zs: Tensor, edges: tuple[float, float]
) -> tuple[Tensor, Tensor]:
    r"""The draws ``zs`` of ``N(z0, L Lᵀ)`` with the log outputscale reflected
    into the box ``edges`` (once, at the nearer end), and ``log q`` of that
    folded proposal up to the normal's constant: the normal's density
    summed over a point and its two mirror images."""
    lo, hi = edges
    z = zs.clone()
    s = z[:, -1]
    z[:, -1] = torch.where(s > hi, 2 * hi - s, torch.where(s < lo, 2 * lo - s, s))
    images = z.unsqueeze(0).repeat(3, 1, 1)  # 3 x num x (d + 1)
    images[1, :, -1] = 2 * hi - z[:, -1]
    images[2, :, -1] = 2 * lo - z[:, -1]
    white = torch.linalg.solve_triangular(
        L, (images - z0).unsqueeze(-1), upper=False
    ).squeeze(-1)
    return z, torch.logsumexp(-0.5 * (white**2).sum(-1), dim=0)


def antithetic_draws(
    z0: Tensor, L: Tensor, num: int, seed: int
) -> tuple[Tensor, Tensor]:
    r"""``num`` draws of ``N(z0, L Lᵀ)`` in antithetic pairs ``z0 ± L ε`` and
    their ``log q`` up to a constant (``-½ |ε|²``)."""
    gen = torch.Generator().manual_seed(seed)
    half = torch.randn(num // 2, z0.numel(), generator=gen, dtype=torch.float64)
    eps = torch.cat([half, -half])
    return z0 + eps @ L.T, -0.5 * (eps**2).sum(-1)


def importance_members(
    model: Any, build: Any, zs: Tensor, log_q: Tensor
) -> tuple[list[Any], Tensor]:
    r"""Models at the draws ``zs`` and their self-normalised importance
    weights ``∝ exp(log posterior - log q)``.

    ``build(kernel)`` makes a model of ``model``'s data with that kernel. The
    target is truncated to the outputscale's constraint: a draw outside it
    (where the kernel cannot be set) gets weight 0, and if every draw does,
    ``model`` alone is returned.
    """
    con = model.covar_module.raw_outputscale_constraint
    lo, hi = math.log(float(con.lower_bound)), math.log(float(con.upper_bound))
    members, log_w = [], []
    for z, lq in zip(zs, log_q):
        if not lo < float(z[-1]) < hi:
            continue
        member = build(copy.deepcopy(model.covar_module))
        lp, _ = log_posterior(member, z)
        members.append(member)
        log_w.append(lp - float(lq))
    if not members:
        return [model], torch.ones(1, dtype=torch.float64)
    return members, torch.softmax(torch.tensor(log_w, dtype=torch.float64), 0)


class HyperSamplesOptimizer(pbo_regret.PreferentialOptimizer):
    r"""The loop's default with the hyperparameters integrated out (see the
    module's docstring); ``num_samples`` draws per answer count (``0``: the
    fit alone), folded into the outputscale's box if ``fold``."""

    def __init__(
        self, *args: Any, num_samples: int, fold: bool = False, **kwargs: Any
    ) -> None:
        if num_samples % 2:
            raise ValueError(f"num_samples must be even; got {num_samples}.")
        super().__init__(*args, strategy="eubo", **kwargs)
        # the mixture's EUBO in place of the registered "eubo" (not registered
        # itself: the registry is global, and the library's tests list it)
        self._strategy = HyperEUBO()
        self.num_samples, self.fold = num_samples, fold
        self._draws: dict[int, tuple[Tensor, Tensor]] = {}
        self.ess: list[float] = []

    def draws(self) -> tuple[Tensor, Tensor]:
        r"""``(z, log q)``: the draws about the fit at the current answer count."""
        k = len(self._tells)
        if self.num_samples == 0:  # the control: the fit alone
            empty = torch.empty(0, self.dim + 1, dtype=torch.float64)
            return empty, empty[:, 0]
        if k not in self._draws:
            fitted = self._fitted(k - k % self.refit_every)
            z0, L = normal_at_fit(fitted, inside=self.fold)
            seed = self.seed * 100_003 + k
            zs, log_q = antithetic_draws(z0, L, self.num_samples, seed)
            if self.fold:
                edges = box_edges(fitted.covar_module)
                zs, log_q = fold_into_box(z0, L, zs, edges)
            self._draws = {k: (zs, log_q)}
        return self._draws[k]

    @property
    def model(self) -> Any:  # noqa: D102
        m = pbo_regret.PreferentialOptimizer.model.fget(self)
        if m is None or hasattr(m, "hyper_members"):
            return m
        designs, comps = self._model_data()

        def build(kernel: Any) -> Any:
            member = self._kind.build(designs, comps, kernel)
            self._kind.warm_start(member, m)
            return member

        members, w = importance_members(m, build, *self.draws())
        self.ess.append(float(1.0 / (w**2).sum()))
        m.hyper_members = (members, w.tolist())
        return m

    def best(self) -> tuple[Tensor, float, float]:  # noqa: D102
        designs, _ = self.data()
        members, w = self.model.hyper_members
        Z = self._to_model(designs).unsqueeze(-2)
        with torch.no_grad():
            means = [mk.posterior(Z).mean.reshape(-1) for mk in members]
        mean = sum(wk * mk for wk, mk in zip(w, means))
        i = int(mean.argmax())
        return designs[i].clone(), float(mean[i]), float("nan")


class HyperEUBO(AcquisitionStrategy):
    r"""EUBO of the mixture of the model's ``hyper_members``, maximised by
    ``optimize_acqf`` like the loop's ``"eubo"``."""

    pair_only = True

    def acquisition(self, question):  # noqa: D102
        if question.fixed is not None:
            raise UnsupportedError("the mixture's EUBO does not keep a winner.")
        members, w = question.model.hyper_members
        return pbo_variants.MixtureEUBO(members, w), None


class HyperSamplesLoop(pbo_regret.PrefboLoop):
    r"""The benchmark's loop around :class:`HyperSamplesOptimizer`."""

    def __init__(
        self, u: pbo_regret.Utility, seed: int, num_samples: int, fold: bool = False
    ) -> None:
        self.opt = HyperSamplesOptimizer(
            u.bounds, seed=seed, num_samples=num_samples, fold=fold
        )


def hyper_loop(num_samples: int, fold: bool = False):
    r"""A loop factory: :class:`HyperSamplesLoop` with ``num_samples`` draws."""

    def make(u: pbo_regret.Utility, seed: int) -> HyperSamplesLoop:
        return HyperSamplesLoop(u, seed, num_samples, fold)

    return make


pbo_variants.VARIANTS.update(
    {f"hyper-samples-{k}": hyper_loop(k) for k in (0, 4, 8, 16)}
    | {f"hyper-folded-{k}": hyper_loop(k, fold=True) for k in (4, 8, 16)}
)

if __name__ == "__main__":
    pbo_variants.main()
