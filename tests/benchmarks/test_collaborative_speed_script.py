"""``benchmarks/collaborative_speed.py``: the people it draws, the simulated
answers, the page, a tiny run."""

from __future__ import annotations

import json
import math

import pytest
import torch

from prefbo.datasets import planted_population


def test_scale_population_draws_people_of_the_planted_world(
    load_benchmark, monkeypatch
):
    bench = load_benchmark("collaborative_speed")
    monkeypatch.setattr(bench, "CHUNK", 10)  # three chunks, the last short
    data = bench.scale_population(25, seed=3, truth=True)
    world = planted_population(num_people=1, answers_per_person=10, seed=3)
    torch.testing.assert_close(data["designs"], world.designs)
    answers = data["answers"]
    assert answers.shape == (250, 3) and answers.dtype == torch.long
    assert answers[:, 0].tolist() == [p for p in range(25) for _ in range(10)]
    assert data["person_features"].shape == (25, 2)
    assert data["utilities"].shape == (25, 60)
    for p in range(25):
        pairs = answers[answers[:, 0] == p, 1:].sort(-1).values
        assert (pairs[:, 0] != pairs[:, 1]).all()
        assert len(set(map(tuple, pairs.tolist()))) == 10  # distinct pairs
    again = bench.scale_population(25, seed=3)
    assert torch.equal(again["answers"], answers) and "utilities" not in again


def test_scale_population_answers_follow_the_utility_with_probit_noise(
    load_benchmark, monkeypatch
):
    bench = load_benchmark("collaborative_speed")
    data = bench.scale_population(400, truth=True)
    f, a = data["utilities"], data["answers"]
    gap = f[a[:, 0], a[:, 1]] - f[a[:, 0], a[:, 2]]  # winner − loser
    # each answer agrees with the utility with probability Φ(|gap| / (√2 σ))
    expected = torch.special.ndtr(gap.abs() / (math.sqrt(2) * bench.NOISE_STD))
    agree = (gap > 0).double()
    se = (expected * (1 - expected)).sum().sqrt() / len(gap)
    assert abs(agree.mean() - expected.mean()) < 4 * se
    monkeypatch.setattr(bench, "NOISE_STD", 0.0)
    exact = bench.scale_population(50, truth=True)
    f, a = exact["utilities"], exact["answers"]
    assert (f[a[:, 0], a[:, 1]] >= f[a[:, 0], a[:, 2]]).all()


def test_simulated_answer_is_a_probit_choice(load_benchmark):
    bench = load_benchmark("collaborative_speed")
    g = torch.Generator().manual_seed(0)
    # utilities 1.25 √2 apart: the better one wins with probability Φ(1)
    f = torch.tensor([0.0, bench.NOISE_STD * math.sqrt(2), 0.0], dtype=torch.float64)
    wins = sum(bench.simulate_answer(f, 0, 1, g) == (1, 0) for _ in range(4000))
    assert abs(wins / 4000 - 0.8413) < 0.025
    answers = {bench.simulate_answer(f, 2, 1, g) for _ in range(50)}
    assert answers <= {(1, 2), (2, 1)}


def test_quantile_interpolates_as_torch_does(load_benchmark):
    bench = load_benchmark("collaborative_speed")
    values = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0]
    for q in (0.0, 0.5, 0.95, 0.99, 1.0):
        expected = torch.quantile(torch.tensor(values, dtype=torch.float64), q)
        assert bench.quantile(values, q) == pytest.approx(float(expected))


def test_thread_settings_remove_the_user_variables(load_benchmark, monkeypatch):
    bench = load_benchmark("collaborative_speed")
    for name, value in (
        ("OMP_NUM_THREADS", "4"),
        ("MKL_NUM_THREADS", "2"),
        ("PREFBO_THREADS", "off"),
    ):
        monkeypatch.setenv(name, value)
    user, omp1 = bench.thread_environment("user"), bench.thread_environment("omp1")
    assert not set(bench.THREAD_VARIABLES) & set(user)
    assert omp1["OMP_NUM_THREADS"] == "1"
    assert "MKL_NUM_THREADS" not in omp1 and "PREFBO_THREADS" not in omp1
    assert user["PATH"] == omp1["PATH"]


def test_waiting_people_reveal_i_mod_11_answers(load_benchmark):
    from prefbo.models.collaborative import CollaborativePreferenceGP

    bench = load_benchmark("collaborative_speed")
    pop = bench.population(5)
    answers, features = bench.participants(pop, 5)
    assert answers[:, 0].max() == 4 and features.shape == (5, 2)
    model = CollaborativePreferenceGP(
        pop.designs, answers, num_people=5, person_features=features
    )
    ids = bench.waiting_people(model, pop, 5)
    assert ids.tolist() == list(range(5, 105))
    counts = model.answers.counts()[ids]
    assert counts.tolist() == [i % 11 for i in range(100)]
    torch.testing.assert_close(model.person_features[104], pop.person_features[104])
    # person 5 + 10 revealed their first 10 answers, in order
    rows = model.answers.rows
    mine = rows[rows[:, 0] == 15, 1:]
    torch.testing.assert_close(mine, pop.answers[pop.answers[:, 0] == 15, 1:])


