import math

import pytest
import torch

from prefbo.datasets import (
    PlantedPopulation,
    Population,
    game_rankings,
    planted_population,
    planted_rankings,
    read_csv,
)
from prefbo.datasets.population import PLATFORMS
from prefbo.exceptions import InputDataError, InputTypeError


def agreement(pop: PlantedPopulation) -> float:
    r"""The share of answers whose winner has the higher true utility."""
    person, winner, loser = pop.answers.unbind(-1)
    u = pop.utilities
    return float((u[person, winner] > u[person, loser]).double().mean())


def thurstone_rate(gap: float, noise_std: float) -> float:
    r"""``P(a ≻ b) = Φ(gap / (√2 · noise_std))``: both utilities read with
    independent ``N(0, noise_std²)`` noise."""
    z = gap / (math.sqrt(2) * noise_std)
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def test_shapes_and_dtypes_at_the_defaults():
    pop = planted_population()
    assert isinstance(pop, PlantedPopulation) and isinstance(pop, Population)
    assert pop.designs.shape == (60, 3) and pop.designs.dtype == torch.float64
    assert pop.answers.shape == (300 * 20, 3) and pop.answers.dtype == torch.long
    assert pop.person_features.shape == (300, 2)
    assert pop.utilities.shape == (300, 60)
    assert pop.tastes.shape == (60, 2)
    assert pop.shared.shape == (60,)
    assert pop.weights.shape == (300, 2)
    assert (pop.num_people, pop.num_items) == (300, 60)
    assert bool(((pop.designs >= 0) & (pop.designs <= 1)).all())
    # answers are grouped by person, 20 each
    assert torch.equal(pop.answers[:, 0], torch.arange(300).repeat_interleave(20))
    with pytest.raises(AttributeError):
        pop.designs = None  # frozen


def test_utilities_are_the_planted_sum_up_to_a_small_residual():
    pop = planted_population(num_people=200, seed=3)
    residual = pop.utilities - pop.shared - pop.weights @ pop.tastes.T
    # residual_scale 0.2: its sd over people and items is near 0.2
    assert 0.1 < float(residual.std()) < 0.3
    free = planted_population(num_people=20, residual_scale=0.0, seed=3)
    torch.testing.assert_close(
        free.utilities, free.shared + free.weights @ free.tastes.T
    )


