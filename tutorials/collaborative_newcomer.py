# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # A newcomer to a collaborative preference model
#
# Many people have each compared a few pairs of the same items. They do not
# agree, but their disagreements are not arbitrary either: some like one
# kind of item, some another. prefbo's collaborative preference model
# (`prefbo.models.collaborative.CollaborativePreferenceGP`) writes person
# `p`'s utility as
#
# `f_p(x) = g(x) + Σ_k w_pk h_k(x) + r_p(x)`:
#
# - `g`, a **shared utility**, and `h_1 … h_K`, **latent tastes**: smooth
#   functions of the item's design (sparse GPs), learnt from everyone's
#   answers;
# - `w_p`, person `p`'s **weights** on the tastes (prior `N(0, I)`): a person
#   is a point in a `K`-dimensional taste space;
# - `r_p`, a small **residual** of their own (a GP on `num_residual` inducing
#   points).
#
# Where the items are a pool with more items than the model's inducing points
# (64), `g` and each taste also give every item an effect of its own beyond
# its design (`item_effects`, on by default there; see the population models
# page). This tutorial's 60 items are all inducing points, so it has none.
#
# Inference splits the two levels. The shared part (`g`, the tastes, their
# scales and lengthscales) is fitted by stochastic variational EM on
# minibatches of people (`model.fit()`); each person's posterior over their
# few latent coordinates (weights and residual) is found by expectation
# propagation in those few dimensions (EP, the default for the probit; its
# mean follows the skewed posterior of a few decisive answers, where a
# Laplace approximation's mode lags behind), so it can be updated the
# moment they answer, with the shared part held fixed.
#
# This tutorial follows one story:
#
# 1. a population answered pairs of items; we fit the model on 300 of them
#    and look at which tastes it kept;
# 2. newcomers arrive. With no answers their posterior is the population's,
#    so even their **first** question is informed. Over 40 newcomers held out
#    of the fit we compare asking them the model's questions (EUBO) with
#    asking random pairs: how fast does the model's recommendation reach
#    each newcomer's favourite item?
# 3. how long folding in one answer takes, and the model as a BoTorch
#    `Model` in BoTorch's own EUBO;
# 4. when to use this model rather than the exact population model or one
#    model per person.
#
# Every seed is fixed up front (the constants below). Set `SMOKE_TEST=1`
# for a tiny run (the test suite does); `TUTORIAL_OUTPUT` names the folder
# for the figure.

# %%
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from botorch.acquisition.preference import (  # noqa: E402
    AnalyticExpectedUtilityOfBestOption,
)
from botorch.models.model import Model  # noqa: E402

from prefbo.datasets.population import planted_population  # noqa: E402
from prefbo.models.collaborative import CollaborativePreferenceGP  # noqa: E402
from prefbo.models.collaborative.questions import next_questions  # noqa: E402

SMOKE_TEST = bool(os.environ.get("SMOKE_TEST"))
OUTPUT = Path(os.environ.get("TUTORIAL_OUTPUT", "tutorial_output"))
OUTPUT.mkdir(parents=True, exist_ok=True)
torch.manual_seed(0)
START = time.perf_counter()

#: The planted world and its people (one population; the newcomers are its
#: last people, so they live in the same world as the training people).
POPULATION_SEED = 0
#: The model's inducing points and the tastes' random start.
MODEL_SEED = 0
#: The order of the minibatches of people in the fit.
FIT_SEED = 0
#: The noise of the newcomers' simulated answers (the same stream for both
#: ways of asking), and the random pairs of the baseline.
ANSWER_SEED = 1
RANDOM_PAIR_SEED = 2

NUM_TRAIN = 40 if SMOKE_TEST else 300
NUM_NEWCOMERS = 6 if SMOKE_TEST else 40
FIT_STEPS = 30 if SMOKE_TEST else None  # None: the fit's default (300 here)
NUM_TASTES = 3  # the model's default; the world below has 2
NOISE_STD = 1.25  # the generator's default answer noise, stated
ANSWERS = [0, 1, 2, 3, 5]  # a newcomer's answers at which we score
TIMED_ANSWERS = 5 if SMOKE_TEST else 20

