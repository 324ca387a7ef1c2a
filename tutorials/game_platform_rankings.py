# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Label ranking on real data: which game platform does a student prefer?
#
# 91 students ranked six gaming platforms (Xbox, PlayStation, PSPortable,
# GameCube, GameBoy, PC), best first, and told us which platforms they own,
# their age and how many hours a week they play (`Game.csv`, from the R
# package mlogit via the prefGP library; shipped in `prefbo.datasets`).
# The task: predict a *held-out* student's ranking of the six platforms from
# their covariates.
#
# This is **label preference**: each context (a student) has one latent
# utility per label (platform), `u_ℓ(x)`, and an answer is an ordering of the
# labels at one context. We model the six utilities with independent GPs over
# the covariates in a `VariationalPreferenceGP(num_utilities=6)` and the
# orderings with a Plackett–Luce likelihood, the model of the published
# reference (a Plackett–Luce GP with an SE kernel reached a mean scaled
# Kendall τ' = (τ + 1)/2 of **0.69** in 10-fold cross-validation).
#
# We also compare with the same GP fitted on the rankings broken into paired
# label comparisons, and — important for an honest reading of any number here
# — with covariate-free and simple covariate baselines.
#
# The data ship with prefbo (`prefbo.datasets`, a copy of the prefGP files,
# BSD-3-Clause; a folder named by `PREFBO_DATA` holding `Game.csv` wins). Set
# `SMOKE_TEST=1` for a tiny run (the test suite does); `TUTORIAL_OUTPUT`
# names the folder for the figure.

# %%
import math
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from gpytorch.kernels import RBFKernel, ScaleKernel  # noqa: E402
from gpytorch.means import ConstantMean  # noqa: E402
from gpytorch.priors import GammaPrior  # noqa: E402

from prefbo import VariationalPreferenceGP, fit_variational  # noqa: E402
from prefbo.data import Rankings  # noqa: E402
from prefbo.datasets import read_csv  # noqa: E402
from prefbo.likelihoods import (  # noqa: E402
    PairedLabelLikelihood,
    PlackettLuceLikelihood,
)

SMOKE_TEST = bool(os.environ.get("SMOKE_TEST"))
OUTPUT = Path(os.environ.get("TUTORIAL_OUTPUT", "tutorial_output"))
OUTPUT.mkdir(parents=True, exist_ok=True)
torch.manual_seed(0)
START = time.perf_counter()

# %% [markdown]
# ## The data
# `ch.<platform>` is the rank (1 = best) a student gave the platform,
# `own.<platform>` is 1 if they own it. We turn the ranks into orderings of
# label indices, best first (the layout `prefbo.data.Rankings` stores), and
# build the covariates: the six ownership indicators as they are (0/1), age
# and weekly hours standardised.

# %%
PLATFORMS = ["Xbox", "PlayStation", "PSPortable", "GameCube", "GameBoy", "PC"]
L = len(PLATFORMS)


rows = read_csv("Game.csv")
ranks = torch.tensor([[int(r[f"ch.{p}"]) for p in PLATFORMS] for r in rows])
own = torch.tensor(
    [[float(r[f"own.{p}"]) for p in PLATFORMS] for r in rows], dtype=torch.float64
)
age_hours = torch.tensor(
    [[float(r["age"]), float(r["hours"])] for r in rows], dtype=torch.float64
)

N = ranks.shape[0]
orderings = ranks.argsort(-1)  # N x 6: platform indices, best first
standardised = (age_hours - age_hours.mean(0)) / age_hours.std(0)
X = torch.cat([own, standardised], dim=-1)  # N x 8
print(f"{N} students, {X.shape[-1]} covariates")
print(
    "mean rank:",
    {p: round(r, 2) for p, r in zip(PLATFORMS, ranks.double().mean(0).tolist())},
)
print("owned by: ", {p: int(c) for p, c in zip(PLATFORMS, own.sum(0).tolist())})

# %% [markdown]
# ## Kendall's τ
# For a predicted score vector `a` (higher = better) and the true one `b`,
# τ-b counts concordant minus discordant pairs of labels and divides by the
# number of pairs each vector does not tie,
# `τ = (C − D) / √((P − T_a)(P − T_b))`, with `P = L(L − 1)/2`. Without ties
# this is the plain Kendall τ; a tie in the prediction (e.g. the constant
# baseline ranking two platforms equally) counts neither for nor against.
# The reference reports the scaled `τ' = (τ + 1)/2 ∈ [0, 1]` (0.5 = chance).


# %%
def kendall_tau(a: torch.Tensor, b: torch.Tensor) -> float:
    r"""Kendall's τ-b between two score vectors (higher = better)."""
    i, j = torch.triu_indices(a.shape[-1], a.shape[-1], offset=1)
    sa, sb = torch.sign(a[i] - a[j]), torch.sign(b[i] - b[j])
    untied = float((sa != 0).sum()) * float((sb != 0).sum())
    return float((sa * sb).sum()) / math.sqrt(untied) if untied > 0 else 0.0


