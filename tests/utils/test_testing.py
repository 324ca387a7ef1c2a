import torch

from prefbo.utils.testing import random_answers


def test_random_answers_are_reproducible_pairs_of_distinct_designs():
    X, comp = random_answers(45)
    X2, comp2 = random_answers(45)
    assert torch.equal(X, X2) and torch.equal(comp, comp2)
    assert X.shape == (8, 3) and comp.shape == (97, 2)  # the trial's seed-45 set
    assert bool((comp[:, 0] != comp[:, 1]).all()) and int(comp.max()) < 8
