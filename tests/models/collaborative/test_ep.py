import math
import warnings

import pytest
import torch

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.likelihoods import PairwiseLogitLikelihood, PairwiseProbitLikelihood
from prefbo.models.collaborative import (
    CollaborativePreferenceGP,
    ep_people,
    laplace_people,
)
from prefbo.models.collaborative import ep as ep_module

PROBIT = PairwiseProbitLikelihood()


def _problem(B=3, A=6, D=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    delta = 2 * torch.randn(B, A, D, generator=g, dtype=torch.float64)
    offset = torch.randn(B, A, generator=g, dtype=torch.float64)
    prior_mean = 0.3 * torch.randn(B, D, generator=g, dtype=torch.float64)
    return delta, offset, prior_mean


def test_one_answer_is_exact():
    r"""With one site EP is exact: the tilted moments of a Gaussian times one
    probit are closed-form (Rasmussen & Williams 2006, eq. 3.58)."""
    delta, offset, m0 = _problem(B=2, A=1)
    post = ep_people(PROBIT, delta, offset, torch.ones(2, 1, dtype=bool), m0)
    x, c, s2 = delta[:, 0], offset[:, 0], 2.0  # s = √2 σ, σ = 1
    v = (x * x).sum(-1)
    z = (c + (x * m0).sum(-1)) / (s2 + v).sqrt()
    lam = torch.exp(-0.5 * z * z - torch.special.log_ndtr(z)) / math.sqrt(2 * math.pi)
    mean = m0 + x * (lam / (s2 + v).sqrt()).unsqueeze(-1)
    cov = torch.eye(4, dtype=torch.float64) - x.unsqueeze(-1) * x.unsqueeze(-2) * (
        lam * (z + lam) / (s2 + v)
    ).view(-1, 1, 1)
    torch.testing.assert_close(post.mean, mean, atol=1e-10, rtol=0)
    torch.testing.assert_close(post.covariance(), cov, atol=1e-10, rtol=0)


def test_several_answers_match_a_long_importance_sampling_run():
    r"""The EP mean and covariance agree with 2·10⁶ prior draws weighted by
    the probit likelihood (and the Laplace mode does not)."""
    delta, offset, m0 = _problem()
    mask = torch.ones(3, 6, dtype=bool)
    post = ep_people(PROBIT, delta, offset, mask, m0)
    mode = laplace_people(PROBIT, delta, offset, mask, m0)
    g = torch.Generator().manual_seed(1)
    for b in range(3):
        z = m0[b] + torch.randn(2_000_000, 4, generator=g, dtype=torch.float64)
        t = offset[b] + z @ delta[b].T
        w = torch.softmax(torch.special.log_ndtr(t / math.sqrt(2)).sum(-1), 0)
        mean = w @ z
        cov = (w.unsqueeze(-1) * (z - mean)).T @ (z - mean)
        torch.testing.assert_close(post.mean[b], mean, atol=0.01, rtol=0)
        torch.testing.assert_close(post.covariance()[b], cov, atol=0.02, rtol=0)
        assert (mode.mean[b] - mean).abs().max() > 0.05  # the mode is elsewhere


def test_padding_and_directionless_answers_are_ignored():
    delta, offset, m0 = _problem(B=1, A=4)
    alone = ep_people(PROBIT, delta, offset, torch.ones(1, 4, dtype=bool), m0)
    padded_delta = torch.cat([delta, 5 * torch.ones(1, 2, 4, dtype=delta.dtype)], 1)
    padded_offset = torch.cat([offset, torch.ones(1, 2, dtype=offset.dtype)], 1)
    mask = torch.tensor([[True] * 4 + [False] * 2])
    padded = ep_people(PROBIT, padded_delta, padded_offset, mask, m0)
    torch.testing.assert_close(padded.mean, alone.mean, atol=1e-12, rtol=0)
    # an answer whose difference does not depend on z changes nothing
    flat = torch.cat([delta, torch.zeros(1, 1, 4, dtype=delta.dtype)], 1)
    off = torch.cat([offset, torch.full((1, 1), 3.0, dtype=offset.dtype)], 1)
    same = ep_people(PROBIT, flat, off, torch.ones(1, 5, dtype=bool), m0)
    torch.testing.assert_close(same.mean, alone.mean, atol=1e-12, rtol=0)
    assert torch.isfinite(same.precision_chol).all()


def test_interacting_sites_converge_site_by_site(monkeypatch):
    r"""Where the parallel sweep is slow (here: no parallel sweep at all),
    the sequential sweeps reach the same fixed point."""
    delta, offset, m0 = _problem(B=4, A=15, D=3, seed=2)
    mask = torch.ones(4, 15, dtype=bool)
    parallel = ep_people(PROBIT, delta, offset, mask, m0)
    monkeypatch.setattr(ep_module, "PARALLEL_SWEEPS", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sequential = ep_people(PROBIT, delta, offset, mask, m0)
    torch.testing.assert_close(sequential.mean, parallel.mean, atol=1e-8, rtol=0)
    torch.testing.assert_close(
        sequential.covariance(), parallel.covariance(), atol=1e-8, rtol=0
    )


def test_every_device_and_dtype(tkwargs):
    r"""The result comes back in the inputs' dtype and device, equal to the
    float64 CPU result (the sweeps run in float64 everywhere)."""
    delta, offset, m0 = _problem()
    mask = torch.ones(3, 6, dtype=bool)
    want = ep_people(PROBIT, delta, offset, mask, m0)
    got = ep_people(
        PROBIT,
        delta.to(**tkwargs),
        offset.to(**tkwargs),
        mask.to(tkwargs["device"]),
        m0.to(**tkwargs),
    )
    assert got.mean.dtype == got.precision_chol.dtype == tkwargs["dtype"]
    assert got.mean.device.type == tkwargs["device"].type
    tol = 1e-5 if tkwargs["dtype"] == torch.float32 else 1e-10
    torch.testing.assert_close(got.mean.cpu().double(), want.mean, atol=tol, rtol=0)


def test_the_model_chooses_and_checks_its_inference(population):
    X, answers, _, _ = population(P=6)
    assert CollaborativePreferenceGP(X, answers).people_inference == "ep"
    logit = PairwiseLogitLikelihood()
    model = CollaborativePreferenceGP(X, answers, likelihood=logit)
    assert model.people_inference == "laplace"
    with pytest.raises(UnsupportedError, match="needs the probit likelihood"):
        CollaborativePreferenceGP(X, answers, likelihood=logit, people_inference="ep")
    with pytest.raises(InputDataError, match="people_inference must be one of"):
        CollaborativePreferenceGP(X, answers, people_inference="mcmc")


@pytest.mark.parametrize("infer", [ep_people, laplace_people])
def test_no_people_is_no_posteriors(infer):
    delta, offset, m0 = _problem(B=0, A=3, D=2)
    post = infer(PROBIT, delta, offset, torch.ones(0, 3, dtype=bool), m0)
    assert post.mean.shape == (0, 2) and post.precision_chol.shape == (0, 2, 2)


def test_infer_people_names_its_inference(population):
    X, answers, _, _ = population(P=6)
    model = CollaborativePreferenceGP(X, answers)
    batch = model.answers.gather(torch.tensor([0]))
    delta, offset = model.answer_rows(batch.winners, batch.losers)
    with pytest.raises(InputDataError, match="inference must be 'ep' or 'laplace'"):
        model.infer_people(torch.tensor([0]), delta, offset, batch.mask, "EP")
