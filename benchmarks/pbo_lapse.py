r"""A probit likelihood with a lapse rate in the loop's Laplace model (a screen).

The person of the benchmark answers ``Φ((u - u')/(√2 σ))``, and the loop's
models read every answer with that light-tailed link: an answer the model
thinks unlikely pulls on the utilities in proportion to how unlikely it is
(``d/dz log Φ(z) ≈ -z`` for ``z ≪ 0``), and in the drifting runs of
``results/pbo_regret_diagnosis.md`` (section 12) two such answers moved the
recommendation away from a good design. A lapse rate ``ε`` bounds what one
answer can do (Wichmann & Hill 2001; the psychophysics models of AEPsych):
``p(w ≻ l | f) = ε/2 + (1 - ε) Φ((f_w - f_l)/s)``.

Its log-likelihood is not concave, so the Laplace curvature
``w = -d²/dz² log p`` is negative for answers the model finds very unlikely;
the Newton iteration and the Laplace approximation take ``max(w, 0)``
(an answer in that region adds no precision; the mode is still the exact
MAP, as the gradient is exact). EP's sites would need negative precisions,
so the screen runs the Laplace model, against the Laplace model with the
plain probit (``ε = 0``, the same code path) as its control.

Variants ``laplace-boundary-0.1`` (control) and ``lapse-laplace-<ε>``, run on
the tuning seeds like ``pbo_variants.py``'s, with the same ``--compare``::

    OMP_NUM_THREADS=1 python benchmarks/pbo_lapse.py \
        --variants laplace-boundary-0.1 lapse-laplace-0.05 --seeds 6 \
        --store benchmarks/results/pbo_regret_tuning_screen.jsonl --shard 0/2
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
from torch import Tensor

from prefbo.likelihoods.pairwise import PairwiseProbitLikelihood
from prefbo.utils.normal import log_phi, probit_terms

sys.path.insert(0, str(Path(__file__).parent))
import pbo_regret  # noqa: E402
import pbo_variants  # noqa: E402


class LapseProbitLikelihood(PairwiseProbitLikelihood):
    r"""``p(w ≻ l | f) = ε/2 + (1 - ε) Φ(z)``, ``z = (f_w - f_l)/s``, with the
    curvature clipped at zero where the log-likelihood is convex."""

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
            z = z.to(torch.float64)
            logp = self._log_prob(z)
            # r = (1 - ε) φ(z) / p, in logs
            r = torch.exp(math.log1p(-eps) + log_phi(z) - logp)
            w = r * (z + r)  # -d² log p, since dr/dz = -z r - r²
            dw = r - w * (z + 2 * r)  # dw/dz = -d³ log p
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
