import math

import mpmath
import pytest
import torch
from scipy import integrate, stats
from scipy.special import log_expit

from prefbo.exceptions import InputDataError
from prefbo.likelihoods.labels import (
    PairedLabelLikelihood,
    PlackettLuceLikelihood,
    ThurstoneRankingLikelihood,
    thurstone_log_prob,
)
from prefbo.likelihoods.testing import LikelihoodContract

# five contexts, L = 4 labels: full, partial and one-label orderings
ORDERINGS = torch.tensor(
    [[0, 1, 2, 3], [2, 1, -1, -1], [3, 0, 1, -1], [1, 2, 3, 0], [2, -1, -1, -1]]
)


def _ordering_probability(vals, sigma):
    """P(X_0 > X_1 > … > X_{r−1}), X_j ~ N(vals[j], σ²) independent, r ≥ 3.

    Condition on X_1 = x: P = ∫ φ_1(x) P(X_0 > x) Q_2(x) dx with
    Q_j(x) = P(x > X_j > … > X_{r−1}) = ∫_{−∞}^x φ_j(y) Q_{j+1}(y) dy and
    Q_{r−1}(x) = P(X_{r−1} < x): nested adaptive quadrature (scipy quad).
    """
    lo, hi = min(vals) - 12 * sigma, max(vals) + 12 * sigma

    def pdf(x, m):
        return math.exp(-0.5 * ((x - m) / sigma) ** 2) / (
            sigma * math.sqrt(2 * math.pi)
        )

    def cdf(x, m):
        return 0.5 * math.erfc(-(x - m) / (sigma * math.sqrt(2)))

    def below(j, x):  # Q_j(x)
        if j == len(vals) - 1:
            return cdf(x, vals[j])
        return integrate.quad(
            lambda y: pdf(y, vals[j]) * below(j + 1, y), lo, x, epsabs=0, epsrel=1e-11
        )[0]

    def integrand(x):
        return pdf(x, vals[1]) * cdf(vals[0], x) * below(2, x)

    return integrate.quad(integrand, lo, hi, epsabs=0, epsrel=1e-11, limit=200)[0]


def thurstone_reference(u, orderings, sigma):
    """r = 2: scipy's log Φ; r ≥ 3: nested 1-d adaptive integrals."""
    out = []
    for c, row in enumerate(orderings.tolist()):
        vals = [u[c, a].item() for a in row if a >= 0]
        if len(vals) == 1:
            out.append(0.0)
        elif len(vals) == 2:
            out.append(stats.norm.logcdf((vals[0] - vals[1]) / (math.sqrt(2) * sigma)))
        else:
            out.append(math.log(_ordering_probability(vals, sigma)))
    return torch.tensor(out, dtype=torch.float64)


def plackett_luce_reference(u, orderings, s, rest_below):
    out = []
    L = u.shape[1]
    for c, row in enumerate(orderings.tolist()):
        labels = [a for a in row if a >= 0]
        rest = [a for a in range(L) if a not in labels] if rest_below else []
        lp = 0.0
        for i, a in enumerate(labels):
            pool = labels[i:] + rest
            lp += u[c, a].item() / s - math.log(
                sum(math.exp(u[c, b].item() / s) for b in pool)
            )
        out.append(lp)
    return torch.tensor(out, dtype=torch.float64)


class TestThurstoneRanking(LikelihoodContract):
    num_outputs = 4
    mc_samples = 1024
    sigma = 0.8

    def create_likelihood(self):
        return ThurstoneRankingLikelihood(noise_std=self.sigma)

    def create_answers(self, g):
        return (ORDERINGS,)

    def reference_log_prob(self, u, answers):
        return thurstone_reference(u, answers[0], self.sigma)


class TestPlackettLuce(LikelihoodContract):
    num_outputs = 4
    sigma = 0.6
    rest_below = False

    def create_likelihood(self):
        return PlackettLuceLikelihood(
            noise_std=self.sigma, rest_ranked_below=self.rest_below
        )

    def create_answers(self, g):
        return (ORDERINGS,)

    def reference_log_prob(self, u, answers):
        return plackett_luce_reference(
            u, answers[0], math.sqrt(2) * self.sigma, self.rest_below
        )


class TestPlackettLuceTopK(TestPlackettLuce):
    rest_below = True