# %% [markdown]
# ## 1. The population and the fit
# `planted_population` draws a synthetic world whose truth we know: 60 items
# in `[0, 1]^3`, a shared utility `g` and **two** tastes (smooth random
# functions), and people whose weights on the tastes are `N(0, 1)` each,
# plus a small residual (sd 0.2). Each person compares 20 random pairs of
# items, each utility read with `N(0, 1.25²)` noise, so about 80 % of their
# answers agree with their own utility. The tastes dominate: at an item, `g`
# has variance 1 and the weighted tastes about 2 each.
#
# We draw 300 + 40 people of one world: the first 300 train the model, the
# last 40 are the newcomers of part 2 (their answers are not used). The
# generator also gives each person two features that predict half of their
# weights; we leave them out, so a newcomer's starting point is the whole
# population's (with `person_features=` and `add_person(features=u)` it
# would be `N(B u, I)` instead, `B` learnt).
#
# We give the model `K = 3` tastes, one more than were planted: a taste the
# answers do not support should shrink away.

# %%
pop = planted_population(
    num_people=NUM_TRAIN + NUM_NEWCOMERS, noise_std=NOISE_STD, seed=POPULATION_SEED
)
items = pop.designs  # 60 x 3, float64
train_answers = pop.answers[pop.answers[:, 0] < NUM_TRAIN]  # m x 3
newcomer_utility = pop.utilities[NUM_TRAIN:]  # newcomers x 60, the truth
print(
    f"{NUM_TRAIN} training people, {len(train_answers)} answers over "
    f"{len(items)} items; {NUM_NEWCOMERS} newcomers held out"
)

t0 = time.perf_counter()
model = CollaborativePreferenceGP(
    items, train_answers, num_people=NUM_TRAIN, num_tastes=NUM_TASTES, seed=MODEL_SEED
)
elbo = model.fit(steps=FIT_STEPS, seed=FIT_SEED)
fit_seconds = time.perf_counter() - t0
print(
    f"fitted in {fit_seconds:.1f} s: {len(elbo)} steps, ELBO per answer "
    f"{elbo[0]:.3f} -> {elbo[-1]:.3f}"
)

# %% [markdown]
# ### Which tastes did it keep?
# `model.shared.scale` holds the `K + 1` scales: the shared utility's, then
# each taste's. An unused taste's scale shrinks toward 0. We call a taste
# *kept* when its scale is at least a tenth of the largest taste's.
#
# Do the kept tastes line up with the planted ones? Not one to one, and they
# need not: the weights' prior `N(0, I)` does not change when the taste
# space is rotated, so the model can only recover the *space* the planted
# tastes span. We therefore regress each planted taste (at the 60 items,
# centred) on the learnt tastes' posterior means and report the share of its
# variance they explain (R²). The learnt functions' means at the items come
# from the model's `shared` part.

# %%
with torch.no_grad():
    shared = model.shared
    learnt = shared.means(shared.basis(items), model.items)  # (K+1) x 60
scales = shared.scale.detach()
taste_scales = scales[1:]
kept = (taste_scales >= 0.1 * taste_scales.max()).nonzero().squeeze(-1)
print(f"shared utility scale {scales[0]:.2f}")
for k, s in enumerate(taste_scales.tolist()):
    sd = learnt[1 + k].std().item()
    state = "kept" if k in kept.tolist() else "shrunk away"
    print(f"taste {k + 1}: scale {s:.3f}, sd of its mean at items {sd:.2f}: {state}")


def centred(t):
    return t - t.mean(0)


basis = centred(learnt[1 + kept].T)  # 60 x kept
planted = centred(pop.tastes)  # 60 x 2
fit_coef = torch.linalg.lstsq(basis, planted).solution
r2 = 1 - ((planted - basis @ fit_coef) ** 2).sum(0) / (planted**2).sum(0)
for k, value in enumerate(r2.tolist()):
    print(f"planted taste {k + 1}: R² on the kept tastes {value:.3f}")
corr_g = torch.corrcoef(torch.stack([learnt[0], pop.shared]))[0, 1]
print(f"learnt vs planted shared utility: correlation {corr_g:.3f}")

