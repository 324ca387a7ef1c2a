# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Your first PBO loop
#
# Preferential Bayesian optimisation (PBO) finds the best design by asking a
# person "which of these two do you prefer?". `PreferentialOptimizer` does the
# bookkeeping: `ask()` returns the next pair, `tell(i)` records that option `i`
# won, `best()` recommends the design seen with the highest posterior mean.
# Here a simulated person (`SimulatedPerson`, probit answer noise) answers for
# the negative Branin utility. Set `SMOKE_TEST=1` for a tiny run;
# `TUTORIAL_OUTPUT` names the folder for the figure.

# %%
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from prefbo.loop.optimizer import PreferentialOptimizer  # noqa: E402
from prefbo.test_functions import Branin, SimulatedPerson  # noqa: E402

SMOKE_TEST = bool(os.environ.get("SMOKE_TEST"))
OUTPUT = Path(os.environ.get("TUTORIAL_OUTPUT", "tutorial_output"))
OUTPUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## The person and the optimizer
# The utility is standardised (standard deviation 1 over the box), so
# `noise_std=0.1` is a fairly reliable person. EUBO (expected utility of the
# best option) asks the pair whose winner we expect to be best. The first two
# questions are random.

# %%
problem = Branin()
person = SimulatedPerson(problem, noise_std=0.1, seed=0)
opt = PreferentialOptimizer(
    problem.bounds,
    model="laplace",
    strategy="eubo",
    seed=0,
    acqf_options={"num_restarts": 2, "raw_samples": 64, "maxiter": 50},
)
n_answers = 4 if SMOKE_TEST else 25

# %% [markdown]
# ## The loop
# Regret = optimal value − true utility of the recommendation.

# %%
regret = []
for k in range(n_answers):
    X = opt.ask()  # 2 x d: the two options
    opt.tell(person.compare(X[0], X[1]))  # 0 if the first won, 1 otherwise
    x_best, mean, sd = opt.best()
    regret.append(problem.optimal_value - problem(x_best).item())
    print(
        f"answer {k + 1:2d}: recommend {x_best.numpy().round(3)}, "
        f"regret {regret[-1]:.4f}"
    )

# %% [markdown]
# ## Regret and the final posterior
# The posterior mean is the model's estimate of the utility (up to an additive
# constant and scale: answers only reveal differences).

# %%
g = torch.linspace(0, 1, 30 if SMOKE_TEST else 80, dtype=torch.float64)
grid = torch.stack(torch.meshgrid(g, g, indexing="xy"), -1)  # g x g x 2
post_mean = opt.predict(grid.reshape(-1, 2))[0].reshape(grid.shape[:2])
designs, comps = opt.data()

fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
axes[0].plot(range(1, n_answers + 1), regret, "o-")
axes[0].set(xlabel="answers", ylabel="simple regret", title="regret")
for ax, Z, title in (
    (axes[1], problem(grid), "true utility"),
    (axes[2], post_mean, "posterior mean after the loop"),
):
    cs = ax.contourf(g.numpy(), g.numpy(), Z.numpy(), levels=20, cmap="viridis")
    fig.colorbar(cs, ax=ax)
    ax.scatter(*problem.optimizers.T.numpy(), marker="*", s=150, c="red")
    ax.set(title=title, xlabel="$x_1$", ylabel="$x_2$")
axes[2].scatter(*designs.T.numpy(), s=12, c="white", edgecolors="k")
axes[2].scatter(*x_best.numpy(), marker="X", s=120, c="cyan", edgecolors="k")
fig.tight_layout()
fig.savefig(OUTPUT / "first_pbo_loop.png", dpi=80)
plt.close(fig)
print(f"final regret {regret[-1]:.4f} after {n_answers} answers")
