r"""A probit likelihood with a lapse rate in the loop's models (a screen).

The person of the benchmark answers ``Φ((u - u')/(√2 σ))``, and the loop's
models read every answer with that light-tailed link: the pull of an answer
the model finds unlikely grows without bound (``d/dz log Φ(z) ≈ -z`` for
``z ≪ 0``), and in the drifting runs of ``results/pbo_regret_diagnosis.md``
(section 12) two answers that were unlikely under the truth moved the
recommendation away from a good design. A lapse rate ``ε`` bounds what one
answer can do (Wichmann & Hill 2001; the psychophysics models of AEPsych):
``p(w ≻ l | f) = F(z) = ε/2 + (1 - ε) Φ(z)``, ``z = (f_w - f_l)/s``.

Its log-likelihood is not concave: ``w = -d²/dz² log F`` is negative for
answers the model finds very unlikely, and there both models take
``max(w, 0)``. Laplace: the Newton iteration and the approximation read the
clipped curvature (the gradient is exact, so the iteration stops at a
stationary point of the log posterior: a local mode, the MAP for one
answer). EP: ``F`` is affine in ``Φ``, so a site's tilted normaliser is
``Z = F(m / √(s² + v))`` and ``run_ep`` reads its moments from this
likelihood's ``_terms``; a clipped site has precision 0 and matches the
tilted mean only, so the EP evidence is no longer stationary in the sites
and its analytic gradient (exact at an EP fixed point) is approximate
where sites are clipped (about 20 % off in a small case with one clipped
site): the ``lapse-ep-*`` fits ran with that gradient. The repeat rule
(``prefbo.loop.repeats``) reads the answer information of
``PairwiseBALD``, whose integration range assumes the plain probit's
entropy vanishes far out; under the lapse it tends to ``H(ε/2)``, so a
decisive repeat is not refused in these runs as it is in the default's.

Variants (the reference of each in ``results/pbo_regret_diagnosis.md``,
section 14): ``laplace-boundary-0.1`` (the Laplace loop with the plain
probit), ``lapse-laplace-<ε>``, ``lapse-ep-<ε>`` (the default's EP) and
``lapse-ep-0`` (the default itself through this class); run on the tuning
seeds like ``pbo_variants.py``'s (whose ``--compare`` takes
``boundary_step=None`` as its reference, not the default)::

    OMP_NUM_THREADS=1 python benchmarks/pbo_lapse.py \
        --variants lapse-ep-0.05 lapse-ep-0.02 --seeds 6 \
        --store benchmarks/results/pbo_regret_tuning_screen.jsonl --shard 0/2
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from _shard_threads import share_cores_for_shard

os.environ.update(share_cores_for_shard(sys.argv))  # before torch is imported

import torch
from torch import Tensor

from prefbo.likelihoods.pairwise import PairwiseProbitLikelihood
from prefbo.utils.normal import log_phi, probit_terms

sys.path.insert(0, str(Path(__file__).parent))
import pbo_regret  # noqa: E402
import pbo_variants  # noqa: E402


class LapseProbitLikelihood(PairwiseProbitLikelihood):
    r"""``p(w ≻ l | f) = ε/2 + (1 - ε) Φ(z)``, ``z = (f_w - f_l)/s``, with the
    curvature clipped at zero where the log-likelihood is convex; its terms
    in ``z``'s dtype (computed in float64)."""

    def __init__(self, lapse: float, noise_std: float = 1.0) -> None:
        super().__init__(noise_std=noise_std)
        if not 0.0 <= lapse < 1.0:
            raise ValueError(f"lapse must be in [0, 1); got {lapse!r}.")
        self.lapse = float(lapse)

    def _terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        eps = self.lapse
        if eps == 0.0:
            logp, r, w, dw = probit_terms(z)
        else:
            dtype = z.dtype
            z = z.to(torch.float64)
            logp = self._log_prob(z)
            # r = (1 - ε) φ(z) / p, in logs
            r = torch.exp(math.log1p(-eps) + log_phi(z) - logp)
            w = r * (z + r)  # -d² log p, since dr/dz = -z r - r²
            dw = r - w * (z + 2 * r)  # dw/dz = -d³ log p
            logp, r, w, dw = (t.to(dtype) for t in (logp, r, w, dw))
        convex = w <= 0
        zero = torch.zeros_like(w)
        return logp, r, torch.where(convex, zero, w), torch.where(convex, zero, dw)

    def _log_prob(self, z: Tensor) -> Tensor:
        eps = self.lapse
        logcdf = torch.special.log_ndtr(z)
        if eps == 0.0:
            return logcdf
        half = torch.full_like(logcdf, 0.5 * eps).log()
        return torch.logaddexp(half, logcdf + math.log1p(-eps))

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""Closed form ``ε/2 + (1 - ε) Φ(mean / √(s² + var))``."""
        z = mean / (self.scale**2 + var.clamp_min(0)).sqrt()
        return 0.5 * self.lapse + (1.0 - self.lapse) * torch.special.ndtr(z)

    def log_predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""Closed form, the log of :meth:`predictive_probability`."""
        return self._log_prob(mean / (self.scale**2 + var.clamp_min(0)).sqrt())


def lapse_loop(lapse: float, model: str = "laplace"):
    r"""A benchmark loop factory: ``model`` with lapse rate ``lapse`` and the
    loop's default boundary step."""

    def make(u: pbo_regret.Utility, seed: int) -> pbo_regret.PrefboLoop:
        return pbo_regret.PrefboLoop(
            u,
            seed,
            model=model,
            model_options={"likelihood": LapseProbitLikelihood(lapse)},
        )

    return make


pbo_variants.VARIANTS.update(
    {
        "laplace-boundary-0.1": lambda u, seed: pbo_regret.PrefboLoop(
            u, seed, model="laplace"
        ),
        "lapse-laplace-0": lapse_loop(0.0),
        "lapse-laplace-0.02": lapse_loop(0.02),
        "lapse-laplace-0.05": lapse_loop(0.05),
        "lapse-ep-0": lapse_loop(0.0, "ep"),
        "lapse-ep-0.02": lapse_loop(0.02, "ep"),
        "lapse-ep-0.05": lapse_loop(0.05, "ep"),
    }
)

if __name__ == "__main__":
    pbo_variants.main()
