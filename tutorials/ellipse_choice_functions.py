# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Choice functions on real data: picking the "best" ellipses
#
# One person was shown 160 times three of 50 ellipses and picked the subset
# (one to three of them) that was best on two criteria at once: *close to a
# circle* and *axes aligned with the coordinate axes*. The two criteria
# conflict, so there is often no single best ellipse and the answer is a set.
# A **choice function** with two latent utilities models this (Benavoli,
# Azzimonti & Piga): we fit `VariationalPreferenceGP(num_utilities=2)` with the
# pseudo-rational and the rational choice likelihoods on `ChoiceSets` data and
# predict, for held-out tasks, which options were chosen.
#
# Reference: the prefGP tutorial reports a per-task accuracy (fraction of the
# three options classified correctly as chosen/rejected) of **0.84** in 10-fold
# cross-validation. The data ship with prefbo (`prefbo.datasets`, a copy of
# the prefGP files, BSD-3-Clause); set `PREFBO_DATA` to a folder holding
# `ellipse/data.csv` and `ellipse/choices.csv` to read those. Set `SMOKE_TEST=1`
# for a tiny run (the test suite does); `TUTORIAL_OUTPUT` names the folder for
# the figure.

# %%
import csv
import itertools
import os
import time
from pathlib import Path

import torch

from prefbo import VariationalPreferenceGP, fit_variational
from prefbo.data import ChoiceSets
from prefbo.datasets import open_dataset
from prefbo.likelihoods import (
    PseudoRationalChoiceLikelihood,
    RationalChoiceLikelihood,
)

SMOKE_TEST = bool(os.environ.get("SMOKE_TEST"))
OUTPUT = Path(os.environ.get("TUTORIAL_OUTPUT", "tutorial_output"))
torch.manual_seed(0)

# %% [markdown]
# ## Data
# `data.csv` has one row per ellipse: semi-axes `a, b`, `rotation` (radians,
# multiples of π/10 in [0, 2π]), `ecc_sq` (squared eccentricity) and
# `perimeter`, then its 25×25 grey-level image. `choices.csv` lists, per task,
# the three ellipses shown (`options`, row numbers of `data.csv`) and the
# chosen ones. Two of the 160 rows name a chosen ellipse that was not shown;
# we drop them (158 tasks remain).
#
# **Features.** We use the five shape descriptors, min-max scaled to the unit
# cube (the default kernel's priors, BoTorch's, assume `[0, 1]^d`; standardised
# features would fit a worse model, and the model warns about them), not the 625
# pixels: both criteria are functions of the shape (eccentricity and the angle
# to the axes), and with 50 ellipses a 625-dimensional input would leave the
# kernel to rediscover them. We do *not* hand the model the answer (for example
# `cos 4θ` or `cos 2θ`, which peak at aligned angles): the ARD lengthscale of
# `rotation` has to find the periodic structure by itself.

# %%
with open_dataset("ellipse/data.csv") as f:
    rows = list(csv.reader(f))
FEATURES = rows[0][1:6]  # a, b, rotation, ecc_sq, perimeter
raw = torch.tensor([[float(v) for v in r[1:6]] for r in rows[1:]], dtype=torch.float64)
lo, hi = raw.amin(0), raw.amax(0)
X = (raw - lo) / (hi - lo)  # the unit cube, which the default priors assume
with open_dataset("ellipse/choices.csv") as f:
    tasks = list(csv.DictReader(f))
# two rows name a chosen ellipse that was not among the options shown (tasks 79
# and 82: chosen "29" from "28 21 39", "20" from "26 42 9"); ChoiceSets would
# reject them, so we drop them rather than guess the typo
bad = [
    t["task"]
    for t in tasks
    if not set(t["chosen"].split()) <= set(t["options"].split())
]
tasks = [t for t in tasks if t["task"] not in bad]
print(f"dropped inconsistent tasks {bad}")
option_sets = torch.tensor([[int(v) for v in t["options"].split()] for t in tasks])
chosen = torch.tensor(
    [
        [
            o in {int(v) for v in t["chosen"].split()}
            for o in map(int, t["options"].split())
        ]
        for t in tasks
    ]
)
sizes = chosen.sum(-1)
print(
    f"{X.shape[0]} ellipses, features {FEATURES}; {len(tasks)} tasks, chosen-set "
    f"sizes 1/2/3: {[(sizes == k).sum().item() for k in (1, 2, 3)]}"
)

