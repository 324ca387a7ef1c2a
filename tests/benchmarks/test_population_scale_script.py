"""``benchmarks/population_scale.py``: its simulated people and a tiny run."""

from __future__ import annotations

import torch


def test_each_answer_is_one_person_s_and_mostly_follows_their_utility(load_benchmark):
    bench = load_benchmark("population_scale")
    X, who, comps = bench.simulate(30, 10, 20, seed=1)
    assert X.shape == (300, 2) and who.shape == (300,)
    assert bool((who[comps[:, 0]] == who[comps[:, 1]]).all())
    assert bool((comps[:, 0] != comps[:, 1]).all())
    # the shared bump orders far-apart designs the same way for nearly everyone
    far = ((X[comps[:, 0]] - bench.PEAK).norm(dim=-1) < 0.2) & (
        (X[comps[:, 1]] - bench.PEAK).norm(dim=-1) > 0.6
    )
    assert int(far.sum()) > 0
    reversed_ = ((X[comps[:, 1]] - bench.PEAK).norm(dim=-1) < 0.2) & (
        (X[comps[:, 0]] - bench.PEAK).norm(dim=-1) > 0.6
    )
    assert int(reversed_.sum()) < 0.2 * int(far.sum())


def test_quick_run_prints_both_models(load_benchmark, capsys):
    bench = load_benchmark("population_scale")
    torch.manual_seed(0)
    bench.main(["--quick"])
    machine, threads, versions, *rows = capsys.readouterr().out.strip().splitlines()
    assert machine.startswith("- machine: ") and versions.startswith("- versions: ")
    assert threads.startswith("- threads: torch threads ")
    assert rows[0].startswith("participants")
    assert [r.split()[0] for r in rows[1:]] == ["5", "20"]
