import torch

from prefbo.inference import find_mode
from prefbo.inference.warm_start import warm_candidates
from prefbo.likelihoods import PairwiseProbitLikelihood
from prefbo.models import PairwiseLaplaceGP
from prefbo.utils.testing import make_pairwise_data


def _rbf(X, lengthscale, outputscale):
    return outputscale * torch.exp(-torch.cdist(X, X).pow(2) / (2 * lengthscale**2))


def test_warm_start_reaches_same_mode():
    X, comp, _ = make_pairwise_data(30, 80, seed=1)
    lik = PairwiseProbitLikelihood()
    L1 = torch.linalg.cholesky(
        _rbf(X, 0.3, 1.0) + 1e-6 * torch.eye(30, dtype=torch.float64)
    )
    L2 = torch.linalg.cholesky(
        _rbf(X, 0.6, 20.0) + 1e-6 * torch.eye(30, dtype=torch.float64)
    )
    old = find_mode(L1, comp, lik).mode
    cold, warm = find_mode(L2, comp, lik), find_mode(L2, comp, lik, init=old)
    torch.testing.assert_close(cold.mode, warm.mode, rtol=1e-8, atol=1e-9)


def test_warm_start_after_new_answers_on_the_same_designs():
    # the previous state has fewer comparisons than the data now: its
    # curvature cannot seed the first-order prediction (it used to crash)
    X, comp, _ = make_pairwise_data(20, 30, seed=3)
    model = PairwiseLaplaceGP(X, comp[:20])
    model.train()
    model(*model.train_inputs)  # a training pass leaves a warm state
    model.set_train_data(X, comp, update_model=False)
    evidence = model(*model.train_inputs).evidence
    fresh = PairwiseLaplaceGP(X, comp)
    fresh.train()
    # training passes stop Newton at fit_tol = 1e-6: evidences agree to that
    torch.testing.assert_close(
        evidence, fresh(*fresh.train_inputs).evidence, rtol=1e-6, atol=0
    )


def test_warm_start_from_state_needs_one_newton_step():
    # at the same K a previous mode is exact: the warm start from the state
    # (f0 = K α, no likelihood pass) lands on it and one Newton step confirms it
    X, comp, _ = make_pairwise_data(30, 80, seed=1)
    lik = PairwiseProbitLikelihood()
    L = torch.linalg.cholesky(
        _rbf(X, 0.4, 3.0) + 1e-6 * torch.eye(30, dtype=torch.float64)
    )
    for form in ("precision", "whitened"):
        cold = find_mode(L, comp, lik, form=form)
        warm = find_mode(L, comp, lik, init=cold, form=form)
        assert warm.iterations == 1 < cold.iterations
        # both within Newton's tolerance (1e-9 relative) of the exact mode
        torch.testing.assert_close(warm.mode, cold.mode, rtol=0, atol=1e-8)
        torch.testing.assert_close(warm.evidence, cold.evidence, rtol=1e-10, atol=0)


def test_first_candidate_from_a_state_at_the_same_k_is_its_mode():
    # f0 = K α with α = K⁻¹ f̂: the previous mode itself, in both forms
    X, comp, _ = make_pairwise_data(15, 40, seed=4)
    lik = PairwiseProbitLikelihood()
    L = torch.linalg.cholesky(
        _rbf(X, 0.5, 2.0) + 1e-6 * torch.eye(15, dtype=torch.float64)
    )
    state = find_mode(L, comp, lik, form="whitened")
    Kinv = torch.cholesky_inverse(L)
    for kinv in (None, Kinv):
        (f0, p0, pm0), *_ = warm_candidates(state.mode, state, L, comp, lik, kinv)
        torch.testing.assert_close(f0, state.mode, rtol=1e-8, atol=1e-10)
        if kinv is None:  # whitened: p = pm = v = L⁻¹ f
            v = torch.linalg.solve_triangular(L, f0.unsqueeze(-1), upper=False)
            torch.testing.assert_close(p0, v.squeeze(-1), rtol=1e-8, atol=1e-10)
            assert torch.equal(p0, pm0)
        else:  # precision: p = f, pm = K⁻¹ f = α
            assert torch.equal(p0, f0) and torch.equal(pm0, state.alpha)
