import json
import math

from prefbo.loop.demo import main


def test_demo_smoke(tmp_path, capsys):
    summary = main(["--smoke", "--output", str(tmp_path)])
    png, js = tmp_path / "demo.png", tmp_path / "demo_summary.json"
    assert png.exists() and png.stat().st_size > 10_000
    assert js.exists()
    data = json.loads(js.read_text())
    assert data["regret"] == summary["regret"]
    settings = data["settings"]
    iterations, initial = settings["iterations"], settings["initial_pairs"]
    assert data["answers"] == list(range(initial, initial + iterations + 1))
    for name in ("eubo", "random"):
        curve = data["regret"][name]
        assert len(curve) == iterations + 1
        assert all(math.isfinite(r) and r >= 0 for r in curve)
    out = capsys.readouterr().out
    assert f"iter   1/{iterations}" in out
    assert "final regret" in out and "EUBO" in out and "random" in out


def test_the_demo_runs_the_loop_and_prints_its_regret():
    from prefbo.loop.demo import parse_args, run
    from prefbo.loop.optimizer import PreferentialOptimizer

    args = parse_args(["--smoke", "--iterations", "1", "--initial-pairs", "2"])
    summary = run(args)
    problem = summary["_problem"]
    for name, arm in summary["_arms"].items():
        assert isinstance(arm.opt, PreferentialOptimizer)
        assert arm.opt.strategy == name and len(arm.opt.history) == 3
        x, _, _ = arm.opt.best()
        assert arm.regret[-1] == max(problem.optimal_value - problem(x).item(), 0.0)
    # identical people and initial questions for both strategies
    eubo, random = (summary["_arms"][k].asked for k in ("eubo", "random"))
    assert all((a == b).all() for a, b in zip(eubo[:2], random[:2]))
    assert summary["settings"]["num_restarts"] == 2