# %% [markdown]
# ## 2. Newcomers: the model's questions against random pairs
# Each newcomer joins with `model.add_person()`, which returns their id.
# Until they answer, their posterior is the population's. Then, round by
# round, the newcomers answer one pair each:
#
# - **model questions**: one batched call of `next_questions(model, people,
#   items, strategy="eubo")` gives every listed newcomer the pair with the
#   highest expected utility of the better option (EUBO) under their own
#   current posterior;
# - **random pairs**: two distinct items drawn uniformly.
#
# A newcomer's answer is simulated from their *true* utility with the same
# noise as the training answers, and folded in with
# `model.observe(pid, winner, loser)` (the shared part is not refitted).
# Both ways of asking draw the answer noise from the same seeded stream.
#
# After 0, 1, 2, 3 and 5 answers we take the model's recommendation for the
# newcomer, the item with the highest posterior mean utility
# (`model.utility_mean(pid).argmax()`), and score it by its **regret**: the
# newcomer's true best utility minus their true utility at the recommended
# item (0: the model found their favourite). With 0 answers both ways of
# asking give the same recommendation: the population's favourite.

# %%


def regret(true_u, mean):
    r"""True best utility minus the true utility at ``mean``'s argmax."""
    return float(true_u.max() - true_u[mean.argmax()])


def run_newcomers(strategy):
    r"""Regret of each newcomer at each number of answers in ``ANSWERS``:
    a ``len(ANSWERS) x newcomers`` tensor."""
    ids = [model.add_person() for _ in range(NUM_NEWCOMERS)]
    people = torch.tensor(ids)
    noise = torch.Generator().manual_seed(ANSWER_SEED)
    random_pairs = torch.Generator().manual_seed(RANDOM_PAIR_SEED)
    out = torch.zeros(len(ANSWERS), NUM_NEWCOMERS, dtype=torch.float64)
    for answered in range(max(ANSWERS) + 1):
        if answered in ANSWERS:
            row = ANSWERS.index(answered)
            for i, pid in enumerate(ids):
                out[row, i] = regret(newcomer_utility[i], model.utility_mean(pid))
        if answered == max(ANSWERS):
            break
        if strategy == "eubo":
            pairs = next_questions(model, people, items, strategy="eubo")  # B x 2
        else:
            pairs = torch.stack(
                [torch.randperm(len(items), generator=random_pairs)[:2] for _ in ids]
            )  # B x 2
        u = newcomer_utility.gather(1, pairs)  # B x 2
        read = u + NOISE_STD * torch.randn(u.shape, dtype=u.dtype, generator=noise)
        first_wins = read[:, 0] > read[:, 1]
        winners = torch.where(first_wins, pairs[:, 0], pairs[:, 1])
        losers = torch.where(first_wins, pairs[:, 1], pairs[:, 0])
        for i, pid in enumerate(ids):
            model.observe(pid, winners[i : i + 1], losers[i : i + 1])
    return out


t0 = time.perf_counter()
regrets = {"model questions": run_newcomers("eubo")}
regrets["random pairs"] = run_newcomers("random")
print(f"newcomers simulated in {time.perf_counter() - t0:.1f} s")

# a yardstick: the regret of an item picked at random, and of the
# population's favourite (the recommendation with no answers)
random_item = (newcomer_utility.max(-1).values - newcomer_utility.mean(-1)).median()
print(f"median regret of a random item: {random_item:.2f}")

# %% [markdown]
# ### Results
# Median regret over the newcomers, with the 25th and 75th percentiles in
# brackets, and the share whose recommended item is exactly their
# favourite. The last column pairs the two ways of asking on the same
# newcomer: for how many the model's questions gave a lower regret, a higher
# one, or the same.

# %%


def quantiles(values):
    q = torch.quantile(values, torch.tensor([0.25, 0.5, 0.75], dtype=values.dtype))
    return q.tolist()


STRATEGIES = list(regrets)
print(
    "| answers | "
    + " | ".join(f"{s}: median [25 %, 75 %] | {s}: favourite found" for s in STRATEGIES)
    + " | model better / worse / same |"
)
print("|---|" + "---|---|" * len(STRATEGIES) + "---|")
for row, k in enumerate(ANSWERS):
    cells = []
    for s in STRATEGIES:
        lo, mid, hi = quantiles(regrets[s][row])
        found = (regrets[s][row] == 0).double().mean().item()
        cells += [f"{mid:.2f} [{lo:.2f}, {hi:.2f}]", f"{found:.0%}"]
    diff = regrets["model questions"][row] - regrets["random pairs"][row]
    better, worse = int((diff < 0).sum()), int((diff > 0).sum())
    same = NUM_NEWCOMERS - better - worse
    print(f"| {k} | " + " | ".join(cells) + f" | {better} / {worse} / {same} |")
