# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Studies that are not a box: fonts, sizes, and a menu of dishes
#
# Real preference studies mix kinds of variables. A designer compares a
# **font** (categorical) at a **size** (integer), a **contrast** (continuous,
# on a log scale) and a **weight** (ordinal); a food scientist compares
# dishes from a **fixed menu**, each described by a few features. A
# `prefbo.space.Space` holds such variables; `PreferentialOptimizer` takes it
# in place of a box. Every option it asks is a real design: integers are
# integral, categories and dishes come from their sets, and the two options
# of a question always differ.
#
# Set `SMOKE_TEST=1` for a tiny run; `TUTORIAL_OUTPUT` names the output folder.

# %%
import json
import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from prefbo.loop import PreferentialOptimizer  # noqa: E402
from prefbo.space import (  # noqa: E402
    Categorical,
    Continuous,
    Integer,
    ItemPool,
    Ordinal,
    Space,
)

SMOKE_TEST = bool(os.environ.get("SMOKE_TEST"))
OUTPUT = Path(os.environ.get("TUTORIAL_OUTPUT", "tutorial_output"))
OUTPUT.mkdir(parents=True, exist_ok=True)
ANSWERS = 4 if SMOKE_TEST else 25

# %% [markdown]
# ## A mixed space
# The model sees each design as a point of a unit cube: a categorical
# variable as one column per category (one-hot; no order is implied between
# fonts), an integer and an ordinal as one column on their levels, a
# continuous variable as one column (here on a log scale, so 0.5→1 is as far
# as 1→2). `encode` and `decode` convert between a person's dicts and those
# points.

# %%
space = Space(
    [
        Categorical("font", ["serif", "sans", "mono"]),
        Integer("size", 8, 24),
        Continuous("contrast", 0.5, 2.0, log=True),
        Ordinal("weight", ["light", "regular", "bold"]),
    ]
)
print("model columns:", space.dim)
X = space.encode([{"font": "sans", "size": 12, "contrast": 1.0, "weight": "bold"}])
print(X.tolist(), "->", space.decode(X))


# %% [markdown]
# A simulated reader prefers sans at size 14, a contrast near 1.2, and a
# regular weight, and answers with a little noise.


# %%
def utility(design):
    font = {"serif": 0.2, "sans": 0.6, "mono": -0.4}[design["font"]]
    size = -(((design["size"] - 14) / 5) ** 2)
    contrast = -(((math.log(design["contrast"]) - math.log(1.2)) / 0.4) ** 2)
    weight = -0.3 * abs(["light", "regular", "bold"].index(design["weight"]) - 1)
    return font + size + contrast + weight


g = torch.Generator().manual_seed(0)


def answer(designs):
    noisy = [utility(d) + 0.1 * torch.randn(1, generator=g).item() for d in designs]
    return int(noisy[1] > noisy[0])


opt = PreferentialOptimizer(space, seed=0)
for _ in range(ANSWERS):
    designs = space.decode(opt.ask())  # the two options, as dicts
    opt.tell(answer(designs))
best = space.decode(opt.best()[0])[0]
print(f"after {ANSWERS} answers the loop recommends {best}")
ideal = {"font": "sans", "size": 14, "contrast": 1.2, "weight": "regular"}
print(f"utility {utility(best):.3f}; the best possible is {utility(ideal):.3f}")

# %% [markdown]
# The same space drives an interactive session in the terminal: write its
# JSON form to `space.json` and run `prefbo session new s.jsonl --space
# space.json`; each option is shown by its values (`font=sans, size=14,
# contrast=1.2, weight=regular`), and the session log stores the space, so
# `prefbo session resume s.jsonl` needs nothing else.

# %%
(OUTPUT / "space.json").write_text(json.dumps(space.to_dict(), indent=1))
print((OUTPUT / "space.json").read_text()[:200], "...")

# %% [markdown]
# ## A menu of dishes
# An `ItemPool` is a variable whose values are item ids, each described by a
# feature row; the model compares dishes by their features (scaled to
# [0, 1] over the menu), so what one answer teaches about a dish carries to
# similar ones. With a pool of up to 3,000 items the loop scores *every* pair
# of dishes by EUBO and asks the best one; a pair asked before is asked again
# only when no unasked pair is nearly as informative (`prefbo.loop.repeats`).

# %%
n_dishes = 30 if SMOKE_TEST else 150
F = torch.rand(n_dishes, 3, dtype=torch.float64, generator=g)
names = [f"dish{i}" for i in range(n_dishes)]
menu = Space(
    [ItemPool("dish", names, F.tolist(), feature_names=["sweet", "salty", "spicy"])]
)
taste = 1.5 * F[:, 0] - (F[:, 1] - 0.5) ** 2 * 4 - F[:, 2]  # hidden utility

opt = PreferentialOptimizer(menu, seed=1)
rank_of_best = []
for _ in range(ANSWERS):
    a, b = (names.index(d["dish"]) for d in menu.decode(opt.ask()))
    noisy = taste[[a, b]] + 0.1 * torch.randn(2, generator=g, dtype=torch.float64)
    opt.tell(int(noisy[1] > noisy[0]))
    pick = names.index(menu.decode(opt.best()[0])[0]["dish"])
    rank_of_best.append(int((taste > taste[pick]).sum()) + 1)
print(f"recommended dish ranks {rank_of_best[-1]} of {n_dishes} by the hidden taste")

# %%
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(range(1, ANSWERS + 1), rank_of_best, marker="o")
ax.set_xlabel("answers")
ax.set_ylabel("rank of the recommended dish")
ax.set_yscale("log")
ax.set_title("A menu of dishes: exact EUBO over every pair")
fig.tight_layout()
fig.savefig(OUTPUT / "spaces_and_pools.png", dpi=120)

# %% [markdown]
# Regret against random questions on both kinds of space, over 10 seeds:
# `OMP_NUM_THREADS=1 python -m benchmarks space_regret`.
