"""``benchmarks/pbo_regret.py``: a tiny stored run, the report's figures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from benchmarks.harness import environment, stores
from prefbo.utils.threads import describe


def test_tiny_run_stores_resumes_and_reports(load_benchmark, tmp_path):
    bench = load_benchmark("pbo_regret")
    store = tmp_path / "runs.jsonl"
    argv = ["--seed-set", "tuning", "--seeds", "2", "--problems", "Branin"]
    argv += ["--sigmas", "0.1", "--answers", "6", "--budgets", "5", "6"]
    argv += ["--configs", "botorch", "default", "--store", str(store)]
    bench.main(argv)
    records = stores.read(store)
    assert len(records) == 4
    for r in records:
        assert len(r["regret"]) == len(r["seconds"]) == 6
        assert all(x >= 0 and math.isfinite(x) for x in r["regret"])
        assert r["seconds"] == sorted(r["seconds"])
    # the first 4 answers are the same random pairs for both loops
    by = {(r["seed"], r["config"]): r for r in records}
    for seed in (0, 1):
        assert by[seed, "botorch"]["regret"][3] == pytest.approx(
            by[seed, "default"]["regret"][3], abs=0.35
        )
    bench.main(argv)  # resumed: nothing to do
    assert len(stores.read(store)) == 4
    text = bench.main(argv + ["--report", "--output", str(tmp_path)])
    assert (tmp_path / "pbo_regret_tuning.png").stat().st_size > 1000
    rows = [r for r in text.splitlines() if r.startswith("| Branin | 0.1 |")]
    assert len(rows) == 4  # 2 budgets x 2 configurations


def _record(problem, seed, config, final):
    return {
        "problem": problem,
        "sigma": 0.1,
        "seed": seed,
        "config": config,
        "regret": [final] * 4,
        "seconds": [1.0, 2.0, 3.0, 4.0] if config == "botorch" else [0.1] * 4,
    }


def test_report_counts_stuck_seeds_against_three_botorch_medians(load_benchmark):
    bench = load_benchmark("pbo_regret")
    ref = [0.1, 0.1, 0.2, 0.2, 0.3]  # median 0.2: stuck above 0.6
    mine = [0.05, 0.61, 0.59, 0.7, 0.1]
    records = [_record("Branin", s, "botorch", r) for s, r in enumerate(ref)]
    records += [_record("Branin", s, "default", r) for s, r in enumerate(mine)]
    text, verdict = bench.report(records, "tuning", budgets=(2, 4))
    row = [r for r in text.splitlines() if "| 4 | default |" in r][0]
    cells = [c.strip() for c in row.strip("| ").split(" | ")]
    assert cells[7] == "0.40"  # 2 of 5 above 0.6
    assert float(cells[6]) == pytest.approx(0.7)  # the worst seed
    v = verdict["default"]
    assert v["stuck_max"] == pytest.approx(0.4)
    # time per answer: answers 3-4 at budget 4, 1-2 at budget 2
    assert dict(v["ratio"])[4] == pytest.approx(0.0 / 1.0)
    assert dict(v["ratio"])[2] == pytest.approx((0.1 / 2) / (2.0 / 2))
    line = bench.summary(verdict, budgets=(2, 4)).splitlines()[-1]
    assert line.startswith("| default | 2 | 0 |")
    json.dumps(verdict)  # plain data


def test_stuck_counts_against_the_median_of_an_even_count(load_benchmark):
    # BoTorch's 4 seeds: median (0.2 + 0.3) / 2 = 0.25, stuck above 0.75
    # (the lower middle value, 0.2, would put the limit at 0.6)
    bench = load_benchmark("pbo_regret")
    records = [
        _record("Branin", s, "botorch", r) for s, r in enumerate([0.1, 0.2, 0.3, 0.4])
    ]
    mine = [0.7, 0.76, 0.1, 0.1]
    records += [_record("Branin", s, "default", r) for s, r in enumerate(mine)]
    text, verdict = bench.report(records, "tuning", budgets=(4,))
    assert verdict["default"]["stuck_max"] == pytest.approx(0.25)  # 0.76 only


def test_the_summary_pools_stuck_runs_over_cells_with_mcnemar(load_benchmark):
    bench = load_benchmark("pbo_regret")
    # two cells; BoTorch's median 0.2 in each: stuck above 0.6
    ref = [0.1, 0.1, 0.2, 0.7, 0.8]  # seeds 3, 4 stuck
    mine = {"Branin": [0.9, 0.61, 0.1, 0.1, 0.8], "Levy4": [0.7, 0.1, 0.1, 0.1, 0.1]}
    records = []
    for problem in mine:
        records += [_record(problem, s, "botorch", r) for s, r in enumerate(ref)]
        records += [
            _record(problem, s, "default", r) for s, r in enumerate(mine[problem])
        ]
    _, verdict = bench.report(records, "tuning", budgets=(4,))
    # stuck: mine Branin 0, 1, 4 and Levy4 0 (4); BoTorch 3, 4 in each (4);
    # only mine: Branin 0, 1, Levy4 0 (3); only BoTorch's: Branin 3, Levy4 3, 4
    assert verdict["default"]["pooled"] == {4: [4, 4, 3, 3]}
    line = bench.summary(verdict, budgets=(4,)).splitlines()[-1]
    assert line.endswith("| 4 (4; p 1.000) |")


@pytest.mark.parametrize(
    ("only_mine", "only_ref"), [(13, 34), (37, 43), (0, 5), (2, 2)]
)
def test_mcnemar_matches_scipy_exact_binomial(load_benchmark, only_mine, only_ref):
    stats = pytest.importorskip("scipy.stats")
    bench = load_benchmark("pbo_regret")
    ref = stats.binomtest(only_mine, only_mine + only_ref, 0.5).pvalue
    assert bench.mcnemar(only_mine, only_ref) == pytest.approx(ref, rel=1e-12)


def test_mcnemar_without_discordant_pairs_is_one(load_benchmark):
    assert load_benchmark("pbo_regret").mcnemar(0, 0) == 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_test_matches_scipy_exact_permutation(load_benchmark, seed):
    stats = pytest.importorskip("scipy.stats")

    bench = load_benchmark("pbo_regret")
    d = torch.randn(9, generator=torch.Generator().manual_seed(seed)) + 0.3
    p_worse, p_better = bench.paired_test(d)
    for alternative, p in (("greater", p_worse), ("less", p_better)):
        ref = stats.permutation_test(
            (d.numpy(),),
            lambda x: x.mean(),
            permutation_type="samples",
            alternative=alternative,
            n_resamples=10**6,
        )
        assert p == pytest.approx(ref.pvalue, abs=1e-9)


def test_paired_test_extremes(load_benchmark):
    bench = load_benchmark("pbo_regret")
    p_worse, p_better = bench.paired_test(torch.ones(5))
    assert p_worse == pytest.approx(1 / 32) and p_better == 1.0
    p_worse, p_better = bench.paired_test(-torch.arange(1.0, 11.0))
    assert p_worse == 1.0 and p_better == pytest.approx(1 / 1024)


def test_runs_record_and_the_report_names_the_library_versions(load_benchmark):
    # a loop's path depends on the last bits of its objectives, so the same
    # seeds can end elsewhere under other numpy / scipy / torch releases: each
    # run stores the versions it ran with, and the report lists them per
    # configuration
    bench = load_benchmark("pbo_regret")
    rec = bench.run_one("Branin", 0.1, 0, "default", answers=1)
    assert rec["versions"]["torch"] == torch.__version__
    assert rec["versions"]["numpy"] == np.__version__
    assert set(rec["versions"]) >= {"python", "scipy", "botorch", "gpytorch"}
    assert rec["threads"] == describe()  # and the thread settings
    assert rec["machine"] == environment.machine()  # and the machine
    records = [_record("Branin", s, "botorch", 0.1) for s in range(2)]
    records += [
        dict(
            _record("Branin", s, "default", 0.1),
            versions=rec["versions"],
            threads=rec["threads"],
        )
        for s in range(2)
    ]
    text, _ = bench.report(records, "tuning", budgets=(4,))
    assert f"numpy {np.__version__}" in text and "torch" in text
    assert "| botorch | 2 | not recorded | not recorded | not recorded |" in text
    assert "| default | 2 | " in text and f" | {describe()} |" in text


def test_a_later_store_replaces_an_earlier_ones_runs(load_benchmark, tmp_path):
    # the same problem, σ, seed and configuration in two stores: the report
    # uses the later store's run, in its cells and in its version table
    bench = load_benchmark("pbo_regret")
    paths = [tmp_path / "old.jsonl", tmp_path / "new.jsonl"]
    ref = [_record("Branin", s, "botorch", 0.2) for s in range(3)]
    old = [_record("Branin", s, "default", 0.9) for s in range(3)]
    new = [
        dict(_record("Branin", s, "default", 0.1), versions={"numpy": "9"})
        for s in range(3)
    ]
    for store, recs in zip(paths, [ref + old, new], strict=True):
        store.write_text("".join(json.dumps(r) + "\n" for r in recs))
    argv = ["--seed-set", "tuning", "--budgets", "4", "--report"]
    text = bench.main(argv + ["--store", *map(str, paths), "--output", str(tmp_path)])
    row = [r for r in text.splitlines() if "| 4 | default |" in r][0]
    assert "| 0.1000 ± 0.0000 |" in row
    assert "| default | 3 | not recorded | numpy 9 |" in text
    assert "| default | 3 | not recorded | not recorded |" not in text


def test_the_report_names_its_page_and_keeps_the_hand_written_block(
    load_benchmark, tmp_path
):
    bench = load_benchmark("pbo_regret")
    store = tmp_path / "runs.jsonl"
    recs = [_record("Branin", s, c, 0.1) for s in range(2) for c in ("botorch", "x")]
    store.write_text("".join(json.dumps(r) + "\n" for r in recs))
    page = tmp_path / "mine.md"
    page.write_text("old\n<!-- hand -->\nWhy this rerun.\n<!-- /hand -->\nold\n")
    argv = ["--seed-set", "tuning", "--budgets", "4", "--report", "--name", "mine"]
    text = bench.main(argv + ["--store", str(store), "--output", str(tmp_path)])
    assert page.read_text() == text and (tmp_path / "mine.png").is_file()
    assert "<!-- hand -->\nWhy this rerun.\n<!-- /hand -->" in text
    assert "old" not in text
    assert "Page: `python -m benchmarks pbo_regret --seed-set tuning" in text


def test_the_timing_table_gives_each_runs_seconds_per_answer(load_benchmark):
    bench = load_benchmark("pbo_regret")
    records = [
        dict(_record("Branin", 0, "botorch", 0.1), seconds=[1.0, 2.0, 4.0, 6.0]),
        dict(_record("Branin", 0, "default", 0.1), seconds=[0.5, 1.0, 1.5, 2.0]),
        dict(_record("Levy4", 1, "botorch", 0.1), seconds=[1.0, 2.0, 3.0, 4.0]),
        dict(_record("Levy4", 1, "default", 0.1), seconds=[1.0, 2.0, 2.0, 2.0]),
    ]
    lines = bench.timing_table(records, "tuning", budgets=(2, 4))
    assert lines[0] == (
        "| problem | seed | BoTorch, answers 1-2 | default, 1-2 | ratio "
        "| BoTorch, 3-4 | default, 3-4 | ratio |"
    )
    assert lines[2] == (
        "| Branin | 0 | 1.000 s | 0.500 s | 0.50 | 2.000 s | 0.500 s | 0.25 |"
    )
    assert lines[3] == (
        "| Levy4 | 1 | 1.000 s | 1.000 s | 1.00 | 1.000 s | 0.000 s | 0.00 |"
    )
    assert lines[4] == (
        "| all | | 1.000 s | 0.750 s | 0.75 | 1.500 s | 0.250 s | 0.17 |"
    )
    with pytest.raises(ValueError, match="one configuration; the store has"):
        bench.timing_table(records[:1], "tuning", budgets=(2, 4))