for row, k in enumerate(ANSWERS[1:], start=1):
    m_q = quantiles(regrets["model questions"][row])[1]
    m_r = quantiles(regrets["random pairs"][row])[1]
    verdict = "lower" if m_q < m_r else "NOT lower"
    print(
        f"after {k} answers: median regret with the model's questions is "
        f"{verdict} than with random pairs ({m_q:.2f} against {m_r:.2f})"
    )

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1, 2]})
ax = axes[0]
labels = ["shared g"] + [f"taste {k + 1}" for k in range(len(taste_scales))]
ax.bar(labels, scales.tolist(), color=["C7"] + ["C0"] * len(taste_scales))
ax.set(ylabel="learnt scale", title="what the model kept")
ax = axes[1]
for (s, values), colour in zip(regrets.items(), ("C0", "C1")):
    lo, mid, hi = (torch.tensor([quantiles(v) for v in values]).T).tolist()
    ax.plot(ANSWERS, mid, marker="o", color=colour, label=f"{s} (median)")
    ax.fill_between(ANSWERS, lo, hi, color=colour, alpha=0.2)
ax.axhline(random_item, color="k", ls=":", lw=0.8, label="a random item (median)")
ax.set(
    xlabel="answers of the newcomer",
    ylabel="regret of the recommended item",
    xticks=ANSWERS,
    title=f"{NUM_NEWCOMERS} newcomers (bands: 25th–75th percentile)",
)
ax.legend(loc="center right")
ax.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(OUTPUT / "collaborative_newcomer.png", dpi=90)
plt.close(fig)
print(f"wrote {OUTPUT / 'collaborative_newcomer.png'}")

# %% [markdown]
# ## 3. Milliseconds per answer, and a BoTorch model
# Folding in an answer is a Newton solve in the person's `K + M_r`
# coordinates (here 3 tastes + 16 residual points), started at their last
# mode; the next question is one closed-form EUBO over all pairs of the 60
# items. We time both for one more newcomer answering 20 questions, and one
# `next_questions` call for all 40 newcomers of the model-question run at
# once.

# %%
pid = model.add_person()
truth = pop.utilities[NUM_TRAIN]  # this newcomer answers as the first one did
noise = torch.Generator().manual_seed(ANSWER_SEED)
observe_ms, question_ms = [], []
pair = next_questions(model, torch.tensor([pid]), items)[0]
for _ in range(TIMED_ANSWERS):
    read = truth[pair] + NOISE_STD * torch.randn(2, dtype=truth.dtype, generator=noise)
    winner, loser = (pair[0], pair[1]) if read[0] > read[1] else (pair[1], pair[0])
    t0 = time.perf_counter()
    model.observe(pid, winner.view(1), loser.view(1))
    t1 = time.perf_counter()
    pair = next_questions(model, torch.tensor([pid]), items)[0]
    t2 = time.perf_counter()
    observe_ms.append(1000 * (t1 - t0))
    question_ms.append(1000 * (t2 - t1))
observe_ms, question_ms = torch.tensor(observe_ms), torch.tensor(question_ms)
total_ms = observe_ms + question_ms
print(
    f"observe: median {observe_ms.median():.1f} ms; next_questions: median "
    f"{question_ms.median():.1f} ms; both: median {total_ms.median():.1f} ms, "
    f"max {total_ms.max():.1f} ms over {TIMED_ANSWERS} answers"
)
batch = torch.arange(NUM_TRAIN, NUM_TRAIN + NUM_NEWCOMERS)  # the EUBO run's ids
t0 = time.perf_counter()
next_questions(model, batch, items)
print(
    f"next_questions for {len(batch)} people at once: "
    f"{1000 * (time.perf_counter() - t0):.1f} ms"
)

# %% [markdown]
# `model.person_model(pid)` is one person's view as a BoTorch `Model`, so
# BoTorch's acquisition functions take it as they are. Here BoTorch's own
# `AnalyticExpectedUtilityOfBestOption` scores all 1,770 pairs of the 60
# items (a `1770 x 2 x 3` batch) for the newcomer we just timed; its best
# pair should be the one `next_questions` picked with its own closed form.

