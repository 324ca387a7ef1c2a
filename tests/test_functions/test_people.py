import math

import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.test_functions import (
    BasePerson,
    Branin,
    IndifferentPerson,
    LogitPerson,
    ParetoPerson,
    SimulatedPerson,
)


def _linear_utility(X):
    return X[..., 0] - 0.5 * X[..., 1]


@pytest.mark.parametrize("noise_std", [0.1, 0.5])
def test_answer_frequencies_match_probit(noise_std):
    person = SimulatedPerson(_linear_utility, noise_std=noise_std, seed=3)
    # a few questions with utility gaps spanning likely to unlikely answers
    x1 = torch.tensor([[0.50, 0.0], [0.60, 0.0], [0.40, 0.0], [0.0, 0.0], [0.3, 0.2]])
    x2 = torch.tensor([[0.45, 0.0], [0.40, 0.0], [0.60, 0.0], [0.0, 0.0], [0.2, 0.2]])
    X = torch.stack([x1, x2], dim=-2).double()  # 5 x 2 x 2
    reps = 4000
    answers = torch.stack([person.compare_batch(X) for _ in range(reps)])  # reps x 5
    assert answers.dtype == torch.long and set(answers.unique().tolist()) <= {0, 1}
    freq_first = (answers == 0).double().mean(0)
    diff = _linear_utility(x1.double()) - _linear_utility(x2.double())
    expected = torch.special.ndtr(diff / (math.sqrt(2) * noise_std))
    # 5 binomial standard errors, plus a floor for p near 0 or 1
    tol = 5 * torch.sqrt(expected * (1 - expected) / reps) + 1e-3
    assert ((freq_first - expected).abs() <= tol).all(), (freq_first, expected)
    assert person.num_answers == 5 * reps


def test_noiseless_person_picks_higher_utility():
    problem = Branin()
    person = SimulatedPerson(problem, noise_std=0.0, seed=0)
    X = torch.rand(500, 2, 2, dtype=torch.float64)
    u = problem(X)
    expected = (u[:, 1] > u[:, 0]).long()
    assert torch.equal(person.compare_batch(X), expected)
    for i in range(20):
        assert person.compare(X[i, 0], X[i, 1]) == int(expected[i])


def test_noiseless_tie_goes_to_first_option():
    person = SimulatedPerson(_linear_utility, noise_std=0.0)
    x = torch.tensor([0.3, 0.3], dtype=torch.float64)
    assert person.compare(x, x.clone()) == 0


def test_same_seed_same_answers():
    X = torch.rand(200, 2, 2, dtype=torch.float64)
    answers = []
    for _ in range(2):
        person = SimulatedPerson(Branin(), noise_std=0.3, seed=7)
        batch = person.compare_batch(X)
        single = [person.compare(X[i, 0], X[i, 1]) for i in range(10)]
        answers.append((batch, single))
    assert torch.equal(answers[0][0], answers[1][0])
    assert answers[0][1] == answers[1][1]
    other = SimulatedPerson(Branin(), noise_std=0.3, seed=8).compare_batch(X)
    assert not torch.equal(other, answers[0][0])


def test_person_does_not_touch_global_rng():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    SimulatedPerson(Branin(), noise_std=0.2).compare_batch(torch.rand(4, 2, 2))
    torch.manual_seed(123)
    assert torch.equal(torch.rand(3), expected)


def test_person_validates_arguments():
    with pytest.raises(
        InputDataError,
        match="noise_std must be a finite float >= 0; got noise_std=-0.1",
    ):
        SimulatedPerson(Branin(), noise_std=-0.1)
    with pytest.raises(InputTypeError, match="utility must be callable"):
        SimulatedPerson(3.0)
    person = SimulatedPerson(Branin())
    with pytest.raises(InputDataError, match=r"X must have shape batch_shape x 2 x d"):
        person.compare_batch(torch.rand(4, 3, 2, dtype=torch.float64))
    with pytest.raises(InputDataError, match="X must have d=2 features"):
        person.compare_batch(torch.rand(4, 2, 3, dtype=torch.float64))
    with pytest.raises(InputDataError, match="x1 must be a 1-d tensor"):
        person.compare(torch.rand(1, 2), torch.rand(2))
    with pytest.raises(InputTypeError, match="noise_std must be a finite float >= 0"):
        SimulatedPerson(Branin(), noise_std="0.1")
    with pytest.raises(InputTypeError, match="seed must be an int; got float 1.0"):
        SimulatedPerson(Branin(), seed=1.0)
    with pytest.raises(InputDataError, match=r"seed must be in \[-2\*\*63"):
        SimulatedPerson(Branin(), seed=2**64)


def test_every_person_is_a_base_person():
    for cls in (SimulatedPerson, LogitPerson, IndifferentPerson, ParetoPerson):
        assert issubclass(cls, BasePerson)
    with pytest.raises(TypeError, match="abstract"):
        BasePerson(seed=0)


def test_a_person_that_answers_first_counts_its_answers():
    class First(BasePerson):
        def _answer(self, X):
            return torch.zeros(X.shape[:-2], dtype=torch.long, device=X.device)

    person = First(seed=0)
    assert person.compare_batch(torch.rand(3, 4, 2, 1)).tolist() == [[0] * 4] * 3
    assert person.compare(torch.rand(1), torch.rand(1)) == 0
    assert person.num_answers == 13