class TestPairedLabelProbit(LikelihoodContract):
    num_outputs = 4
    link = "probit"

    def create_likelihood(self):
        return PairedLabelLikelihood(link=self.link, noise_std=0.7)

    def create_answers(self, g):
        return (torch.tensor([[0, 1, 2], [4, 3, 0], [2, 0, 1], [0, 2, 1], [1, 3, 2]]),)

    def reference_log_prob(self, u, answers):
        s = math.sqrt(2) * 0.7
        fn = stats.norm.logcdf if self.link == "probit" else log_expit
        return torch.tensor(
            [fn((u[c, i] - u[c, j]).item() / s) for c, i, j in answers[0].tolist()],
            dtype=torch.float64,
        )


class TestPairedLabelLogit(TestPairedLabelProbit):
    link = "logit"


def test_thurstone_orderings_match_simulated_people():
    """Draw one noise value per label, sort, and count each ordering."""
    sigma = 0.7
    u = torch.tensor([[0.3, -0.2, 0.8, 0.0]], dtype=torch.float64)
    orderings = torch.tensor([[2, 0, 3, 1], [0, 2, 3, 1], [1, 3, 0, 2], [2, 0, -1, -1]])
    lik = ThurstoneRankingLikelihood(noise_std=sigma).double()
    p = lik.log_prob_answers(u.expand(4, -1), orderings).exp()
    g = torch.Generator().manual_seed(11)
    num = 200_000
    noisy = u + sigma * torch.randn(num, 4, generator=g, dtype=torch.float64)
    order = noisy.argsort(-1, descending=True)
    freq = torch.stack(
        [(order == orderings[i]).all(-1).double().mean() for i in range(3)]
        + [(noisy[:, 2] > noisy[:, 0]).double().mean()]
    )
    se = (p * (1 - p) / num).sqrt()
    assert bool(((freq - p).abs() <= 4 * se).all()), (freq, p)
    # the shared noise matters: not the product of the three adjacent probits
    s = math.sqrt(2) * sigma
    naive = math.prod(
        stats.norm.cdf((u[0, a] - u[0, b]).item() / s)
        for a, b in [(2, 0), (0, 3), (3, 1)]
    )
    assert abs(naive - p[0].item()) > 10 * se[0].item()


def test_plackett_luce_matches_simulated_gumbel_choices():
    """PL is the law of the argsort of u/s plus standard Gumbel noise."""
    s = 0.8
    u = torch.tensor([[0.5, -0.3, 0.9, 0.1, -1.0]], dtype=torch.float64)
    g = torch.Generator().manual_seed(2)
    num = 200_000
    gumbel = -torch.log(
        -torch.log(torch.rand(num, 5, generator=g, dtype=torch.float64))
    )
    noisy = u / s + gumbel
    full = noisy.argsort(-1, descending=True)
    subset = torch.tensor([3, 0, 4])  # labels ranked among themselves
    sub_order = subset[noisy[:, subset].argsort(-1, descending=True)]
    cases = [
        (
            torch.tensor([[2, 0, 3, -1, -1]]),
            True,
            (full[:, :3] == torch.tensor([2, 0, 3])).all(-1),
        ),
        (
            torch.tensor([[0, 3, 4, -1, -1]]),
            False,
            (sub_order == torch.tensor([0, 3, 4])).all(-1),
        ),
        (
            torch.tensor([[2, 0, 3, 1, 4]]),
            False,
            (full == torch.tensor([2, 0, 3, 1, 4])).all(-1),
        ),
    ]
    for ordering, rest_below, hits in cases:
        lik = PlackettLuceLikelihood(
            noise_std=s / math.sqrt(2), rest_ranked_below=rest_below
        )
        p = lik.log_prob_answers(u, ordering).exp().item()
        freq = hits.double().mean().item()
        assert abs(freq - p) <= 4 * math.sqrt(p * (1 - p) / num), (ordering, freq, p)


def test_two_labels_reduce_to_the_pairwise_likelihoods():
    u = torch.tensor([[0.4, -0.9, 2.0]], dtype=torch.float64)
    o = torch.tensor([[1, 2]])
    s = math.sqrt(2) * 0.5
    th = ThurstoneRankingLikelihood(noise_std=0.5).log_prob_answers(u, o)
    pl = PlackettLuceLikelihood(noise_std=0.5).log_prob_answers(u, o)
    assert th.item() == pytest.approx(stats.norm.logcdf(-2.9 / s), rel=1e-9)
    assert pl.item() == pytest.approx(log_expit(-2.9 / s), rel=1e-12)


