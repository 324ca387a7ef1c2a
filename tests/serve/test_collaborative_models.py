import logging

import pytest
import torch

from prefbo.loop.study_collaborative import NUM_INDUCING, fit_seed
from prefbo.serve import collaborative_models as built
from prefbo.serve.answered import Told

BOX = [
    {"name": "x", "type": "continuous", "lower": 0.0, "upper": 1.0},
    {"name": "y", "type": "continuous", "lower": 0.0, "upper": 1.0},
]


@pytest.fixture
def config(make_config):
    return make_config(space=BOX, model={"kind": "collaborative"}, seed=5)


def answers(people=4, each=3):
    r"""``each`` answers of each of ``people`` participants: the option
    nearer (0.7, 0.3) wins."""
    g = torch.Generator().manual_seed(0)
    best = torch.tensor([0.7, 0.3], dtype=torch.float64)
    data = {}
    for pid in range(people):
        told = []
        for i in range(each):
            X = torch.rand(2, 2, generator=g, dtype=torch.float64)
            win = int(((X - best) ** 2).sum(-1).argmin())
            told.append(Told((f"{pid}-{i}", float(i)), X[win], X[1 - win], None))
        data[10 + pid] = told
    return data


def test_the_prior_model_is_no_one_at_the_prior(config):
    model = built.prior_model(config)
    assert model.num_people == 0 and model.answers.rows.shape == (0, 3)
    Z = config.space.sample(NUM_INDUCING, seed=fit_seed(config.seed, 0)).double()
    assert torch.equal(model.shared.Z, Z) and torch.equal(model.designs, Z)
    assert abs(float(model.shared.kl().detach())) < 1e-12
    assert model.num_items == 0


def test_a_build_at_a_saved_shared_part_makes_only_the_people(config):
    data = answers()
    model, persons = built.build_model(config, data, 12)
    assert persons == {10: 0, 11: 1, 12: 2, 13: 3}
    assert model.answers.counts().tolist() == [3, 3, 3, 3]
    state = built.shared_state(model)
    assert state and all(k.startswith(built.SAVED_PREFIXES) for k in state)
    again, _ = built.build_model(config, data, 12, state)
    for k, v in state.items():
        assert torch.equal(again.state_dict()[k], v)
    torch.testing.assert_close(again.latent_mean, model.latent_mean, atol=1e-6, rtol=0)


def test_a_saved_part_that_does_not_fit_is_logged_and_a_fit_made(config, caplog):
    data = answers()
    state = built.shared_state(built.build_model(config, data, 12)[0])
    state[built.SHARED + "mean"] = state[built.SHARED + "mean"][:, :3]
    with caplog.at_level(logging.WARNING, logger="prefbo.serve"):
        model, _ = built.build_model(config, data, 12, state)
    assert "does not fit" in caplog.text
    assert model.shared.mean.shape[-1] == NUM_INDUCING
    assert float(model.shared.kl().detach()) > 0  # fitted, not the prior
