import math

import pytest
import torch
from scipy import stats

from prefbo.exceptions import UnsupportedError
from prefbo.likelihoods.pareto import ParetoPreferenceLikelihood
from prefbo.likelihoods.testing import LikelihoodContract


def random_pairs(g, n, m):
    i = torch.randint(n, (m,), generator=g)
    j = (i + torch.randint(1, n, (m,), generator=g)) % n
    return torch.stack([i, j], -1)


def reference(u, comparisons, conflicts, sigma):
    """SPEC §7.3 with scipy, one answer at a time."""
    s = math.sqrt(2) * sigma
    d = u.shape[-1]
    out = []
    for x, y in comparisons.tolist():
        out.append(
            sum(stats.norm.logcdf((u[x, i] - u[y, i]).item() / s) for i in range(d))
        )
    for x, y in conflicts.tolist():
        a = math.prod(stats.norm.cdf((u[x, i] - u[y, i]).item() / s) for i in range(d))
        b = math.prod(stats.norm.cdf((u[y, i] - u[x, i]).item() / s) for i in range(d))
        out.append(math.log(1 - a - b))
    return torch.tensor(out, dtype=torch.float64)


class TestParetoTwoUtilities(LikelihoodContract):
    num_outputs = 2
    sigma = 0.8

    def create_likelihood(self):
        return ParetoPreferenceLikelihood(noise_std=self.sigma)

    def create_answers(self, g):
        return random_pairs(g, self.num_designs, 5), random_pairs(
            g, self.num_designs, 3
        )

    def forward_answers(self, answers):
        return (answers[0],)

    def reference_log_prob(self, u, answers):
        return reference(u, *answers, self.sigma)


class TestParetoThreeUtilities(TestParetoTwoUtilities):
    num_outputs = 3
    sigma = 1.0


def test_answer_frequencies_match_simulated_people():
    """Every utility of every design gets its own noise draw in each comparison."""
    sigma = 0.7
    lik = ParetoPreferenceLikelihood(noise_std=sigma).double()
    u = torch.tensor(
        [[0.0, 0.5], [0.4, -0.2], [1.0, 1.5], [-0.5, 0.1]], dtype=torch.float64
    )
    pairs = torch.tensor([[0, 1], [2, 3], [1, 3], [0, 2]])
    probs = lik(u, pairs).probs  # m x 3
    g = torch.Generator().manual_seed(5)
    num = 200_000
    noisy_x = u[pairs[:, 0]] + sigma * torch.randn(
        num, 4, 2, generator=g, dtype=torch.float64
    )
    noisy_y = u[pairs[:, 1]] + sigma * torch.randn(
        num, 4, 2, generator=g, dtype=torch.float64
    )
    first = (noisy_x > noisy_y).all(-1)
    second = (noisy_y > noisy_x).all(-1)
    freq = torch.stack([first, second, ~first & ~second], -1).double().mean(0)
    se = (probs * (1 - probs) / num).sqrt()
    assert bool(((freq - probs).abs() <= 4 * se + 1e-12).all()), (freq, probs)


def test_one_utility_is_the_pairwise_probit():
    lik = ParetoPreferenceLikelihood(noise_std=0.5).double()
    u = torch.tensor([[0.3], [-0.4], [1.1]], dtype=torch.float64)
    comp = torch.tensor([[0, 1], [1, 2], [2, 0]])
    expected = stats.norm.logcdf(
        (u[comp[:, 0], 0] - u[comp[:, 1], 0]).numpy() / (0.5 * math.sqrt(2))
    )
    torch.testing.assert_close(
        lik.log_prob_answers(u, comp), torch.from_numpy(expected)
    )
    assert lik(u, comp).probs[:, 2].abs().max() == 0  # no conflicts with d = 1


def test_conflicts_need_two_utilities():
    lik = ParetoPreferenceLikelihood()
    with pytest.raises(
        UnsupportedError, match="conflicts need at least d = 2 utilities"
    ):
        lik.log_prob_answers(
            torch.zeros(3, 1), torch.tensor([[0, 1]]), torch.tensor([[1, 2]])
        )