def test_thurstone_is_accurate_for_strongly_contradicted_orderings():
    """Worst label first, 10σ apart: log p ≈ −107, against a 40-digit integral."""
    u = torch.tensor([[-10.0, 0.0, 10.0]], dtype=torch.float64)
    out = thurstone_log_prob(u, torch.ones(1, 3, dtype=torch.bool), num_grid=512)
    mpmath.mp.dps = 40
    ref = mpmath.quad(
        lambda x: mpmath.npdf(x) * mpmath.ncdf(-10 - x) * mpmath.ncdf(x - 10),
        mpmath.linspace(-20, 20, 81),
    )
    assert out.item() == pytest.approx(float(mpmath.log(ref)), rel=1e-5)
    coarse = thurstone_log_prob(u, torch.ones(1, 3, dtype=torch.bool), num_grid=128)
    assert coarse.item() == pytest.approx(float(mpmath.log(ref)), rel=1e-3)


def test_contexts_select_the_rows_of_the_utilities():
    lik = PlackettLuceLikelihood()
    u = torch.randn(3, 4, dtype=torch.float64)
    o = torch.tensor([[0, 1, 2], [3, 2, -1]])
    out = lik.log_prob_answers(u, o, torch.tensor([2, 2]))
    torch.testing.assert_close(out, lik.log_prob_answers(u[[2, 2]], o))


def test_errors():
    lik = ThurstoneRankingLikelihood()
    u = torch.zeros(2, 3)
    with pytest.raises(
        InputDataError, match=r"orderings must be padded with -1 at the end"
    ):
        lik.log_prob_answers(u, torch.tensor([[0, -1, 1], [0, 1, 2]]))
    with pytest.raises(InputDataError, match="orderings must not repeat"):
        lik.log_prob_answers(u, torch.tensor([[0, 1, 0], [0, 1, 2]]))
    with pytest.raises(InputDataError, match="orderings must list at least one"):
        lik.log_prob_answers(u, torch.tensor([[-1, -1], [0, 1]]))
    with pytest.raises(InputDataError, match="got N=2 contexts and k=1 answers"):
        lik.log_prob_answers(u, torch.tensor([[0, 1]]))
    with pytest.raises(InputDataError, match=r"contexts must hold indices in \[0, 1\]"):
        lik.log_prob_answers(u, torch.tensor([[0, 1]]), torch.tensor([2]))
    with pytest.raises(
        InputDataError, match="num_grid must be an int >= 8; got num_grid=4"
    ):
        ThurstoneRankingLikelihood(num_grid=4)
    with pytest.raises(InputDataError, match="link must be one of"):
        PairedLabelLikelihood(link="cauchit")
    pl = PairedLabelLikelihood()
    with pytest.raises(
        InputDataError, match=r"label columns must hold indices in \[0, 2\]"
    ):
        pl.log_prob_answers(torch.zeros(5, 3), torch.tensor([[4, 3, 0]]))
    with pytest.raises(InputDataError, match="compare two different labels; row 0"):
        pl.log_prob_answers(u, torch.tensor([[0, 1, 1]]))


@pytest.mark.parametrize(("sigma", "mu", "var"), [(0.1, -5.0, 1.0), (1.0, 2.0, 9.0)])
def test_paired_probit_log_marginal_is_the_closed_form(sigma, mu, var):
    lik = PairedLabelLikelihood("probit", noise_std=sigma)
    mean = torch.tensor([[mu, 0.0]], dtype=torch.float64)  # 1 context x 2 labels
    cov = torch.tensor([[[var, 0.0], [0.0, 0.0]]], dtype=torch.float64)
    got = lik.log_marginal_answers(mean, cov, torch.tensor([[0, 0, 1]]))
    ref = stats.norm.logcdf(mu / math.sqrt(2 * sigma**2 + var))
    assert got.item() == pytest.approx(ref, rel=1e-12)


def test_paired_logit_log_marginal_matches_scipy_quad():
    lik = PairedLabelLikelihood("logit", noise_std=0.8)
    s = lik.scale
    mu, sd = -2.0, 1.2
    mean = torch.tensor([[mu, 0.0]], dtype=torch.float64)
    cov = torch.tensor([[[sd**2, 0.0], [0.0, 0.0]]], dtype=torch.float64)
    got = lik.log_marginal_answers(mean, cov, torch.tensor([[0, 0, 1]]))
    ref = integrate.quad(
        lambda x: math.exp(log_expit(x / s)) * stats.norm.pdf(x, mu, sd),
        mu - 15 * sd,
        mu + 15 * sd,
        epsabs=0,
        limit=200,
    )[0]
    assert got.item() == pytest.approx(math.log(ref), abs=1e-6)
