import math

import pytest
import torch
from linear_operator import to_dense

from prefbo.exceptions import InputDataError, UnsupportedError
from prefbo.models.collaborative import CollaborativePreferenceGP
from prefbo.models.collaborative.shared import (
    OWN_SHARE,
    OWN_SHARE_PRIOR_SCALE,
    SCALE_BOUNDS,
    START_CHOLESKY,
    START_SCALES,
    START_TASTE_MEANS,
    SharedFunctions,
    choose_inducing,
)


def test_inducing_points_are_all_designs_when_few_and_cvr_otherwise():
    X = torch.rand(12, 2, dtype=torch.float64)
    Z = choose_inducing(torch.cat([X, X[:3]]), 20, seed=0)
    assert Z.shape == (12, 2)
    Z = choose_inducing(X, 5, seed=0)
    assert Z.shape == (5, 2)
    assert all(bool((X == z).all(-1).any()) for z in Z)
    assert choose_inducing(X.float(), 5, seed=0).dtype == torch.float32


def test_at_the_inducing_points_the_nystrom_kernel_is_the_kernel():
    X = torch.rand(10, 3, dtype=torch.float64)
    shared = SharedFunctions(X, num_tastes=2)
    basis = shared.basis(X)  # J x n x R
    K = to_dense(shared.kernel(X))
    scale = shared.scale.detach()
    for j in range(3):
        torch.testing.assert_close(
            basis[j] @ basis[j].T, scale[j] ** 2 * K, atol=1e-5, rtol=0
        )
    assert shared.residual_basis(X).shape == (10, 0)


def test_item_effects_and_residual_basis(dense_basis):
    X = torch.rand(6, 2, dtype=torch.float64)
    shared = SharedFunctions(X[:4], num_tastes=1, num_items=6, num_residual=2)
    with torch.no_grad():
        shared.mean.normal_()
    items = torch.tensor([0, 5, -1])
    assert shared.basis(X[:3]).shape == (2, 3, 4)  # items by index, not basis
    dense = dense_basis(shared, X[:3], items)
    torch.testing.assert_close(
        shared.means(shared.basis(X[:3]), items).detach(),
        (dense @ shared.mean.detach().unsqueeze(-1)).squeeze(-1),
    )
    r = shared.residual_basis(X)
    assert r.shape == (6, 2)
    torch.testing.assert_close(
        r[:2] @ r[:2].T,
        shared.residual_scale.detach() ** 2 * to_dense(shared.kernel(X[:2])),
        atol=1e-6,
        rtol=0,
    )


def test_kl_is_zero_at_the_prior_and_matches_torch():
    X = torch.rand(5, 2, dtype=torch.float64)
    shared = SharedFunctions(X, num_tastes=1)
    with torch.no_grad():
        shared.mean.zero_()
        shared.chol.copy_(torch.eye(5, dtype=torch.float64).expand(2, 5, 5))
    assert abs(float(shared.kl().detach())) < 1e-12
    with torch.no_grad():
        shared.mean.normal_()
        shared.chol.mul_(0.5).add_(
            0.1 * torch.randn(2, 5, 5, dtype=torch.float64).tril(-1)
        )
    q = torch.distributions.MultivariateNormal(
        shared.mean, scale_tril=shared.chol.tril()
    )
    p = torch.distributions.MultivariateNormal(
        torch.zeros(5, dtype=torch.float64), torch.eye(5, dtype=torch.float64)
    )
    torch.testing.assert_close(
        shared.kl(), torch.distributions.kl_divergence(q, p).sum()
    )


def test_to_prior_makes_every_function_s_posterior_its_prior():
    X = torch.rand(6, 2, dtype=torch.float64)
    shared = SharedFunctions(X[:4], num_tastes=2, num_items=6, num_residual=2)
    assert float(shared.kl().detach()) > 1.0  # the start is not the prior
    shared.to_prior()
    assert abs(float(shared.kl().detach())) < 1e-12
    items = torch.arange(6)
    basis = shared.basis(X)
    assert shared.means(basis, items).abs().max() == 0
    torch.testing.assert_close(  # an item's effect at its prior variance
        shared.item_variances(items),
        shared.item_scale.detach()[:, None] ** 2
        * torch.ones(3, 6, dtype=torch.float64),
    )


