"""``benchmarks/pbo_recommendation_rules.py``: rules on one run, the report."""

from __future__ import annotations

import torch

from prefbo.loop import PreferentialOptimizer


def test_tiny_run_scores_every_rule_and_resumes(load_benchmark, tmp_path):
    bench = load_benchmark("pbo_recommendation_rules")
    store = tmp_path / "rules.jsonl"
    argv = ["--problems", "Branin", "--sigmas", "0.1", "--seeds", "1"]
    argv += ["--answers", "6", "--budgets", "5", "6", "--store", str(store)]
    bench.main(argv)
    (rec,) = bench.pbo_regret.load(store)
    assert sorted(rec["rules"]) == ["5", "6"]
    # the rules leave the run as it is: the loop recommends what it does
    # in a run made without them
    plain = bench.pbo_regret.run_one("Branin", 0.1, 0, "default", answers=6)
    assert rec["regret"] == [round(x, 5) for x in plain["regret"]]
    for b, found in rec["rules"].items():
        assert sorted(found) == sorted(bench.RULES)
        # the base rule is the loop's own recommendation
        assert abs(found["mean"] - rec["regret"][int(b) - 1]) < 1e-5
        assert all(0.0 <= r < 20.0 for r in found.values())
    bench.main(argv)  # stored: nothing is run again
    assert len(bench.pbo_regret.load(store)) == 1
    reference = [
        {"problem": "Branin", "sigma": 0.1, "config": "botorch", "regret": [1.0] * 6}
    ]
    text = bench.report([rec], reference)
    assert text.count("| `") == 2 * len(bench.RULES)


def test_wins_minus_losses_counts_the_answers(load_benchmark):
    bench = load_benchmark("pbo_recommendation_rules")
    opt = PreferentialOptimizer(torch.tensor([[0.0], [1.0]]), seed=0)
    a, b, c = torch.tensor([0.2]), torch.tensor([0.5]), torch.tensor([0.8])
    # b: 2 wins, 0 losses; a: 1 win, 1 loss; c: 0 wins, 2 losses
    for options, winner in [((a, b), 1), ((b, c), 0), ((a, c), 0)]:
        opt.tell(winner, options=torch.stack(options))
    assert torch.equal(bench.rule_wins_minus_losses(opt), b)
    asked, score = bench._counts(opt, opt.data()[0])
    assert asked.tolist() == [2.0, 2.0, 2.0]
    assert sorted(score.tolist()) == [-2.0, 0.0, 2.0]
