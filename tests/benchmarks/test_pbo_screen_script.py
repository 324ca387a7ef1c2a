"""``benchmarks/pbo_screen.py``: a screen's summary on hand-made stores."""

from __future__ import annotations

import json
import math

import pytest

ENV_A = {"numpy": "2.4.6", "torch": "2.13.0+cpu"}
ENV_B = {"numpy": "2.3.0", "torch": "2.13.0+cpu"}


def _rec(config, problem, seed, r30, r60, versions=None, best=None):
    # regrets after answers 1-60: 1.0, except r30 at 30, r60 at 60 and an
    # optional best value at answer 40
    regret = [1.0] * 60
    regret[29], regret[59] = r30, r60
    if best is not None:
        regret[39] = best
    rec = {"problem": problem, "sigma": 0.1, "seed": seed, "config": config,
           "regret": regret}  # fmt: skip
    if versions is not None:
        rec["versions"] = versions
    return rec


def _tuning():
    # BoTorch's medians over its seeds 0-5 at 30 / 60: Branin 0.1 / 0.02,
    # Levy4 (0.1 + 0.3) / 2 = 0.2 and (0.05 + 0.15) / 2 = 0.1
    runs = [_rec("botorch", "Branin", seed, 0.1, 0.02) for seed in range(6)]
    runs += [_rec("botorch", "Levy4", seed, 0.1, 0.05) for seed in range(3)]
    runs += [_rec("botorch", "Levy4", seed, 0.3, 0.15) for seed in range(3, 6)]
    runs.append(_rec("botorch", "Levy4", 7, 9.0, 9.0))  # not a screen seed
    return runs


def _store(env=ENV_A):
    return [
        _rec("boundary-0.1", "Branin", 0, 0.099, 0.009, env),
        _rec("boundary-0.1", "Branin", 1, 0.399, 0.099, env),
        _rec("boundary-0.1", "Levy4", 0, 0.199, 0.049, env),
        _rec("boundary-0.1", "Levy4", 1, 0.199, 0.049, env),
        _rec("v", "Branin", 0, 0.049, 0.019, env, best=0.001),
        _rec("v", "Branin", 1, 0.399, 0.099, env),
        _rec("v", "Levy4", 0, 0.799, 0.499, env, best=0.001),
        _rec("v", "Levy4", 1, 0.099, 0.024, env),
    ]


def test_compare_counts_ratios_stuck_and_drifting_runs(load_benchmark):
    bench = load_benchmark("pbo_screen")
    groups = bench.group(_store())
    key = bench.environment({"versions": ENV_A})
    s = bench.compare(groups["v", key], groups["boundary-0.1", key], _tuning())
    assert s["runs"] == 4
    # paired ratios (r + 0.001) / (r_ref + 0.001) at 30: 0.5, 1, 4, 0.5
    assert s[30]["ratio"] == pytest.approx(1.0)
    assert s[30]["median"] == pytest.approx(math.sqrt(0.5 * 1.0))
    # cells: Branin log(0.5) + 0 < 0; Levy4 log 4 + log 0.5 > 0
    assert s[30]["cells_better"] == s[30]["cells_lower_mean"] == 1
    assert s[30]["cells"] == 2
    # limits at 30: Branin 0.3, Levy4 3 x median(0.1, 0.3) = 0.6
    assert s[30]["stuck"] == (2, 2)  # Branin seed 1 at 0.399, Levy4 seed 0 at 0.799
    assert s[30]["stuck_ref"] == (1, 1)  # Branin seed 1 at 0.399
    # at 60: ratios 2, 1, 10, 0.5; limits Branin 0.06, Levy4 0.3
    assert s[60]["ratio"] == pytest.approx(10**0.25)
    assert s[60]["stuck"] == (2, 2) and s[60]["stuck_ref"] == (1, 1)
    assert s[60]["mean"] == pytest.approx((0.019 + 0.099 + 0.499 + 0.024) / 4)
    # from 0.001 at answer 40: Levy4 seed 0 ends at 0.499 (drifting);
    # Branin seed 0 at 0.019 is 19x its best but only 0.018 above it
    assert s["drifting"] == 1 and s["drifting_ref"] == 0


def test_drifting_needs_both_the_factor_and_the_margin(load_benchmark):
    bench = load_benchmark("pbo_screen")
    run = [1.0] * 60
    run[30], run[59] = 0.01, 0.2  # 20x and 0.19 above its best
    assert bench.drifting(run)
    run[59] = 0.05  # 5x, but only 0.04 above
    assert not bench.drifting(run)
    run[30], run[59] = 0.1, 0.25  # 0.15 above, but 2.5x
    assert not bench.drifting(run)


def test_drifting_counts_the_best_from_answer_20_on(load_benchmark):
    bench = load_benchmark("pbo_screen")
    run = [0.2] * 60
    run[19] = 0.01  # after answer 20: counts
    assert bench.drifting(run)
    run[19], run[18] = 0.2, 0.01  # after answer 19: does not
    assert not bench.drifting(run)


def test_runs_pair_only_within_one_environment(load_benchmark):
    bench = load_benchmark("pbo_screen")
    records = [r for r in _store() if r["config"] == "v"]
    records += [r for r in _store(ENV_B) if r["config"] == "boundary-0.1"]
    with pytest.raises(bench.EnvironmentMismatch, match="'v' ran in .*2.4.6.*2.3.0"):
        bench.table(records, _tuning(), ["v"])
    text = bench.table(records, _tuning(), ["v"], any_environment=True)
    assert "| `v` (E1; E0) | 4 |" in text  # sorted keys: ENV_B's first
    # with the reference in both environments, each variant run meets its own
    both = records + [r for r in _store() if r["config"] == "boundary-0.1"]
    assert "| `v` (E1; E1) | 4 | 1.00 / " in bench.table(both, _tuning(), ["v"])


def test_unknown_variants_and_missing_botorch_cells_are_named(load_benchmark):
    bench = load_benchmark("pbo_screen")
    with pytest.raises(ValueError, match="'w' has no runs"):
        bench.table(_store(), _tuning(), ["w"])
    tuning = [r for r in _tuning() if (r["problem"], r["seed"]) != ("Levy4", 3)]
    missing = r"no BoTorch runs of \(cell, seed\) \[\(\('Levy4', 0.1\), 3\)\]"
    with pytest.raises(ValueError, match=missing):
        bench.table(_store(), tuning, ["v"])


def test_an_unknown_reference_is_named(load_benchmark):
    bench = load_benchmark("pbo_screen")
    with pytest.raises(ValueError, match="reference: 'nope' has no runs"):
        bench.table(_store(), _tuning(), ["v"], reference="nope")


def test_a_missing_store_file_is_named(load_benchmark, tmp_path, capsys):
    bench = load_benchmark("pbo_screen")
    missing = tmp_path / "none.jsonl"
    with pytest.raises(SystemExit):
        bench.main(["v", "--store", str(missing), "--tuning", str(missing)])
    assert f"no file {missing}" in capsys.readouterr().err


def test_main_prints_the_table_of_stores(load_benchmark, tmp_path):
    bench = load_benchmark("pbo_screen")
    store, tuning = tmp_path / "s.jsonl", tmp_path / "t.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in _store()))
    tuning.write_text("".join(json.dumps(r) + "\n" for r in _tuning()))
    text = bench.main(["v", "--store", str(store), "--tuning", str(tuning)])
    assert "| `v` (E0; E0) | 4 | 1.00 / 1.78 |" in text
