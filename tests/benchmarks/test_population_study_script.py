"""``benchmarks/population_study.py``: its simulated population and metrics."""

from __future__ import annotations

import torch


def test_the_population_utility_is_standardised_and_deviations_have_their_sd(
    load_benchmark,
):
    bench = load_benchmark("population_study")
    pop = bench.Population()
    U = torch.rand(
        20_000, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    g = pop.g(U)
    assert abs(g.mean().item()) < 0.03 and abs(g.std().item() - 1) < 0.03
    # the random-Fourier-feature deviations: sd DEVIATION_SD across people
    h = torch.stack([pop.participant(0, p).h(U[:500]) for p in range(40)])
    assert abs(h.std().item() - bench.DEVIATION_SD) < 0.1 * bench.DEVIATION_SD
    u = pop.participant(0, 0)
    x = pop.grid[u(pop.grid).argmax()]
    assert (
        u.regret(x) == 0.0
        and u.regret(torch.tensor([0.0, 1.0], dtype=torch.float64)) > 0.5
    )


def test_answers_needed_counts_from_the_first_answer(load_benchmark):
    bench = load_benchmark("population_study")
    assert bench._needed([None, 0.5, 0.2, 0.05, 0.01], 0.1) == 3
    assert bench._needed([0.0, 0.5, 0.4], 0.1) == 3  # never within: len


def test_a_model_kind_has_its_own_store_and_page(load_benchmark, tmp_path):
    bench = load_benchmark("population_study")
    default = bench.parse_args(["--output", str(tmp_path)])
    assert (
        default.model == "ep" and default.store == tmp_path / "population_study.jsonl"
    )
    other = bench.parse_args(["--output", str(tmp_path), "--model", "collaborative"])
    assert other.store == tmp_path / "population_study_collaborative.jsonl"
    assert 3 in bench.KS  # the newcomer's regret after 3 answers is tabled