# %% [markdown]
# ## Model
# Two independent GP utilities, each `ScaleKernel(RBFKernel(ARD))` (prefbo's
# default, with BoTorch `PairwiseGP`'s priors), a whitened variational
# posterior with the inducing points fixed at all 50 ellipses (no sparsity
# approximation: `n` is small), noise σ = 1 on each utility.
#
# - **Pseudo-rational**: the chosen options are mutually non-dominated, and no
#   rejected option beats *every* chosen one in any single utility.
# - **Rational (Pareto)**: every rejected option is dominated by a chosen one.
#
# The expected log-likelihood of a choice touches 3 options × 2 utilities, so
# it is a QMC average (`num_samples` scrambled Sobol points, fixed seed: the
# ELBO stays deterministic). Training uses full-batch Adam.

# %%
NUM_SAMPLES = 16 if SMOKE_TEST else 128
EPOCHS = 15 if SMOKE_TEST else 200
LIKELIHOODS = {
    "pseudo-rational": PseudoRationalChoiceLikelihood,
    "rational": RationalChoiceLikelihood,
}


def fit(likelihood_cls, train: torch.Tensor, seed: int) -> VariationalPreferenceGP:
    torch.manual_seed(seed)
    data = ChoiceSets(X, option_sets[train], chosen[train])
    model = VariationalPreferenceGP(
        data,
        likelihood_cls(num_samples=NUM_SAMPLES),
        num_utilities=2,
        inducing_points=X.clone(),
        learn_inducing_points=False,
    )
    fit_variational(
        model,
        batch_size=len(train),
        epochs=EPOCHS,
        lr=0.05,
        seed=seed,
        early_stopping_patience=None,
    )
    return model


# %% [markdown]
# ## Predicting a choice
# For a held-out task there are 7 possible answers (non-empty subsets of the
# three options). We score each with the model's **predictive probability**
# `log E_q[p(C | A, u)]` (`predictive_log_prob`, with more QMC points) and
# predict the most probable subset; an option counts as chosen iff it is in
# that subset. This uses the fitted likelihood and the posterior uncertainty.
# For comparison, two plug-in rules on the posterior-mean utilities: the
# **Pareto set** of the three means (the rational rule) and the **per-utility
# winners** (the smallest set consistent with pseudo-rational choice).
# Per-task accuracy is the fraction of the three options classified correctly.

# %%
SUBSETS = torch.tensor(
    [s for s in itertools.product([False, True], repeat=3) if any(s)]
)  # 7 x 3


def pareto_set(u: torch.Tensor) -> torch.Tensor:
    r"""Options not dominated by another (``u``: ``3 x 2`` → ``3`` bool)."""
    ge = (u.unsqueeze(1) >= u.unsqueeze(0)).all(-1)
    gt = (u.unsqueeze(1) > u.unsqueeze(0)).any(-1)
    return ~(ge & gt).any(0)  # [j, i]: j dominates i


def winners(u: torch.Tensor) -> torch.Tensor:
    r"""Options that are best in at least one utility."""
    out = torch.zeros(u.shape[0], dtype=torch.bool)
    out[u.argmax(0)] = True
    return out


def evaluate(model: VariationalPreferenceGP, test: torch.Tensor) -> dict:
    k = len(test)
    model.likelihood.num_samples = 4 * NUM_SAMPLES
    with torch.no_grad():
        every = ChoiceSets(
            X,
            option_sets[test].repeat_interleave(len(SUBSETS), 0),
            SUBSETS.repeat(k, 1),
        )
        log_p = model.predictive_log_prob(every).view(k, len(SUBSETS))
        u = model.posterior(X).mean  # 50 x 2
    predicted = SUBSETS[log_p.argmax(-1)]
    scores = {"most probable subset": [], "Pareto set of means": [], "winners": []}
    for i, t in enumerate(test.tolist()):
        truth, u_t = chosen[t], u[option_sets[t]]
        for name, guess in zip(scores, (predicted[i], pareto_set(u_t), winners(u_t))):
            scores[name].append((guess == truth).double().mean().item())
    return scores