def test_quick_run_and_its_report(load_benchmark, tmp_path, capfd):
    bench = load_benchmark("collaborative_speed")
    store, out = tmp_path / "runs.jsonl", tmp_path / "page.md"
    argv = ["--quick", "--settings", "user", "--events", "30", "--repeats", "3"]
    argv += ["--fit-people", "300", "--store", str(store), "--output", str(out)]
    text = bench.main(argv)
    assert out.read_text() == text
    records = [json.loads(line) for line in store.read_text().splitlines()]
    kinds = [r["kind"] for r in records]
    assert kinds.count("batch") == 4 and kinds[-1] == "run"
    (fit,) = [r for r in records if r["kind"] == "model_fit"]
    assert (fit["people"], fit["answers"], fit["steps"]) == (50, 500, 20)
    (lat,) = [r for r in records if r["kind"] == "latency"]
    assert len(lat["ms"]) == len(lat["observe_ms"]) == 30
    assert all(
        t >= o + q - 1e-9
        for t, o, q in zip(lat["ms"], lat["observe_ms"], lat["question_ms"])
    )
    for r in records[:-1]:
        assert r["setting"] == "user"
        assert "OMP_NUM_THREADS unset, MKL_NUM_THREADS unset" in r["threads"]
    batches = [r for r in records if r["kind"] == "batch"]
    assert {(r["candidates"], r["strategy"]) for r in batches} == {
        (c, s) for c in ("60 items", "128 random") for s in ("eubo", "thompson")
    }
    assert all(len(r["ms"]) == 3 and r["waiting"] == 100 for r in batches)
    assert batches[0]["newcomers"] == 10
    (scale,) = [r for r in records if r["kind"] == "scale_fit"]
    assert (scale["people"], scale["answers"], scale["steps"]) == (300, 3000, 20)
    assert scale["rss_mb"] >= scale["rss_data_mb"] >= scale["rss_start_mb"] > 0
    (planted,) = [r for r in records if r["kind"] == "planted"]
    assert planted["people"] == 300
    assert "| user | 50 | 20 |" in text
    assert "| user | 60 items | eubo |" in text
    assert "| 300 | 3,000 | 20 |" in text
    assert "x86_64" in text or "CPUs" in text
    again = tmp_path / "again.md"
    assert bench.main(["--report", "--store", str(store), "--output", str(again)]) == (
        text
    )
    assert "latency: p50" in capfd.readouterr().out  # the subprocess's


def test_page_of_made_up_records(load_benchmark):
    bench = load_benchmark("collaborative_speed")
    stamp = {"argv": ["--parts", "latency"], "machine": "m", "quick": False}
    stamp |= {"setting": "user", "threads": "torch threads 2", "load": 1.5}
    ms = [float(i) for i in range(1, 101)]
    records = [
        {"kind": "model_fit", "people": 1000, "answers": 10000, "steps": 300}
        | {"seconds": 20.0}
        | stamp,
        {"kind": "latency", "people": 1000, "events": 100, "ms": [0.0] * 100}
        | {"observe_ms": ms, "question_ms": ms}
        | stamp,
        # a later record of the same setting replaces the first
        {"kind": "latency", "people": 1000, "events": 100, "ms": ms}
        | {"observe_ms": ms, "question_ms": ms}
        | stamp,
        {"kind": "batch", "candidates": "60 items", "strategy": "eubo"}
        | {"waiting": 100, "newcomers": 10, "ms": [50.0] * 50}
        | stamp,
        {"kind": "scale_fit", "people": 100000, "answers": 1000000, "steps": 4880}
        | {"generate_s": 1.5, "build_s": 0.1, "fit_s": 400.0, "rss_start_mb": 300}
        | {"rss_data_mb": 400.0, "rss_mb": 1200.0}
        | stamp,
    ]
    text = bench.page(records)
    # p50 50.5, p95 95.05, p99 99.01, max 100
    assert (
        "| user | 1000 | 300 | 20.0 | 100 | 50.50 | 95.05 | 99.01 | 20 | 100 | "
        "50.50 | 50.50 |" in text
    )
    assert "| user | 60 items | eubo | 50.00 | 50.00 | 2,000 | 1,000 |" in text
    assert (
        "| 100,000 | 1,000,000 | 4880 | 400.0 | 600 | 1200 | 2048 | 400 | 1.50 |"
        in (text)
    )
    assert "(no finished run in the store)" in text
    assert "Load average (1 min) as the records were written: 1.50 to 1.50" in text
