"""``benchmarks/collaborative_heldout.py``: folds, the protocol, a tiny run."""

from __future__ import annotations

import json

import pytest
import torch

from prefbo.datasets import game_rankings, planted_population, planted_rankings

BASELINES = ["per_person", "pooled", "population"]


def test_game_folds_hold_every_student_out_once(load_benchmark):
    bench = load_benchmark("collaborative_heldout")
    folds = bench.game_folds()
    game = game_rankings()
    held = [p.person for f in folds for p in f.held]
    assert sorted(held) == list(range(91))
    for fold in folds:
        assert fold.num_people + len(fold.held) == 91
        assert fold.answers.shape == (15 * fold.num_people, 3)
        assert fold.answers[:, 0].unique().tolist() == list(range(fold.num_people))
        for p in fold.held:
            assert torch.equal(
                p.answers, game.answers[game.answers[:, 0] == p.person, 1:]
            )
        # the training and held-out students' features are everyone's, once
        everyone = torch.cat(
            [fold.features, torch.stack([p.features for p in fold.held])]
        )
        assert sorted(map(tuple, everyone.tolist())) == sorted(
            map(tuple, game.person_features.tolist())
        )


def test_synthetic_split_is_one_world(load_benchmark):
    bench = load_benchmark("collaborative_heldout")
    (fold,) = bench.synthetic_folds()
    pop = planted_population(num_people=360, seed=bench.SYNTHETIC_SEED)
    assert fold.num_people == 300 and [p.person for p in fold.held] == list(
        range(300, 360)
    )
    torch.testing.assert_close(fold.answers, pop.answers[: 300 * 20])
    last = fold.held[-1]
    torch.testing.assert_close(last.utilities, pop.utilities[359])
    torch.testing.assert_close(last.features, pop.person_features[359])


def test_accuracy_counts_a_tie_as_half(load_benchmark):
    bench = load_benchmark("collaborative_heldout")
    mean = torch.tensor([0.0, 1.0, 1.0, 2.0], dtype=torch.float64)
    answers = torch.tensor([[1, 0], [0, 3], [1, 2], [3, 2]])
    assert bench.accuracy(mean, answers) == pytest.approx((1 + 0 + 0.5 + 1) / 4)
    truth = bench.true_answers(mean, answers)
    assert truth.tolist() == [[1, 0], [3, 0], [1, 2], [3, 2]]


def test_revealed_answers_are_nested_and_the_rest_is_predicted(
    load_benchmark, monkeypatch
):
    bench = load_benchmark("collaborative_heldout")
    calls = []

    def spy(fold, options):
        def predict(features, revealed):
            calls.append(revealed)
            return torch.zeros(len(fold.designs), dtype=torch.float64)

        return predict, {}

    monkeypatch.setitem(bench.MODELS, "spy", spy)
    fold = bench.game_folds(quick=True)[0]
    options = bench.parse_args(["--quick", "--ks", "0", "3", "5", "10", "15"])
    records = []
    bench.run_fold(fold, "spy", options, records.append)
    person = fold.held[0]
    mine = calls[:4]  # k = 15 leaves nothing to predict: skipped
    assert [len(r) for r in mine] == [0, 3, 5, 10]
    assert torch.equal(mine[3][:5], mine[2]) and torch.equal(mine[2][:3], mine[1])
    order = torch.randperm(
        15, generator=torch.Generator().manual_seed(bench.reveal_seed(person.person))
    )
    assert torch.equal(mine[3], person.answers[order[:10]])
    rows = [r for r in records if r["kind"] == "person"]
    assert [r["tested"] for r in rows[:4]] == [15, 12, 10, 5]
    assert all(r["accuracy"] == 0.5 for r in rows)  # all ties


def test_paired_difference_and_wilcoxon(load_benchmark):
    bench = load_benchmark("collaborative_heldout")
    a = {0: 1.0, 1: 0.9, 2: 0.8, 3: 0.5}
    b = {0: 0.5, 1: 0.5, 2: 0.5, 9: 0.0}  # person 3 and 9: one side only
    mean, se, p, n = bench.paired(a, b)
    assert n == 3 and mean == pytest.approx(0.4)
    assert se == pytest.approx(0.1 / 3**0.5)
    assert p == pytest.approx(0.25)  # 3 positive differences: 2 / 2**3
    assert bench.paired(a, a)[2:] == (1.0, 4)


