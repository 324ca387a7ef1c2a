# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Your first preference model
#
# A person compares pairs of 1-D designs (say, a thermostat setting between 10 and
# 25 °C) and says which one they prefer. We learn their hidden utility with
# `PairwiseLaplaceGP` (a drop-in for BoTorch's `PairwiseGP`), look at the honest,
# *centred* uncertainty band, ask for the probability of an answer, and let
# BoTorch's EUBO propose the next question. Set `SMOKE_TEST=1` for a tiny run
# (the test suite does); `TUTORIAL_OUTPUT` names the folder for the figure.

# %%
import math
import os
from pathlib import Path

import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.fit import fit_gpytorch_mll
from botorch.optim import optimize_acqf

from prefbo import PairwiseEPGP, PairwiseEPMLL, PairwiseLaplaceGP, PairwiseLaplaceMLL
from prefbo.likelihoods import PairwiseProbitLikelihood

SMOKE_TEST = bool(os.environ.get("SMOKE_TEST"))
OUTPUT = Path(os.environ.get("TUTORIAL_OUTPUT", "tutorial_output"))
torch.manual_seed(0)

# %% [markdown]
# ## A simulated person
# The utility peaks at 21 °C with a shoulder near 14 °C; answers are noisy:
# `P(x ≻ x') = Φ((u(x) - u(x')) / (√2 σ))` with σ = 0.1 on the utility.


# %%
def utility(t: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * ((t - 21) / 2.0) ** 2) + 0.5 * torch.exp(
        -0.5 * ((t - 14) / 1.5) ** 2
    )


sigma = 0.1
n = 8 if SMOKE_TEST else 30
m = 12 if SMOKE_TEST else 60
X = 10 + 15 * torch.rand(n, 1, dtype=torch.float64)
i = torch.randint(n, (m,))
j = (i + torch.randint(1, n, (m,))) % n
u = utility(X.squeeze(-1))
p_first = torch.special.ndtr((u[i] - u[j]) / (math.sqrt(2) * sigma))
first = torch.rand(m, dtype=torch.float64) < p_first
comparisons = torch.stack([torch.where(first, i, j), torch.where(first, j, i)], -1)

# %% [markdown]
# ## Fit
# Same constructor as BoTorch's `PairwiseGP`; `PairwiseLaplaceMLL` is its
# evidence. Inputs are scaled to the unit interval by a BoTorch input transform.

# %%
from botorch.models.transforms.input import Normalize  # noqa: E402

bounds = torch.tensor([[10.0], [25.0]], dtype=torch.float64)
model = PairwiseLaplaceGP(
    X,
    comparisons,
    likelihood=PairwiseProbitLikelihood(noise_std=1.0),
    input_transform=Normalize(d=1, bounds=bounds),
)
fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
print(
    f"outputscale {model.covar_module.outputscale.item():.2f}, "
    f"lengthscale {model.covar_module.base_kernel.lengthscale.item():.3f}"
)

# %% [markdown]
# ## Centred utility: the band the answers can narrow
# Comparisons only see differences, so the level of the utility keeps its prior
# uncertainty. `centred_posterior` subtracts the mean over a reference set (the
# designs by default): its band shows what the answers actually determined.

# %%
grid = torch.linspace(10, 25, 31 if SMOKE_TEST else 151, dtype=torch.float64)
grid = grid.unsqueeze(-1)
raw = model.posterior(grid.unsqueeze(-2))  # each point alone: its marginal band
centred = model.centred_posterior(grid)
c_mean = centred.mean.squeeze(-1).detach()
c_sd = centred.variance.squeeze(-1).clamp_min(0).sqrt().detach()
print(
    f"mean sd of the raw utility {raw.variance.sqrt().mean():.2f} vs the centred one "
    f"{c_sd.mean():.2f}"
)

# %% [markdown]
# ## Probability of an answer, and the next question

# %%
p = model.predict_preference(
    torch.tensor([[[21.0]]], dtype=torch.float64),
    torch.tensor([[[14.0]]], dtype=torch.float64),
)
print(f"P(21 °C ≻ 14 °C) = {p.item():.3f}")
acq = AnalyticExpectedUtilityOfBestOption(pref_model=model)
pair, value = optimize_acqf(
    acq, bounds=bounds, q=2, num_restarts=2, raw_samples=32 if SMOKE_TEST else 256
)
print(f"next question: {pair.squeeze(-1).tolist()} (EUBO {value.item():.3f})")

# %% [markdown]
# ## EP for nearly noiseless answers
# With decisive answers the Laplace approximation understates what was learnt;
# `PairwiseEPGP` (same API) matches moments instead.

# %%
ep = PairwiseEPGP(X, comparisons, input_transform=Normalize(d=1, bounds=bounds))
fit_gpytorch_mll(PairwiseEPMLL(ep.likelihood, ep))
ep_centred = ep.centred_posterior(grid)

# %%
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUTPUT.mkdir(parents=True, exist_ok=True)
fig, ax = plt.subplots(figsize=(7, 4))
true_c = utility(grid.squeeze(-1)) - utility(X.squeeze(-1)).mean()
ax.plot(grid, true_c, "k--", label="true utility (centred)")
for post, name in ((centred, "Laplace"), (ep_centred, "EP")):
    mu = post.mean.squeeze(-1).detach()
    sd = post.variance.squeeze(-1).clamp_min(0).sqrt().detach()
    scale = (true_c.std() / mu.std()).item()  # utilities are identified up to scale
    ax.plot(grid, mu * scale, label=f"{name} mean (rescaled)")
    ax.fill_between(
        grid.squeeze(-1), (mu - 2 * sd) * scale, (mu + 2 * sd) * scale, alpha=0.2
    )
ax.set_xlabel("temperature (°C)")
ax.legend()
fig.tight_layout()
fig.savefig(OUTPUT / "first_preference_model.png", dpi=100)
print(f"wrote {OUTPUT / 'first_preference_model.png'}")