assert kendall_tau(torch.arange(6.0), torch.arange(6.0)) == 1.0
assert kendall_tau(torch.arange(6.0), -torch.arange(6.0)) == -1.0

# %% [markdown]
# ## The model
# - **Likelihood**: `PlackettLuceLikelihood()`. A ranking `π` of a student
#   has probability `Π_i exp(u_{π_i}/s) / Σ_{j ≥ i} exp(u_{π_j}/s)`.
# - **Prior**: six independent GPs (`num_utilities=6`), each with its own
#   learned constant mean — unlike a constant shared by all designs in object
#   preferences, a per-*label* constant is visible to label comparisons: it is
#   the population's preference for that platform — and its own
#   `ScaleKernel(RBF)` with one lengthscale per covariate (ARD, the SE kernel
#   of the reference).
# - **Lengthscales**: prefbo's default kernel prior (BoTorch `PairwiseGP`'s,
#   Gamma(2.4, 2.7), mode ≈ 0.5) is meant for designs in the unit cube. Here
#   two students differ in several binary features at once, and with
#   lengthscales ≈ 0.5 every student is nearly uncorrelated with every other:
#   the GP memorises the training rankings and predicts the population mean
#   for new students. A Gamma(3, 1) prior (mode 2) lets students with
#   similar covariates share strength. When we tried the alternatives (same
#   folds, same training), the default prior gave a cross-validated τ' of
#   0.65 with a zero mean and 0.66 with per-platform constant means, and
#   BoTorch's dimension-scaled LogNormal prior 0.67; Gamma(3, 1) with
#   constant means gives 0.70.
# - **Inducing points**: only ~82 training students per fold, so every
#   training context is an inducing point (fixed), i.e. a full (non-sparse)
#   variational GP. Training is full-batch Adam on the ELBO.
# - `ThurstoneRankingLikelihood` (Gaussian instead of Gumbel noise) is a
#   drop-in replacement for `PlackettLuceLikelihood`, but its exact
#   ordering probability (a 1-D recursion on a grid, inside a QMC
#   expectation) makes it far slower: 10-fold CV with it does not fit this
#   tutorial's time budget, so we leave it out.


# %%
def make_model(data) -> VariationalPreferenceGP:
    batch = torch.Size([L])
    base = RBFKernel(
        ard_num_dims=X.shape[-1],
        batch_shape=batch,
        lengthscale_prior=GammaPrior(3.0, 1.0),
    )
    base.lengthscale = 2.0
    likelihood = (
        PlackettLuceLikelihood()
        if isinstance(data, Rankings)
        else PairedLabelLikelihood()
    )
    return VariationalPreferenceGP(
        data,
        likelihood,
        num_utilities=L,
        inducing_points=data.features.clone(),
        learn_inducing_points=False,
        covar_module=ScaleKernel(base, batch_shape=batch).double(),
        mean_module=ConstantMean(batch_shape=batch).double(),
    )


EPOCHS = 20 if SMOKE_TEST else 200


def fit(data) -> VariationalPreferenceGP:
    model = make_model(data)
    fit_variational(
        model,
        batch_size=10**6,
        epochs=EPOCHS,
        lr=0.05,
        early_stopping_patience=None,
        seed=0,
    )
    return model


# %% [markdown]
# ## Baselines
# - **Mean rank**: rank the platforms by their mean rank over the training
#   students, the same ranking for everyone. This ignores the covariates.
# - **Mean rank given ownership**: for each platform, its mean rank among the
#   training students who own it, or among those who do not, whichever the
#   test student is; a hand-made use of the strongest covariate.

# %%


def baseline_mean_rank(train: torch.Tensor, test: torch.Tensor) -> torch.Tensor:
    return (-ranks[train].double().mean(0)).expand(len(test), L)


def baseline_ownership(train: torch.Tensor, test: torch.Tensor) -> torch.Tensor:
    r, o = ranks[train].double(), own[train]
    owners = (r * o).sum(0) / o.sum(0).clamp_min(1)
    others = (r * (1 - o)).sum(0) / (1 - o).sum(0).clamp_min(1)
    # a platform nobody in the training folds owns falls back to the others
    owners = torch.where(o.sum(0) > 0, owners, others)
    return -torch.where(own[test] > 0, owners, others)


# %% [markdown]
# ## 10-fold cross-validation
# One random split into 10 folds (seed 0). For each held-out student the
# predicted ranking sorts the posterior-mean utilities; we score it with τ
# against the student's real ranking and average τ' over the students of a
# fold, then over folds. The paired-label variant breaks each training
# ranking into its 15 pairs "platform i beats platform j"
# (`Rankings.to_pairs("all")`) and uses `PairedLabelLikelihood` (probit);
# treating those 15 pairs as independent answers overstates the evidence of
# one ranking, which Plackett–Luce does not.