def test_quick_run_of_the_baselines_and_its_report(load_benchmark, tmp_path, capsys):
    bench = load_benchmark("collaborative_heldout")
    store, out = tmp_path / "runs.jsonl", tmp_path / "page.md"
    argv = ["--quick", "--models", *BASELINES, "--store", str(store)]
    text = bench.main([*argv, "--output", str(out)])
    assert out.read_text() == text
    records = [json.loads(line) for line in store.read_text().splitlines()]
    people = [r for r in records if r["kind"] == "person"]
    # game: 3 held-out students, synthetic, pool and ranked: 4 people; 4 k,
    # 3 models
    assert len(people) == (3 + 4 + 4 + 4) * 4 * 3
    assert {r["model"] for r in people} == set(BASELINES)
    assert all(0 <= r["accuracy"] <= 1 and r["seconds"] >= 0 for r in people)
    assert all(
        r["accuracy"] == 0.5
        for r in people
        if r["model"] == "per_person" and r["k"] == 0
    )
    assert all(("accuracy_true" in r) == (r["dataset"] != "game") for r in people)
    (run,) = [r for r in records if r["kind"] == "run"]
    assert run["threads"].startswith("torch threads ")
    assert "botorch" in run["machine"] and "Python" in run["machine"]
    assert "### game" in text and "### synthetic" in text
    assert "(no collaborative records in the store)" in text
    assert "| synthetic | population | 1 |" in text
    # the page again from the store alone
    again = tmp_path / "again.md"
    assert (
        bench.main(["--report", "--store", str(store), "--output", str(again)]) == text
    )
    assert "mean accuracy" in capsys.readouterr().out


def test_quick_run_of_the_collaborative_model(load_benchmark, tmp_path):
    pytest.importorskip("prefbo.models.collaborative")
    bench = load_benchmark("collaborative_heldout")
    argv = ["--quick", "--models", "collaborative", "per_person", "--ks", "0", "3"]
    text = bench.main([*argv, "--output", str(tmp_path / "page.md")])
    assert "| game | 3 | per_person |" in text
    assert "| synthetic | 0 | per_person |" in text


def test_page_pairs_the_collaborative_model_with_each_other(load_benchmark):
    bench = load_benchmark("collaborative_heldout")
    records = [
        {"kind": "person", "dataset": "game", "fold": 0, "person": p, "k": 3}
        | {"model": m, "accuracy": acc, "tested": 12, "seconds": 0.5}
        for p in range(4)
        for m, acc in (("collaborative", 0.75 + 0.05 * p), ("pooled", 0.5))
    ]
    records.append(
        {"kind": "fit", "dataset": "game", "fold": 0, "model": "pooled", "seconds": 2.0}
    )
    text = bench.page(records)
    # differences 0.25, 0.30, 0.35, 0.40: mean 0.325, s.e. 0.0323; all 4
    # positive: exact two-sided p = 2 / 2**4
    assert "| game | 3 | pooled | +0.325 ± 0.032 | 0.12 | 4 |" in text
    assert "| game | pooled | 1 | 2.00 | 4 | 0.500 | 4 |" in text
    assert "(no finished run in the store)" in text


def test_run_line_gives_the_runner_command_and_says_where_a_copied_store_ran(
    load_benchmark, tmp_path
):
    bench = load_benchmark("collaborative_heldout")
    settings = {"ks": [0, 3], "models": ["pooled"], "datasets": ["game"]}
    settings |= {"quick": False, "population_max_latents": 1200, "tastes": 3}
    run = {"kind": "run", "threads": "torch threads 2", "seconds": 700.0}
    run |= {"machine": "x86_64, 2 CPUs; Python 3.11.7", "load": [2.0, None]}
    run |= {"settings": settings}
    scratch = ["--store", "/tmp/lead/runs.jsonl", "--output", "/tmp/lead/p.md"]
    published = bench.RESULTS / "collaborative_heldout.jsonl"
    line = bench.run_line(run | {"argv": ["--ks", "0", "3", *scratch]}, published)
    assert line.startswith(
        "- `python -m benchmarks collaborative_heldout --ks 0 3 --store "
        "/tmp/lead/runs.jsonl --output /tmp/lead/p.md`: 700 s; data game;"
    )
    assert "load average 2.00 at the start, not recorded at the end." in line
    assert line.endswith(
        "This run wrote to a scratch path (`/tmp/lead/runs.jsonl`); its store "
        "was then copied to `benchmarks/results/collaborative_heldout.jsonl`. "
        "The same run in place: `python -m benchmarks collaborative_heldout --ks "
        "0 3 --store benchmarks/results/collaborative_heldout.jsonl`; this page "
        "again from the store alone: `python -m benchmarks collaborative_heldout "
        "--report --store benchmarks/results/collaborative_heldout.jsonl`."
    )
    # a page written elsewhere names its output in both commands
    elsewhere = bench.run_line(
        run | {"argv": [*scratch]}, published, tmp_path / "page.md"
    )
    assert elsewhere.endswith(
        "`python -m benchmarks collaborative_heldout --report --store "
        f"benchmarks/results/collaborative_heldout.jsonl --output {tmp_path}/page.md`."
    )
    # a run made in the store the page is written from: its command alone
    here = run | {"argv": ["--store=" + str(published)]}
    assert bench.run_line(here, published).endswith("at the end.")
    assert bench.run_line(here).endswith("at the end.")