# %%
person = model.person_model(pid)
assert isinstance(person, Model)
eubo = AnalyticExpectedUtilityOfBestOption(pref_model=person)
i, j = torch.triu_indices(len(items), len(items), offset=1)
all_pairs = torch.stack([i, j], -1)  # 1770 x 2
with torch.no_grad():
    values = eubo(items[all_pairs])  # 1770
best = all_pairs[values.argmax()]
chosen = ((all_pairs == pair.sort().values).all(-1)).nonzero().item()
print(
    f"BoTorch's EUBO: best pair {best.tolist()} (value {values.max():.4f}); "
    f"next_questions chose {sorted(pair.tolist())} (value {values[chosen]:.4f})"
)
assert torch.isclose(values[chosen], values.max(), rtol=1e-6)
print(f"total time {time.perf_counter() - START:.0f} s")

# %% [markdown]
# ## 4. When to use which model
# - **One model per person** (e.g. `PairwiseLaplaceGP` on their answers):
#   nothing is shared, so a newcomer starts from the prior — their first
#   questions are uninformed and the model needs many answers from each
#   person. Right for a single person, or people who have nothing in common.
# - **The exact population model** (`prefbo.models.population`): one GP over
#   `[x, person]`, the shared utility plus each person's own deviation, with
#   exact (Laplace or EP) inference and hyperparameters from the evidence.
#   It assumes nothing about *how* people differ, but its cost grows as the
#   cube of its latent values (one per person and item that person
#   compared), so it suits tens of people, not hundreds; and a new answer
#   means recomputing the posterior. `prefbo.models.population_variational`
#   is its sparse variational form for many people (the same
#   shared-plus-deviation structure, no tastes).
# - **The collaborative model** (this tutorial): assumes people differ along
#   a few shared tastes (plus a small residual), which is what lets one
#   person's answers be folded in within milliseconds and lets a newcomer's
#   first question already use what the population taught. It scales to
#   many people (the fit samples minibatches of people), but it is an
#   approximation twice over — sparse shared functions, and a person's
#   Gaussian (EP) posterior taken at the shared functions' means — and the shared
#   part only learns from new answers when you call `fit()` again (it
#   warm-starts). When people's differences are not low-dimensional, only
#   the residual can express them.
#
# ## Reading the numbers
# In our full runs (300 training people, 40 newcomers; 13 s on a quiet
# 2-core machine and up to 76 s on a loaded one, of which the fit took 11 to
# 47 s; the numbers below are the same in every run, the times are not):
#
# - the model kept two of its three tastes (scales 1.49 and 1.17) and shrank
#   the third to 0.02; the two kept tastes explain 97–98 % of each planted
#   taste's variance (R² 0.974 and 0.979), and the learnt shared utility
#   correlates 0.99 with the planted one;
# - with no answers, the population's favourite has a median regret of 1.13
#   for the newcomers (a random item: 4.3) and is the favourite of 18 % of
#   them: the population posterior is a useful start on its own;
# - after 1, 2, 3 and 5 answers the model's questions gave a lower median
#   regret than random pairs (0.28 against 1.25, 0.13 against 1.09, 0.00
#   against 0.31, 0.00 against 0.13) and found more newcomers' favourites
#   (25 %, 42 %, 60 %, 65 % against 15 %, 20 %, 30 %, 40 %); paired on the
#   same newcomer they did better for 15, 22, 22 and 19 of the 40 and worse
#   for 5, 9, 5 and 6. With Laplace posteriors (`people_inference=
#   "laplace"`) the model-question median went *up* from 2 to 3 answers
#   (0.20 to 0.58), no better than random pairs (better for 9 newcomers,
#   worse for 9);
# - folding in an answer took a median 4.3 ms (`observe`, EP) and choosing
#   the next question 1.4 ms (`next_questions`), 5.8 ms together and at most
#   6.2 ms over 20 answers on a quiet machine (beside jobs that held a load
#   of 8, `observe` took 45 ms); one `next_questions` call for all 40
#   newcomers took 4.4 ms. BoTorch's EUBO picked the same pair as `next_questions`.
#
# 40 newcomers with one noisy answer stream each is a small sample: read the
# differences of medians as a tendency, not a precise effect size.