# %%
NUM_FOLDS = 10
folds = torch.randperm(N, generator=torch.Generator().manual_seed(0)).chunk(NUM_FOLDS)
run_folds = range(2) if SMOKE_TEST else range(NUM_FOLDS)
methods = ["PL GP", "paired-label GP", "mean rank", "mean rank given ownership"]
scores = {m: [] for m in methods}
for k in run_folds:
    test = folds[k]
    train = torch.cat([folds[j] for j in range(NUM_FOLDS) if j != k])
    rankings = Rankings(X[train], orderings[train], num_labels=L)
    pl_model = fit(rankings)
    pair_model = fit(rankings.to_pairs("all"))
    predictions = {}
    with torch.no_grad():
        predictions["PL GP"] = pl_model.posterior(X[test]).mean  # n_test x 6
        predictions["paired-label GP"] = pair_model.posterior(X[test]).mean
    predictions["mean rank"] = baseline_mean_rank(train, test)
    predictions["mean rank given ownership"] = baseline_ownership(train, test)
    truth = -ranks[test].double()
    for m in methods:
        taus = [kendall_tau(predictions[m][i], truth[i]) for i in range(len(test))]
        scores[m].append((sum(taus) / len(taus) + 1) / 2)
    print(f"fold {k}: " + ", ".join(f"{m} {scores[m][-1]:.3f}" for m in methods))

# %% [markdown]
# ## Results

# %%
print("| method | mean τ' over folds | sd over folds |")
print("|---|---|---|")
for m in methods:
    s = torch.tensor(scores[m])
    sd = s.std().item() if len(s) > 1 else float("nan")
    print(f"| {m} | {s.mean():.3f} | {sd:.3f} |")
print("| published Plackett–Luce GP (10-fold CV) | 0.69 | |")
print(f"total time {time.perf_counter() - START:.0f} s")

# %% [markdown]
# ## What the model learned
# The learned constant means are the population's preference for each
# platform; the posterior mean at the students who own a platform minus the
# mean at those who do not shows how much owning it moves its utility (last
# fold's PL model, at all 91 students).

# %%
with torch.no_grad():
    u_all = pl_model.posterior(X).mean  # N x 6
constants = pl_model.mean_module.constant.detach()
owned_gap = torch.stack(
    [
        u_all[own[:, j] > 0, j].mean() - u_all[own[:, j] == 0, j].mean()
        if 0 < own[:, j].sum() < N
        else torch.tensor(float("nan"), dtype=torch.float64)
        for j in range(L)
    ]
)
for p, c, g in zip(PLATFORMS, constants.tolist(), owned_gap.tolist()):
    print(f"{p:12s} constant mean {c:+.2f}, owners minus non-owners {g:+.2f}")

fig, axes = plt.subplots(1, 2, figsize=(12, 4))
ax = axes[0]
width = 0.2
folds_x = torch.arange(len(scores[methods[0]]), dtype=torch.float64).numpy()
for i, m in enumerate(methods):
    ax.bar(folds_x + (i - 1.5) * width, scores[m], width, label=m)
ax.axhline(0.69, color="k", ls="--", lw=1, label="published PL GP (mean)")
ax.set(xlabel="fold", ylabel="mean τ' of the fold", ylim=(0.4, 1.0))
ax.legend(fontsize=7, loc="upper left", ncol=3)
ax = axes[1]
pos = torch.arange(L, dtype=torch.float64).numpy()
ax.bar(pos - 0.2, constants.numpy(), 0.4, label="constant mean (population)")
ax.bar(pos + 0.2, owned_gap.numpy(), 0.4, label="owners − non-owners")
ax.set_xticks(pos.tolist(), PLATFORMS, rotation=20)
ax.set(ylabel="utility")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(OUTPUT / "game_platform_rankings.png", dpi=90)
plt.close(fig)
print(f"wrote {OUTPUT / 'game_platform_rankings.png'}")

# %% [markdown]
# ## Reading the numbers
# In our full run (10 folds, 200 epochs; about 2.5 minutes on one CPU thread)
# the Plackett–Luce GP reached a mean τ' of 0.70 (sd over folds 0.07), next
# to the published 0.69. Read it together with the baselines:
#
# - the covariate-free **mean rank** already scores 0.685: PC, Xbox and
#   PlayStation are ranked high and the handhelds low by most students, so a
#   single population ranking gets most pairs right;
# - **mean rank given ownership**, a two-line hand-made model, scores 0.70,
#   the same as the GP.
#
# So on this small data set the covariates add only about 0.015 over the
# population ranking, and the GP matches — it does not beat — a simple use
# of ownership; differences of this size are well inside the fold-to-fold
# spread. What the GP learns is sensible (right panel): large population
# constants for PC, Xbox and PlayStation, and owning a PC, a GameBoy or a
# PSPortable raising that platform's utility.
#
# Plackett–Luce, which scores a ranking as one answer, clearly beats the same
# GP fitted on the 15 pairs of each ranking (0.63): treating those pairs as
# independent answers counts each ranking's evidence several times over, so
# the GP overfits the training students.
