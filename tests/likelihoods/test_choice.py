import math

import pytest
import torch
from scipy import stats

from prefbo.exceptions import InputDataError, InputTypeError, UnsupportedError
from prefbo.likelihoods.choice import (
    PseudoRationalChoiceLikelihood,
    RationalChoiceLikelihood,
)
from prefbo.likelihoods.testing import LikelihoodContract

SETS = torch.tensor([[0, 1, 2, -1], [3, 4, -1, -1], [1, 4, 0, 2], [2, -1, 3, 1]])
CHOSEN = torch.tensor(
    [
        [True, True, False, False],
        [False, True, False, False],
        [True, False, False, True],
        [False, False, True, False],
    ]
)


def _prob_dominates(u, o, v, s):
    return math.prod(
        stats.norm.cdf((u[o, i] - u[v, i]).item() / s) for i in range(u.shape[1])
    )


def reference(u, sets, chosen, sigma, pseudo):
    """The choice likelihoods written with loops over sets, pairs and utilities."""
    s = math.sqrt(2) * sigma
    out = []
    for row, picks in zip(sets.tolist(), chosen.tolist()):
        c = [a for a, p in zip(row, picks) if a >= 0 and p]
        r = [a for a, p in zip(row, picks) if a >= 0 and not p]
        lp = 0.0
        for i, o in enumerate(c):
            for v in c[i + 1 :]:
                lp += math.log(
                    1 - _prob_dominates(u, o, v, s) - _prob_dominates(u, v, o, s)
                )
        for v in r:
            if pseudo:
                for i in range(u.shape[1]):
                    beats_all = math.prod(
                        stats.norm.cdf((u[v, i] - u[o, i]).item() / s) for o in c
                    )
                    lp += math.log(1 - beats_all)
            else:
                none = math.prod(1 - _prob_dominates(u, o, v, s) for o in c)
                lp += math.log(1 - none)
        out.append(lp)
    return torch.tensor(out, dtype=torch.float64)


class TestRationalChoice(LikelihoodContract):
    num_outputs = 2
    sigma = 0.6
    pseudo = False

    def create_likelihood(self):
        cls = (
            PseudoRationalChoiceLikelihood if self.pseudo else RationalChoiceLikelihood
        )
        return cls(noise_std=self.sigma)

    def create_answers(self, g):
        return SETS, CHOSEN

    def reference_log_prob(self, u, answers):
        return reference(u, *answers, self.sigma, self.pseudo)


class TestPseudoRationalChoice(TestRationalChoice):
    pseudo = True


class TestRationalChoiceThreeUtilities(TestRationalChoice):
    num_outputs = 3
    mc_samples = 2048
    sigma = 1.0


@pytest.mark.parametrize(
    "cls", [RationalChoiceLikelihood, PseudoRationalChoiceLikelihood]
)
def test_top1_with_one_utility_is_a_product_of_pairwise_probits(cls):
    lik = cls(noise_std=0.9).double()
    u = torch.tensor([[0.2], [-0.5], [1.3], [0.0]], dtype=torch.float64)
    sets = torch.tensor([[0, 1, 2], [3, 1, -1]])
    chosen = torch.tensor([[False, False, True], [True, False, False]])
    s = 0.9 * math.sqrt(2)
    expected = [
        stats.norm.logcdf((1.3 - 0.2) / s) + stats.norm.logcdf((1.3 + 0.5) / s),
        stats.norm.logcdf((0.0 + 0.5) / s),
    ]
    torch.testing.assert_close(
        lik.choice_log_prob(u, sets, chosen),
        torch.tensor(expected, dtype=torch.float64),
    )


def test_padding_position_does_not_matter():
    lik = RationalChoiceLikelihood().double()
    u = torch.randn(5, 2, dtype=torch.float64)
    a = lik.choice_log_prob(
        u, torch.tensor([[0, 1, 2, -1]]), torch.tensor([[1, 0, 0, 0]]).bool()
    )
    b = lik.choice_log_prob(
        u, torch.tensor([[-1, 2, 0, 1]]), torch.tensor([[0, 0, 1, 0]]).bool()
    )
    torch.testing.assert_close(a, b)


def test_tiny_probabilities_stay_finite_and_accurate():
    """A rejected option far better in every utility: log p ≈ log P(o ≻ v)."""
    lik = RationalChoiceLikelihood().double()
    u = torch.tensor([[0.0, 0.0], [40.0, 40.0]], dtype=torch.float64)
    out = lik.choice_log_prob(u, torch.tensor([[0, 1]]), torch.tensor([[True, False]]))
    assert out.item() == pytest.approx(
        2 * stats.norm.logcdf(-40 / math.sqrt(2)), rel=1e-10
    )


def test_errors():
    lik = RationalChoiceLikelihood()
    u = torch.zeros(4, 2)
    sets = torch.tensor([[0, 1, -1]])
    with pytest.raises(InputTypeError, match="chosen must be a k x s bool tensor"):
        lik.choice_log_prob(u, sets, torch.tensor([[1, 0, 0]]))
    with pytest.raises(
        InputDataError, match=r"chosen must have option_sets' shape \(1, 3\)"
    ):
        lik.choice_log_prob(u, sets, torch.tensor([[True, False]]))
    with pytest.raises(InputDataError, match="chosen must be False on padding"):
        lik.choice_log_prob(u, sets, torch.tensor([[True, False, True]]))
    with pytest.raises(InputDataError, match="row 0 has none chosen"):
        lik.choice_log_prob(u, sets, torch.tensor([[False, False, False]]))
    with pytest.raises(
        InputDataError, match=r"option_sets must hold indices in \[0, 3\] or -1"
    ):
        lik.choice_log_prob(u, torch.tensor([[0, 4]]), torch.tensor([[True, False]]))
    with pytest.raises(UnsupportedError, match="with d=1 utility two chosen options"):
        lik.choice_log_prob(
            torch.zeros(4, 1), sets, torch.tensor([[True, True, False]])
        )


def test_duplicate_options_are_rejected():
    u = torch.randn(3, 2)
    with pytest.raises(
        InputDataError,
        match=r"option_sets must list distinct designs in a row \(-1 padding aside\); "
        r"row 1 is \[2, -1, 2\]",
    ):
        RationalChoiceLikelihood().log_prob_answers(
            u,
            torch.tensor([[0, 1, -1], [2, -1, 2]]),
            torch.tensor([[True, False, False], [True, False, False]]),
        )
    # repeated padding is fine
    out = PseudoRationalChoiceLikelihood().log_prob_answers(
        u, torch.tensor([[0, -1, -1]]), torch.tensor([[True, False, False]])
    )
    assert out.shape == (1,)
