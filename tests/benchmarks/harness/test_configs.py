"""``benchmarks/harness/configs.py``: the loops compared and their settings."""

from __future__ import annotations

import torch

from benchmarks.harness import configs
from benchmarks.harness.problems import Utility


def test_the_initial_pairs_are_the_runs_own_and_lie_in_the_box():
    u = Utility("Branin")
    first = configs.initial_pairs(u, seed=3)
    assert len(first) == configs.INITIAL_PAIRS
    assert all(p.shape == (2, 2) for p in first)
    X = torch.stack(first)
    assert (X >= u.bounds[0]).all() and (X <= u.bounds[1]).all()
    again = configs.initial_pairs(u, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    other = configs.initial_pairs(u, seed=4)
    assert not torch.equal(first[0], other[0])


def test_each_configuration_builds_its_loop():
    u = Utility("Branin")
    assert isinstance(configs.make_loop("botorch", u, 0), configs.BoTorchLoop)
    loop = configs.make_loop("laplace", u, 0)
    assert isinstance(loop, configs.PrefboLoop)
    assert set(configs.CONFIGS) == {"botorch", "default", "laplace", "random"}
    assert configs.CONFIGS[configs.REFERENCE] == {}


def test_the_reference_loop_asks_inside_the_box_after_its_first_answers():
    u = Utility("Branin")
    loop = configs.BoTorchLoop(u, seed=0)
    with configs.quiet():
        for pair in configs.initial_pairs(u, seed=0)[:2]:
            loop.tell(pair, 0)
        pair = loop.ask()
        best = loop.best()
    assert pair.shape == (2, 2) and best.shape == (2,)
    assert (pair >= u.bounds[0]).all() and (pair <= u.bounds[1]).all()
    assert any(torch.equal(best, x) for x in u.from_unit(loop.Z))  # a told design


def test_the_seed_sets_and_budgets():
    assert list(configs.SEED_SETS["untuned"]) == list(range(1000, 1020))
    assert configs.BUDGETS == (30, 60) and configs.SIGMAS == (0.01, 0.1, 0.3)
