"""``prefbo.test_functions.answer_models``: answer frequencies vs closed forms."""

from __future__ import annotations

import math

import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.test_functions import (
    CONFLICT,
    INDIFFERENT,
    IndifferentPerson,
    LogitPerson,
    ParetoPerson,
)

N = 40_000  # Monte Carlo answers per question: s.e. of a frequency <= 0.0025
TOL = 0.012  # ≈ 5 standard errors


def linear(X: torch.Tensor) -> torch.Tensor:
    return X[..., 0]


def second(X: torch.Tensor) -> torch.Tensor:
    return X[..., 1]


def _questions(deltas: list[float], d: int = 1) -> torch.Tensor:
    r"""``len(deltas) x N x 2 x d`` questions with ``u(x₂) - u(x₁) = delta``."""
    X = torch.zeros(len(deltas), N, 2, d, dtype=torch.float64)
    X[:, :, 1, 0] = torch.tensor(deltas, dtype=torch.float64).unsqueeze(-1)
    return X


def _freq(answers: torch.Tensor, value: int) -> torch.Tensor:
    return (answers == value).double().mean(-1)


DELTAS = [-0.3, -0.05, 0.0, 0.1, 0.4]


def test_logit_person_matches_the_sigmoid():
    person = LogitPerson(linear, scale=0.2, seed=3)
    ans = person.compare_batch(_questions(DELTAS))  # 5 x N
    expected = torch.sigmoid(torch.tensor(DELTAS, dtype=torch.float64) / 0.2)
    torch.testing.assert_close(_freq(ans, 1), expected, atol=TOL, rtol=0)
    assert set(ans.unique().tolist()) <= {0, 1}
    assert person.num_answers == len(DELTAS) * N


def test_logit_person_is_reproducible_and_noiseless_at_zero_scale():
    X = torch.rand(50, 2, 1, dtype=torch.float64)
    a = LogitPerson(linear, 0.3, seed=1).compare_batch(X)
    b = LogitPerson(linear, 0.3, seed=1).compare_batch(X)
    assert torch.equal(a, b)
    exact = LogitPerson(linear, 0.0).compare_batch(X)
    assert torch.equal(exact, (X[:, 1, 0] > X[:, 0, 0]).long())


def test_indifferent_person_matches_the_ordinal_probit():
    sigma, delta = 0.1, 0.08
    person = IndifferentPerson(linear, noise_std=sigma, threshold=delta, seed=0)
    ans = person.compare_batch(_questions(DELTAS))
    D = torch.tensor(DELTAS, dtype=torch.float64)
    s = math.sqrt(2) * sigma
    p1 = torch.special.ndtr((D - delta) / s)
    p0 = torch.special.ndtr((-D - delta) / s)
    torch.testing.assert_close(_freq(ans, 1), p1, atol=TOL, rtol=0)
    torch.testing.assert_close(_freq(ans, 0), p0, atol=TOL, rtol=0)
    torch.testing.assert_close(_freq(ans, INDIFFERENT), 1 - p0 - p1, atol=TOL, rtol=0)


def test_noiseless_indifferent_person_uses_the_threshold():
    person = IndifferentPerson(linear, noise_std=0.0, threshold=0.1)
    x = torch.tensor([0.0])
    assert person.compare(x, x + 0.05) == INDIFFERENT
    assert person.compare(x, x + 0.2) == 1
    assert person.compare(x + 0.2, x) == 0


def test_pareto_person_matches_the_product_of_probits():
    sigma = 0.1
    person = ParetoPerson([linear, second], noise_std=sigma, seed=5)
    d1 = torch.tensor([0.1, 0.1, -0.2, 0.0], dtype=torch.float64)
    d2 = torch.tensor([0.2, -0.1, -0.1, 0.0], dtype=torch.float64)
    X = torch.zeros(4, N, 2, 2, dtype=torch.float64)
    X[:, :, 1, 0] = d1.unsqueeze(-1)
    X[:, :, 1, 1] = d2.unsqueeze(-1)
    ans = person.compare_batch(X)
    s = math.sqrt(2) * sigma
    p1 = torch.special.ndtr(d1 / s) * torch.special.ndtr(d2 / s)
    p0 = torch.special.ndtr(-d1 / s) * torch.special.ndtr(-d2 / s)
    torch.testing.assert_close(_freq(ans, 1), p1, atol=TOL, rtol=0)
    torch.testing.assert_close(_freq(ans, 0), p0, atol=TOL, rtol=0)
    torch.testing.assert_close(_freq(ans, CONFLICT), 1 - p0 - p1, atol=TOL, rtol=0)


def test_noiseless_pareto_person():
    person = ParetoPerson([linear, second], noise_std=0.0)
    a, b = torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0])
    assert person.compare(a, b) == 1
    assert person.compare(b, a) == 0
    assert person.compare(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])) == (
        CONFLICT
    )
    # tied on one criterion, better on the other: that option dominates
    flat = ParetoPerson([linear, lambda X: 0.0 * X[..., 0]], noise_std=0.0)
    a, b = torch.tensor([0.0, 0.3]), torch.tensor([1.0, 0.3])
    assert flat.compare(a, b) == 1
    assert flat.compare(b, a) == 0
    assert flat.compare(a, a) == CONFLICT  # tied on all: neither dominates


def test_errors():
    with pytest.raises(
        InputDataError, match=r"scale must be a finite float >= 0; got scale=-1\.0"
    ):
        LogitPerson(linear, scale=-1.0)
    with pytest.raises(
        InputDataError,
        match=r"threshold must be a finite float >= 0; got threshold=nan",
    ):
        IndifferentPerson(linear, threshold=float("nan"))
    with pytest.raises(InputTypeError, match=r"utilities\[1\] must be callable"):
        ParetoPerson([linear, 3])
    with pytest.raises(InputDataError, match=r"utilities must be a non-empty"):
        ParetoPerson([])
    with pytest.raises(InputDataError, match=r"batch_shape x 2 x d .*got \(3, 3, 1\)"):
        LogitPerson(linear).compare_batch(torch.rand(3, 3, 1))
    with pytest.raises(
        InputTypeError, match=r"floating torch.Tensor .*dtype torch.int64"
    ):
        LogitPerson(linear).compare_batch(torch.zeros(3, 2, 1, dtype=torch.long))
    with pytest.raises(InputDataError, match=r"same shape; got \(1,\) and \(2,\)"):
        LogitPerson(linear).compare(torch.zeros(1), torch.zeros(2))
    with pytest.raises(InputDataError, match=r"to shape \(4, 2\); got shape \(4,\)"):
        LogitPerson(lambda X: X[..., 0, 0]).compare_batch(torch.rand(4, 2, 1))