def test_features_only_recovers_utilities_linear_in_the_features(load_benchmark):
    # four items whose utility is a_i + c_i u_p, every pair answered by the
    # truth: the ridge fit orders a newcomer's items as their true utility
    bench = load_benchmark("collaborative_heldout")
    a = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    c = torch.tensor([3.0, 1.0, -1.0, -3.0], dtype=torch.float64)
    features = torch.linspace(-1, 1, 9, dtype=torch.float64).unsqueeze(-1)
    i, j = torch.triu_indices(4, 4, offset=1)
    rows = []
    for p, u in enumerate(features[:, 0].tolist()):
        f = a + c * u
        win = torch.where(f[i] > f[j], i, j)
        rows.append(torch.stack([torch.full_like(i, p), win, i + j - win], -1))
    fold = bench.Fold(
        "toy", 0, torch.eye(4, dtype=torch.float64), torch.cat(rows), features, ()
    )
    predict, _ = bench.fit_features_only(fold, None)
    for u in (-0.8, 0.3, 0.9):
        mean = predict(torch.tensor([u], dtype=torch.float64), torch.zeros(0, 2))
        assert torch.equal(mean.argsort(), (a + c * u).argsort())


def test_open_pairs_are_those_transitivity_leaves_open(load_benchmark):
    bench = load_benchmark("collaborative_heldout")
    revealed = torch.tensor([[0, 1], [1, 2], [4, 3]])  # 0 > 1 > 2, 4 > 3
    tested = torch.tensor([[0, 2], [2, 0], [0, 3], [3, 4], [2, 4], [1, 0]])
    got = bench.open_pairs(revealed, tested, 5)
    assert got.tolist() == [False, False, True, False, True, False]


def test_the_ranking_prior_runs_where_it_can_enumerate_the_rankings(
    load_benchmark, tmp_path, capsys
):
    bench = load_benchmark("collaborative_heldout")
    store = tmp_path / "runs.jsonl"
    argv = ["--quick", "--models", "ranking_prior", "--ks", "0", "3"]
    text = bench.main([*argv, "--store", str(store), "--output", str(tmp_path / "p")])
    records = [json.loads(line) for line in store.read_text().splitlines()]
    people = [r for r in records if r["kind"] == "person"]
    assert {r["dataset"] for r in people} == {"game"}  # the others: 12 items
    assert len(people) == 3 * 2
    (fit,) = [r for r in records if r["kind"] == "fit"]
    assert fit["theta"] in bench.choose_theta.__defaults__[0]
    assert "| ranking_prior |" in text and "### synthetic" not in text
    assert "synthetic: ranking_prior left out (12 items)" in capsys.readouterr().out


def test_the_pool_is_the_planted_world_with_items_own_effects(load_benchmark):
    bench = load_benchmark("collaborative_heldout")
    (fold,) = bench.pool_folds()
    pop = planted_population(
        num_people=360,
        num_items=bench.POOL_ITEMS,
        item_effect_scale=bench.POOL_ITEM_EFFECT,
        seed=bench.POOL_SEED,
    )
    assert fold.dataset == "pool" and fold.num_people == 300 and len(fold.held) == 60
    assert bool(pop.item_effects.abs().gt(0).all())
    torch.testing.assert_close(fold.answers, pop.answers[: 300 * 20])
    torch.testing.assert_close(fold.held[-1].utilities, pop.utilities[359])


def test_the_ranked_world_is_each_persons_ranking_of_a_few_pool_items(
    load_benchmark,
):
    bench = load_benchmark("collaborative_heldout")
    (fold,) = bench.ranked_folds()
    pop = planted_rankings(
        num_people=250,
        num_items=100,
        items_per_person=10,
        item_effect_scale=bench.POOL_ITEM_EFFECT,
        seed=bench.RANKED_SEED,
    )
    assert fold.dataset == "ranked" and fold.num_people == 200 and len(fold.held) == 50
    assert fold.designs.shape == (100, 3) and bool(pop.item_effects.abs().gt(0).all())
    torch.testing.assert_close(fold.answers, pop.answers[: 200 * 45])
    assert all(h.answers.shape == (45, 2) for h in fold.held)
    torch.testing.assert_close(fold.held[-1].utilities, pop.utilities[249])
    # test pairs at k = 10: 35 a person, the ones transitivity leaves open
    # among them are what the models can differ on
    order = torch.randperm(
        45, generator=torch.Generator().manual_seed(bench.reveal_seed(200))
    )
    answers = fold.held[0].answers
    left = bench.open_pairs(answers[order[:10]], answers[order[10:]], 100)
    assert 0 < int(left.sum()) < 35


def test_quick_run_of_the_collaborative_model_with_and_without_item_effects(
    load_benchmark, tmp_path
):
    pytest.importorskip("prefbo.models.collaborative")
    bench = load_benchmark("collaborative_heldout")
    store = tmp_path / "runs.jsonl"
    models = ["collaborative_items", "collaborative_no_items"]
    argv = ["--quick", "--datasets", "pool", "--models", *models]
    bench.main(
        [
            *argv,
            "--ks",
            "0",
            "3",
            "--store",
            str(store),
            "--output",
            str(tmp_path / "p"),
        ]
    )
    records = [json.loads(x) for x in store.read_text().splitlines()]
    people = [r for r in records if r["kind"] == "person"]
    assert len(people) == 2 * 4 * 2 and all("accuracy_true" in r for r in people)
    items = {r["model"]: r["items"] for r in records if r["kind"] == "fit"}
    assert items == {"collaborative_items": 12, "collaborative_no_items": 0}