def items_model(seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(6, 2, generator=g, dtype=torch.float64)
    shared = SharedFunctions(X[:4], num_tastes=1, num_items=6, num_residual=2)
    with torch.no_grad():
        shared.mean.normal_(generator=g)
        shared.chol.mul_(2.0).add_(
            0.3 * torch.randn(shared.chol.shape, generator=g, dtype=torch.float64)
        )
        shared.item_log_std.copy_(
            torch.randn(shared.item_log_std.shape, generator=g, dtype=torch.float64)
        )
        shared.item_scale = torch.tensor([0.7, 1.3], dtype=torch.float64)
    return X, shared


def dense_covariances(shared):
    r"""Each function's ``R x R`` covariance, the inducing block's and the
    items' diagonal put together independently of the model's roots."""
    C = shared.chol.detach().tril()
    var = (2 * shared.item_log_std.detach()).exp()
    return torch.stack(
        [torch.block_diag(c @ c.T, torch.diag(v)) for c, v in zip(C, var)]
    )


def test_item_coordinates_are_mean_field_beside_the_inducing_block(dense_basis):
    r"""Items' effects are independent in ``q``: the full factor covers the
    ``M`` inducing coordinates only, so a pool's items cost linearly."""
    X, shared = items_model()
    assert shared.chol.shape == (2, 4, 4)
    assert shared.item_log_std.shape == (2, 6)
    assert shared.mean.shape == (2, 4 + 6)
    items = torch.tensor([[0, 5, -1, 2], [3, 3, -1, -1]])  # 2 blocks of 4
    X = torch.stack([X[:4], X[2:]])
    root = shared.roots(shared.basis(X.reshape(-1, 2)).detach()).reshape(2, 2, 4, 4)
    cov = root @ root.mT + shared.item_covariance(items).detach()
    S = dense_covariances(shared)
    for block in range(2):
        dense = dense_basis(shared, X[block], items[block])
        torch.testing.assert_close(cov[:, block], dense @ S @ dense.mT)


def test_answer_variances_with_items_match_the_dense_covariance(dense_basis):
    X, shared = items_model(1)
    items = torch.tensor([0, 1, 2, 3, 4, -1])
    winners = torch.tensor([[0, 5, 2], [3, 1, 5]])
    losers = torch.tensor([[1, 2, 4], [0, 5, 3]])
    _, _, var = shared.answer_differences(X, items, winners, losers, variance=True)
    basis = dense_basis(shared, X, items)  # J x n x R
    diff = basis[:, winners] - basis[:, losers]  # J x B x A x R
    S = dense_covariances(shared)
    expect = torch.einsum("jbar,jrs,jbas->jba", diff, S, diff)
    torch.testing.assert_close(var.detach(), expect)


def test_kl_with_items_matches_torch_on_the_block_diagonal_covariance():
    _, shared = items_model(2)
    q = torch.distributions.MultivariateNormal(
        shared.mean.detach(), covariance_matrix=dense_covariances(shared)
    )
    p = torch.distributions.MultivariateNormal(
        torch.zeros(10, dtype=torch.float64), torch.eye(10, dtype=torch.float64)
    )
    torch.testing.assert_close(
        shared.kl().detach(), torch.distributions.kl_divergence(q, p).sum()
    )


def test_scales_are_settable_and_bounded():
    shared = SharedFunctions(torch.rand(4, 2, dtype=torch.float64), num_tastes=2)
    shared.scale = torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    torch.testing.assert_close(
        shared.scale.detach(), torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    )
    lo, hi = SCALE_BOUNDS
    # the constraint's bounds are float32's: 1.00000001e-3 lies below its floor
    for bad in (lo, 1.00000001e-3, hi, 0.0, float("nan")):
        with pytest.raises(InputDataError, match="scale must lie strictly between"):
            shared.scale = torch.tensor([2.0, bad, 0.5], dtype=torch.float64)
    with pytest.raises(UnsupportedError, match=r"no residual \(num_residual=0\)"):
        shared.residual_scale = torch.tensor(0.5)
    with pytest.raises(UnsupportedError, match="no item effects"):
        shared.item_scale = torch.tensor(0.5)
    with pytest.raises(UnsupportedError, match=r"no residual \(num_residual=0\)"):
        _ = shared.residual_scale
    with pytest.raises(UnsupportedError, match="no item effects"):
        _ = shared.item_scale
    with pytest.raises(
        InputDataError, match=r"scale must be one value or 3 values; got shape \(2,\)"
    ):
        shared.scale = torch.tensor([1.0, 2.0], dtype=torch.float64)
    shared = SharedFunctions(
        torch.rand(4, 2, dtype=torch.float64), num_tastes=2, num_residual=2
    )
    with pytest.raises(InputDataError, match="residual_scale"):
        shared.residual_scale = torch.tensor(0.0)


def any_collapsed(shared):
    return any(bool(mask.any()) for mask in shared.collapsed().values())


def test_revive_restarts_the_collapsed_parts_only():
    shared = SharedFunctions(
        torch.rand(6, 2, dtype=torch.float64),
        num_tastes=3,
        num_items=4,
        num_residual=3,
    )
    lo, hi = 1.001 * SCALE_BOUNDS[0], 0.999 * SCALE_BOUNDS[1]
    with torch.no_grad():
        shared.scale = torch.tensor([hi, lo, 0.7, lo], dtype=torch.float64)
        shared.item_scale = torch.tensor([lo, 0.4, lo, 0.4], dtype=torch.float64)
        shared.residual_scale = torch.tensor(lo, dtype=torch.float64)
        shared.mean.zero_()
        shared.mean[2] = 0.25
        shared.chol.mul_(0.1)
        shared.item_log_std.fill_(-3.0)
    parts = shared.collapsed()
    assert parts["raw_scale"].tolist() == [False, True, False, True]
    assert parts["raw_item_scale"].tolist() == [True, False, True, False]
    assert bool(parts["raw_residual_scale"])
    kept_chol = shared.chol[[0, 2]].detach().clone()
    kept_raw = shared.raw_scale.detach()[[0, 2]].clone()
    shared.revive(parts, seed=5)
    assert not any_collapsed(shared)
    # the others' raw values untouched (a scale near its ceiling too)
    assert torch.equal(shared.raw_scale.detach()[[0, 2]], kept_raw)
    taste, item = START_SCALES["taste"], START_SCALES["item"]
    expect = torch.tensor([hi, taste, 0.7, taste], dtype=torch.float64)
    torch.testing.assert_close(shared.scale.detach(), expect)
    expect = torch.tensor([item, 0.4, item, 0.4], dtype=torch.float64)
    torch.testing.assert_close(shared.item_scale.detach(), expect)
    residual = torch.tensor(START_SCALES["residual"], dtype=torch.float64)
    torch.testing.assert_close(shared.residual_scale.detach(), residual)
    mean = shared.mean.detach()
    assert torch.equal(mean[0], torch.zeros_like(mean[0]))  # not collapsed
    assert torch.equal(mean[2], torch.full_like(mean[2], 0.25))
    for j in (1, 3):  # drawn anew, at the starting spread
        assert 0.1 < float(mean[j].std()) / START_TASTE_MEANS < 10
    torch.testing.assert_close(shared.chol[[0, 2]].detach(), kept_chol)
    eye = START_CHOLESKY * torch.eye(6, dtype=torch.float64)
    std = shared.item_log_std.detach().exp()
    assert bool((std[[0, 2]] == math.exp(-3.0)).all())
    for j in (1, 3):
        torch.testing.assert_close(shared.chol[j].detach(), eye)
        torch.testing.assert_close(std[j], torch.full_like(std[j], START_CHOLESKY))


def test_revive_restarts_the_parts_it_is_given_whatever_their_scale_now():
    r"""A fit revives what collapsed by its end, at the state it started
    from, where those scales may not be collapsed yet."""
    shared = SharedFunctions(torch.rand(4, 2, dtype=torch.float64), num_tastes=2)
    shared.scale = torch.tensor([1.0, 0.012, 0.012], dtype=torch.float64)
    parts = {"raw_scale": torch.tensor([False, True, False])}
    shared.revive(parts, seed=0)
    expect = torch.tensor([1.0, START_SCALES["taste"], 0.012], dtype=torch.float64)
    torch.testing.assert_close(shared.scale.detach(), expect)


def test_revived_means_are_not_the_starting_ones():
    r"""A fit's seed is often the model's: the revived draw must differ."""
    shared = SharedFunctions(
        torch.rand(16, 2, dtype=torch.float64), num_tastes=1, seed=3
    )
    start = shared.mean.detach()[1].clone()
    shared.revive({"raw_scale": torch.tensor([False, True])}, seed=3)
    assert not torch.allclose(shared.mean.detach()[1], start)


def test_nothing_collapsed_nothing_revived():
    shared = SharedFunctions(torch.rand(4, 2, dtype=torch.float64), num_tastes=2)
    before = {k: v.clone() for k, v in shared.state_dict().items()}
    assert not any_collapsed(shared)
    shared.revive(shared.collapsed(), seed=0)
    for k, v in shared.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_the_log_prior_penalises_an_own_share_below_its_floor_only():
    Z = torch.rand(
        8, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    f = SharedFunctions(Z, num_tastes=2, num_residual=4)
    kernel = sum(
        prior.log_prob(closure(module)).sum()
        for _, module, prior, closure, _ in f.kernel.named_priors()
    )
    # below OWN_SHARE: a half-normal in the log share's e-folds
    f.scale = torch.tensor([2.0, 0.5, 0.3], dtype=torch.float64)
    f.residual_scale = torch.tensor(0.4, dtype=torch.float64)
    share = (0.5**2 + 0.3**2 + 0.4**2) / 2.0**2
    assert share < OWN_SHARE
    assert float(f.own_share().detach()) == pytest.approx(share)
    z = (math.log(share) - math.log(OWN_SHARE)) / OWN_SHARE_PRIOR_SCALE
    torch.testing.assert_close(f.log_prior(), kernel - 0.5 * z**2)
    # above it: no penalty (people with nothing in common are not charged)
    f.scale = torch.tensor([0.5, 0.5, 0.3], dtype=torch.float64)
    assert float(f.own_share().detach()) > OWN_SHARE
    torch.testing.assert_close(f.log_prior(), kernel)
    # a part switched off (below COLLAPSED) is not counted, and with none
    # on there is no such term
    f.scale = torch.tensor([2.0, 0.5, 0.005], dtype=torch.float64)
    share_on = (0.5**2 + 0.4**2) / 2.0**2
    assert float(f.own_share().detach()) == pytest.approx(share_on)
    f.scale = torch.tensor([2.0, 0.005, 0.005], dtype=torch.float64)
    f.residual_scale = torch.tensor(0.005, dtype=torch.float64)
    assert f.own_share() is None
    torch.testing.assert_close(f.log_prior(), kernel)


def test_a_small_study_s_fit_keeps_the_people_s_own_parts():
    r"""Four people whose utilities share a bump and differ by a smooth
    deviation of 0.4 of its sd, 12 nearly noiseless answers each: the
    evidence alone is nearly flat in the own parts' scales, and fits
    switched them all off (everyone pooled, the shared scale at its
    ceiling); with the own share's prior they stay on."""
    g = torch.Generator().manual_seed(3)
    X = torch.rand(60, 2, generator=g, dtype=torch.float64)
    bump = torch.exp(-((X - torch.tensor([0.7, 0.3])) ** 2).sum(-1) / 0.125)
    bump = (bump - bump.mean()) / bump.std()
    W = torch.randn(2, 50, generator=g, dtype=torch.float64) / 0.3
    rows = []
    for p in range(4):
        b = 2 * math.pi * torch.rand(50, generator=g, dtype=torch.float64)
        a = torch.randn(50, generator=g, dtype=torch.float64)
        u = bump + 0.4 * math.sqrt(2 / 50) * torch.cos(X @ W + b) @ a
        for _ in range(12):
            i, j = torch.randperm(60, generator=g)[:2].tolist()
            rows.append((p, i, j) if u[i] > u[j] else (p, j, i))
    model = CollaborativePreferenceGP(X, torch.tensor(rows), seed=1)
    model.fit(steps=300, seed=1)
    assert float(model.shared.own_share().detach()) > 0.01


def _answers(X, g, best, count, near=None):
    r"""``count`` answers by the utility ``-‖x - best‖²`` over rows of
    ``X``: random pairs, or with ``near`` one side among the ten designs
    nearest to it."""
    u, out = -((X - torch.tensor(best, dtype=X.dtype)) ** 2).sum(-1), []
    for _ in range(count):
        i, j = torch.randperm(len(X), generator=g)[:2].tolist()
        if near is not None:
            top = (
                (X - torch.tensor(near, dtype=X.dtype))
                .norm(dim=-1)
                .topk(10, largest=False)
            )
            i = int(top.indices[torch.randint(10, (1,), generator=g)])
        out.append((i, j) if u[i] > u[j] else (j, i))
    return torch.tensor(out)


def test_a_newcomer_who_disagrees_moves_at_once_from_the_first_person():
    r"""One person's 16 answers (favourite at (0.8, 0.2)) fitted, then a
    newcomer (favourite at (0.2, 0.8)) answers 8 questions, each between
    one of the ten designs nearest the first person's favourite and a
    random one, observed online at the fitted shared part: in at least
    five of six draws the newcomer's best design moves from the first
    person's towards their own corner. Without the own share's prior the
    fit switched the own parts off (residual scale 0.1-0.3 against a
    shared scale of 7-18) and in none of the six did the newcomer's
    answers move them."""
    moved, own = 0, torch.tensor([0.2, 0.8], dtype=torch.float64)
    for seed in range(4, 10):
        g = torch.Generator().manual_seed(seed)
        X = torch.rand(60, 2, generator=g, dtype=torch.float64)
        first = _answers(X, g, (0.8, 0.2), 16)
        rows = torch.cat([torch.zeros(16, 1, dtype=torch.long), first], dim=-1)
        model = CollaborativePreferenceGP(X, rows, seed=0)
        model.fit(steps=300, seed=0)
        newcomer = model.add_person()
        pairs = _answers(X, g, (0.2, 0.8), 8, near=(0.8, 0.2))
        model.observe(newcomer, pairs[:, 0], pairs[:, 1])
        theirs = X[model.utility_mean(0).argmax()]
        best = X[model.utility_mean(newcomer).argmax()]
        moved += bool((best - own).norm() < (theirs - own).norm())
    assert moved >= 5


def test_people_who_answer_the_same_questions_oppositely_keep_their_own():
    r"""Three people with favourites at three corners answer the same 8
    questions (noiselessly, as a pooled posterior asks everyone alike),
    six draws: each person's best design lies within 0.3 of their own
    favourite for at least 15 of the 18. The fit gives them next to no
    utility in common. A log-normal prior holding the own share near 0.25
    (charging a share above it too) kept a shared utility and pooled: 12
    of 18."""
    favourites = torch.tensor([[0.8, 0.2], [0.2, 0.8], [0.85, 0.85]])
    near = 0
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        X = torch.rand(60, 2, generator=g, dtype=torch.float64)
        pairs = torch.stack([torch.randperm(60, generator=g)[:2] for _ in range(8)])
        rows = []
        for p, best in enumerate(favourites.to(X)):
            u = -((X - best) ** 2).sum(-1)
            for i, j in pairs.tolist():
                rows.append((p, i, j) if u[i] > u[j] else (p, j, i))
        model = CollaborativePreferenceGP(X, torch.tensor(rows), seed=0)
        model.fit(steps=300, seed=0)
        for p, best in enumerate(favourites.to(X)):
            mine = X[model.utility_mean(p).argmax()]
            near += bool((mine - best).norm() < 0.3)
    assert near >= 15