# %% [markdown]
# ## 10-fold cross-validation over tasks
# (Smoke mode: 30 tasks, 3 folds, a few epochs.)

# %%
num_tasks = 30 if SMOKE_TEST else len(tasks)
num_folds = 3 if SMOKE_TEST else 10
folds = torch.randperm(len(tasks), generator=torch.Generator().manual_seed(0))
folds = folds[:num_tasks].chunk(num_folds)
results = {}
for name, cls in LIKELIHOODS.items():
    start, scores = time.perf_counter(), None
    for k, test in enumerate(folds):
        train = torch.cat([f for j, f in enumerate(folds) if j != k])
        fold_scores = evaluate(fit(cls, train, seed=k), test)
        scores = (
            fold_scores
            if scores is None
            else {r: scores[r] + fold_scores[r] for r in scores}
        )
    results[name] = (scores, time.perf_counter() - start)

print("\n| likelihood | rule | per-task accuracy (mean ± sd over folds) | published |")
print("|---|---|---|---|")
fold_sizes = [len(f) for f in folds]
summary = {}
for name, (scores, seconds) in results.items():
    for rule, values in scores.items():
        v = torch.tensor(values, dtype=torch.float64)
        per_fold = torch.stack([p.mean() for p in v.split(fold_sizes)])
        summary[(name, rule)] = (v.mean().item(), per_fold.std().item())
        print(
            f"| {name} | {rule} | {v.mean():.3f} ± {per_fold.std():.3f} | "
            f"{'0.84' if name == 'pseudo-rational' else '–'} |"
        )
    print(f"({name}: {seconds:.0f} s for {num_folds} folds)")

# %% [markdown]
# Measured in full mode (10 folds, 158 tasks): pseudo-rational 0.87 ± 0.04
# with the most probable subset (0.86–0.87 with the plug-in rules), rational
# 0.85–0.86, against the published 0.84. The differences between rules and
# likelihoods are well inside the fold-to-fold spread (sd ≈ 0.05): on these
# data the three rules mostly agree.
#
# ## The two learned utilities
# Refit the pseudo-rational model on all 158 usable tasks and plot each
# utility's posterior mean at the 50 ellipses against eccentricity and
# rotation. The labels "utility 1/2" are arbitrary. In the full run both
# utilities fall with `ecc_sq` and have a short `rotation` lengthscale, with
# highs near 0, π and 2π (dotted lines mark multiples of π/2): the choices pin
# down the Pareto structure, not a one-criterion-per-utility split.

# %%
model = fit(PseudoRationalChoiceLikelihood, torch.arange(num_tasks), seed=0)
with torch.no_grad():
    post = model.posterior(X)
    u_mean, u_sd = post.mean, post.variance.clamp_min(0).sqrt()
lengthscales = model.covar_module.base_kernel.lengthscale.detach().squeeze(-2)
for j in range(2):
    print(
        f"utility {j + 1} ARD lengthscales: "
        + ", ".join(f"{n} {v:.2f}" for n, v in zip(FEATURES, lengthscales[j].tolist()))
    )

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUTPUT.mkdir(parents=True, exist_ok=True)
fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharey="row")
ecc, rot = raw[:, 3], raw[:, 2]
for j in range(2):
    for ax, x, label in (
        (axes[j, 0], ecc, "ecc_sq"),
        (axes[j, 1], rot, "rotation (rad)"),
    ):
        ax.errorbar(x, u_mean[:, j], yerr=2 * u_sd[:, j], fmt="o", ms=3, alpha=0.6)
        ax.set_xlabel(label)
    axes[j, 0].set_ylabel(f"utility {j + 1} (mean ± 2 sd)")
for ax in axes[:, 1]:
    for m in range(5):
        ax.axvline(m * torch.pi / 2, c="grey", ls=":", lw=0.8)
fig.suptitle("pseudo-rational choice model: latent utilities of the 50 ellipses")
fig.tight_layout()
fig.savefig(OUTPUT / "ellipse_choice_functions.png", dpi=100)
print(f"wrote {OUTPUT / 'ellipse_choice_functions.png'}")