def test_same_seed_same_population_other_seed_another():
    a, b = (
        planted_population(num_people=30, seed=5),
        planted_population(num_people=30, seed=5),
    )
    for name in ("designs", "answers", "person_features"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    # the smooth draws' matrix products may round differently from one call
    # to the next (seen about once in 24 processes at 300 people, 6e-8)
    for name in ("utilities", "tastes"):
        torch.testing.assert_close(
            getattr(a, name), getattr(b, name), msg=lambda m, name=name: f"{name}: {m}"
        )
    c = planted_population(num_people=30, seed=6)
    assert not torch.equal(a.designs, c.designs)
    assert not torch.equal(a.answers, c.answers)
    assert not torch.allclose(a.shared, c.shared)


def test_each_person_answers_distinct_pairs_of_distinct_items():
    pop = planted_population(num_people=50, num_items=8, answers_per_person=28)
    person, winner, loser = pop.answers.unbind(-1)
    assert bool((winner != loser).all())
    assert int(pop.answers[:, 1:].min()) >= 0 and int(pop.answers[:, 1:].max()) < 8
    pair = torch.minimum(winner, loser) * 8 + torch.maximum(winner, loser)
    for p in range(50):
        # 28 = all pairs of 8 items, each once
        assert pair[person == p].unique().numel() == 28


def test_answers_follow_the_true_utility_about_eighty_percent():
    rates = [agreement(planted_population(seed=s)) for s in range(3)]
    assert all(0.65 < r < 0.95 for r in rates), rates
    assert 0.75 < sum(rates) / 3 < 0.85, rates
    # noiseless answers always follow the utility, louder noise less often
    assert agreement(planted_population(num_people=40, noise_std=0.0)) == 1.0
    loud = agreement(planted_population(noise_std=5.0))
    assert 0.5 < loud < min(rates)


def test_probit_rate_of_one_pair_matches_phi():
    # no tastes and no residual: 4000 people with the same utility g answer
    # the one pair of 2 items; only the answer noise tells them apart
    pop = planted_population(
        num_people=4000,
        num_items=2,
        answers_per_person=1,
        num_tastes=0,
        residual_scale=0.0,
        noise_std=0.5,
        seed=0,
    )
    gap = float(pop.shared[0] - pop.shared[1])  # every person's f(0) - f(1)
    rate = float((pop.answers[:, 1] == 0).double().mean())
    assert 0.1 < rate < 0.9  # a gap of about -0.75: the noise matters
    expected = thurstone_rate(gap, noise_std=0.5)
    assert rate == pytest.approx(expected, abs=4 * math.sqrt(0.25 / 4000))


def test_tastes_have_full_rank_and_features_explain_half_the_weights():
    pop = planted_population(num_people=2000, num_tastes=3, person_feature_dim=2)
    assert torch.linalg.matrix_rank(pop.tastes) == 3
    U, W = pop.person_features, pop.weights
    coef = torch.linalg.lstsq(U, W).solution
    explained = 1 - (W - U @ coef).var(0) / W.var(0)
    assert bool(((explained > 0.4) & (explained < 0.6)).all()), explained
    assert bool(((W.var(0) > 1.8) & (W.var(0) < 2.2)).all())


def test_items_own_effects_join_every_persons_utility_and_nothing_else():
    plain = planted_population(num_people=40, num_items=800, seed=3)
    assert torch.equal(plain.item_effects, torch.zeros(800, dtype=torch.float64))
    pool = planted_population(
        num_people=40, num_items=800, seed=3, item_effect_scale=0.7
    )
    # the same world, each item's utility moved by its own effect for everyone
    # (to rounding: the smooth draws' matrix products may round differently
    # from one call to the next)
    for name in ("designs", "shared", "tastes", "weights", "person_features"):
        torch.testing.assert_close(getattr(pool, name), getattr(plain, name))
    torch.testing.assert_close(
        pool.utilities - plain.utilities, pool.item_effects.expand(40, -1)
    )
    assert abs(float(pool.item_effects.std()) - 0.7) < 0.07  # 800 draws
    assert abs(float(pool.item_effects.mean())) < 0.1
    assert not torch.equal(pool.answers, plain.answers)  # drawn from them


def test_no_tastes_and_no_features_are_allowed():
    pop = planted_population(num_people=5, num_tastes=0, person_feature_dim=0)
    assert pop.tastes.shape == (60, 0) and pop.weights.shape == (5, 0)
    assert pop.person_features.shape == (5, 0)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_people": 0}, InputDataError, "num_people must be an int >= 1"),
        ({"num_items": 1}, InputDataError, "num_items must be an int >= 2"),
        ({"dim": 2.0}, InputTypeError, "dim must be an int >= 1; got float 2.0"),
        ({"num_tastes": -1}, InputDataError, "num_tastes must be an int >= 0"),
        ({"noise_std": -0.1}, InputDataError, "noise_std must be a finite float >= 0"),
        ({"noise_std": "1"}, InputTypeError, "noise_std must be a finite float"),
        ({"residual_scale": math.nan}, InputDataError, "residual_scale must be"),
        ({"item_effect_scale": -1.0}, InputDataError, "item_effect_scale must be"),
        ({"person_feature_dim": True}, InputTypeError, "person_feature_dim must be"),
        ({"seed": None}, InputTypeError, "seed must be an int; got None"),
        (
            {"num_items": 4, "answers_per_person": 7},
            InputDataError,
            r"answers_per_person must be at most the 6 pairs of num_items=4 items "
            r"\(each pair answered once per person\); got answers_per_person=7",
        ),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        planted_population(**kwargs)


def test_rankings_are_every_pair_of_each_persons_ranked_items():
    pop = planted_rankings(num_people=40, num_items=30, items_per_person=6, seed=2)
    assert isinstance(pop, PlantedPopulation)
    assert pop.answers.shape == (40 * 15, 3)
    assert torch.equal(pop.answers[:, 0], torch.arange(40).repeat_interleave(15))
    for p in range(40):
        mine = pop.answers[pop.answers[:, 0] == p, 1:]
        items = mine.unique()
        assert items.numel() == 6  # six distinct items, all 15 of their pairs
        assert len({frozenset(r) for r in mine.tolist()}) == 15
        # one consistent ranking: the best wins 5, the next 4, ..., the last 0
        wins = torch.stack([(mine[:, 0] == i).sum() for i in items])
        assert sorted(wins.tolist()) == [0, 1, 2, 3, 4, 5]
        beaten = {(w, l) for w, l in mine.tolist()}
        order = items[wins.argsort(descending=True)].tolist()
        assert all(
            (order[i], order[j]) in beaten for i in range(6) for j in range(i + 1, 6)
        )


def test_rankings_share_the_world_of_the_pairs_with_the_same_seed():
    world = dict(num_people=30, num_items=50, num_tastes=3, seed=4)
    pairs = planted_population(**world, item_effect_scale=0.5)
    ranks = planted_rankings(**world, item_effect_scale=0.5, items_per_person=8)
    for name in ("designs", "person_features", "shared", "tastes", "weights"):
        torch.testing.assert_close(getattr(ranks, name), getattr(pairs, name))
    torch.testing.assert_close(ranks.utilities, pairs.utilities)
    torch.testing.assert_close(ranks.item_effects, pairs.item_effects)


def test_noiseless_rankings_follow_the_true_utility():
    pop = planted_rankings(num_people=30, items_per_person=12, noise_std=0.0)
    assert agreement(pop) == 1.0
    assert 0.7 < agreement(planted_rankings(num_people=300, seed=1)) < 0.95


def test_ranking_probit_rate_of_one_pair_matches_phi():
    # as for pairs: 4000 people with the same utility rank the 2 items; each
    # reads both utilities once with noise, so P(0 wins) = Φ(gap / (√2 σ))
    pop = planted_rankings(
        num_people=4000,
        num_items=2,
        items_per_person=2,
        num_tastes=0,
        residual_scale=0.0,
        noise_std=0.5,
        seed=0,
    )
    gap = float(pop.shared[0] - pop.shared[1])
    rate = float((pop.answers[:, 1] == 0).double().mean())
    assert 0.1 < rate < 0.9
    expected = thurstone_rate(gap, noise_std=0.5)
    assert rate == pytest.approx(expected, abs=4 * math.sqrt(0.25 / 4000))


def test_ranking_the_middle_of_three_items_matches_a_monte_carlo_of_the_reads():
    # 3 items, everyone the same utility: the share of people ranking item 0
    # second, against a long independent simulation of the three noisy reads
    pop = planted_rankings(
        num_people=6000,
        num_items=3,
        items_per_person=3,
        num_tastes=0,
        residual_scale=0.0,
        noise_std=0.8,
        seed=1,
    )
    wins = torch.zeros(6000, dtype=torch.long)
    wins.index_add_(0, pop.answers[:, 0], (pop.answers[:, 1] == 0).long())
    rate = float((wins == 1).double().mean())  # item 0 beats exactly one
    gen = torch.Generator().manual_seed(99)
    reads = pop.shared + 0.8 * torch.randn(
        400_000, 3, dtype=torch.float64, generator=gen
    )
    middle = (reads[:, 0:1] > reads[:, 1:]).sum(-1) == 1
    assert rate == pytest.approx(
        float(middle.double().mean()), abs=4 * math.sqrt(0.25 / 6000)
    )


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"items_per_person": 1},
            InputDataError,
            "items_per_person must be an int >= 2",
        ),
        ({"items_per_person": 3.0}, InputTypeError, "items_per_person must be an int"),
        (
            {"num_items": 5, "items_per_person": 6},
            InputDataError,
            r"items_per_person must be at most num_items=5 \(each person ranks "
            r"distinct items\); got items_per_person=6",
        ),
        ({"noise_std": -1.0}, InputDataError, "noise_std must be a finite float >= 0"),
        ({"num_people": 0}, InputDataError, "num_people must be an int >= 1"),
        ({"item_effect_scale": -1.0}, InputDataError, "item_effect_scale must be"),
    ],
)
def test_bad_ranking_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        planted_rankings(**kwargs)


