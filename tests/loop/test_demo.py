import json
import math
import pickle
import statistics

import pytest

from prefbo.loop.demo import (
    Curve,
    SeedRun,
    Settings,
    compare_final,
    headline,
    main,
    parse_args,
    run_arm,
    run_seeds,
)
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.test_functions import Branin

TINY = Settings(
    iterations=1,
    initial_pairs=2,
    acqf_options={"num_restarts": 2, "raw_samples": 16, "maxiter": 20},
)


def _runs(final_eubo, final_random):
    r"""Seed runs with only the final regrets set."""
    return [
        SeedRun(
            seed,
            [1],
            {"eubo": Curve(regret=[e]), "random": Curve(regret=[r])},
            0.0,
        )
        for seed, (e, r) in enumerate(zip(final_eubo, final_random))
    ]


def test_demo_smoke_reports_medians_over_seeds(tmp_path, capsys):
    argv = ["--smoke", "--iterations", "1", "--initial-pairs", "2", "--workers", "1"]
    summary = main([*argv, "--output", str(tmp_path)])
    png, js = tmp_path / "demo.png", tmp_path / "demo_summary.json"
    assert png.exists() and png.stat().st_size > 10_000
    data = json.loads(js.read_text())
    assert data["regret"] == summary["regret"]
    assert data["seeds"] == [0, 1]
    settings = data["settings"]
    iterations, initial = settings["iterations"], settings["initial_pairs"]
    assert data["answers"] == list(range(initial, initial + iterations + 1))
    assert settings["acqf_options"]["num_restarts"] == 2
    for name in ("eubo", "random"):
        curves = data["regret"][name]
        assert len(curves) == 2 and all(len(c) == iterations + 1 for c in curves)
        assert all(math.isfinite(r) and r >= 0 for c in curves for r in c)
        # median and quartiles per answer, against the standard library's
        for j, q in enumerate(zip(*data["quartiles"][name])):
            values = [c[j] for c in curves]
            expected = statistics.quantiles(values, n=4, method="inclusive")
            assert q == pytest.approx(expected, rel=1e-12, abs=1e-15)
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("seed ") for line in out) == 2  # a line per seed
    assert not any(line.startswith("iter") for line in out)
    assert "inference regret over 2 seeds: median [25%, 75%]" in out
    assert out[-1] == headline(data)
    assert out[-1].startswith(f"median regret after {initial + iterations} answers")
    assert "over 2 seeds" in out[-1] and "not distinguishable on 2 seeds" in out[-1]


def test_the_demo_runs_the_loop_and_records_its_regret():
    problem = Branin()
    arms = {name: run_arm(name, 3, TINY) for name in ("eubo", "random")}
    for name, arm in arms.items():
        assert isinstance(arm.opt, PreferentialOptimizer)
        assert arm.opt.strategy == name and len(arm.opt.history) == 3
        x, _, _ = arm.opt.best()
        assert arm.curve.regret[-1] == max(
            problem.optimal_value - problem(x).item(), 0.0
        )
        assert arm.curve.recommended == x.tolist() and arm.answers == [2, 3]
    # identical people and initial questions for both strategies
    eubo, random = (arms[k].asked for k in ("eubo", "random"))
    assert all((a == b).all() for a, b in zip(eubo[:2], random[:2]))
    assert arms["eubo"].curve.regret[0] == arms["random"].curve.regret[0]


def test_a_seed_run_and_its_settings_travel_between_processes():
    (run,) = run_seeds([0], TINY)
    assert pickle.loads(pickle.dumps(TINY)) == TINY
    assert pickle.loads(pickle.dumps(run)) == run


@pytest.mark.slow  # each worker process imports torch and prefbo (~5 s)
def test_seeds_give_the_same_curves_in_worker_processes():
    here = run_seeds([0, 1], TINY, workers=1)
    pooled = run_seeds([0, 1], TINY, workers=2)
    assert [r.seed for r in pooled] == [0, 1]
    for a, b in zip(here, pooled):
        assert a.answers == b.answers
        for name in ("eubo", "random"):
            assert a.curves[name].regret == b.curves[name].regret
            assert a.curves[name].recommended == b.curves[name].recommended


def test_eubo_lower_on_every_seed_is_a_difference():
    test = compare_final(_runs([0.01 * k for k in range(8)], [1.0] * 8))
    # every sign of 8 distinct ranks the same way: 2 of 2^8 sign patterns
    assert test["p_value"] == pytest.approx(2 / 256)
    assert test["better"] == "eubo" and test["eubo_lower"] == 8
    summary = {
        "comparison": test,
        "seeds": list(range(8)),
        "answers": [29],
        "quartiles": {"eubo": [[0.01], [0.02], [0.03]], "random": [[1.0]] * 3},
    }
    line = headline(summary)
    assert line == (
        "median regret after 29 answers over 8 seeds: EUBO 0.0200 (IQR "
        "0.0100-0.0300) vs random 1.0000 (IQR 1.0000-1.0000): EUBO did better "
        "(EUBO lower on 8 of 8 seeds, random on 0; Wilcoxon signed-rank "
        "p = 0.008)"
    )


def test_random_lower_on_every_seed_is_a_difference():
    test = compare_final(_runs([1.0] * 8, [0.01 * k for k in range(8)]))
    assert test["better"] == "random" and test["random_lower"] == 8


def test_mixed_or_equal_final_regrets_are_not_distinguishable():
    test = compare_final(_runs([0.1, 0.2, 0.3, 0.4], [0.2, 0.1, 0.4, 0.3]))
    assert test["p_value"] > 0.05 and test["better"] is None
    test = compare_final(_runs([0.1] * 3, [0.1] * 3))
    assert test == {
        "seeds": 3,
        "eubo_lower": 0,
        "random_lower": 0,
        "p_value": None,
        "better": None,
    }


def test_options():
    args = parse_args(["--seeds", "3", "--seed", "5", "--workers", "2"])
    assert (args.seeds, args.seed, args.workers) == (3, 5, 2)
    assert args.settings == Settings()  # the loop's defaults, 4 + 25 answers
    assert parse_args(["--seeds", "1"]).workers == 1
    with pytest.raises(SystemExit):
        parse_args(["--seeds", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--workers", "0"])