def test_game_rankings_are_every_pair_of_each_ranking():
    game = game_rankings()
    assert torch.equal(game.designs, torch.eye(6, dtype=torch.float64))
    assert game.answers.shape == (91 * 15, 3)
    assert game.person_features.shape == (91, 8)
    rows = read_csv("Game.csv")
    for p in (0, 1, 90):
        rank = torch.tensor([int(rows[p][f"ch.{name}"]) for name in PLATFORMS])
        mine = game.answers[game.answers[:, 0] == p]
        assert mine.shape == (15, 3)
        assert bool((rank[mine[:, 1]] < rank[mine[:, 2]]).all())
        pairs = {frozenset(r) for r in mine[:, 1:].tolist()}
        assert len(pairs) == 15
        own = [float(rows[p][f"own.{name}"]) for name in PLATFORMS]
        assert game.person_features[p, :6].tolist() == own
    # the first student (row 1 of the file) ranks PlayStation first: it wins
    # all 5 of its pairs
    first = game.answers[game.answers[:, 0] == 0]
    assert int((first[:, 1] == 1).sum()) == 5
    age_hours = game.person_features[:, 6:]
    torch.testing.assert_close(age_hours.mean(0), torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(age_hours.std(0), torch.ones(2, dtype=torch.float64))


def test_game_rankings_refuse_a_rank_that_is_not_a_permutation(tmp_path, monkeypatch):
    rows = read_csv("Game.csv")[:2]
    rows[1]["ch.PC"] = rows[1]["ch.Xbox"]
    header = list(rows[0])
    with (tmp_path / "Game.csv").open("w") as f:
        f.write(",".join(f'"{h}"' if h == "" else h for h in header) + "\n")
        for r in rows:
            f.write(",".join(r[h] for h in header) + "\n")
    monkeypatch.setenv("PREFBO_DATA", str(tmp_path))
    with pytest.raises(InputDataError, match=r"rows \[1\] are not"):
        game_rankings()
