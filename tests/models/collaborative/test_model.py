import copy

import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.exceptions import InputDataWarning
from gpytorch.kernels import RBFKernel, ScaleKernel

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.mlls import PairwiseLaplaceMLL  # noqa: F401
from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.models.collaborative import (
    CollaborativePreferenceGP,
    PersonPosterior,
    ep_people,
    laplace_people,
)
from prefbo.models.collaborative.questions import next_questions


def fitted(population, steps=40, **kwargs):
    X, answers, _, _ = population(
        **{k: v for k, v in kwargs.items() if k in ("device", "dtype", "P")}
    )
    options = {k: v for k, v in kwargs.items() if k not in ("device", "dtype", "P")}
    model = CollaborativePreferenceGP(X, answers, num_inducing=20, **options)
    model.fit(steps=steps)
    return model, X


@pytest.mark.parametrize("inference", ["laplace", "ep"])
def test_online_updates_equal_a_refit_with_the_shared_part_fixed(population, inference):
    model, X = fitted(population, num_residual=5, people_inference=inference)
    rows = torch.tensor([[3, 7], [1, 2], [7, 1], [9, 3], [2, 9]])
    one_by_one, at_once = model, copy.deepcopy(model)
    a = one_by_one.add_person()
    for w, l in rows.tolist():
        one_by_one.observe(a, torch.tensor([w]), torch.tensor([l]))
    b = at_once.add_person()
    at_once.observe(b, rows[:, 0], rows[:, 1])
    refit = laplace_people if inference == "laplace" else ep_people
    direct = refit(
        model.likelihood,
        *model.answer_rows(rows[:, 0][None], rows[:, 1][None]),
        torch.ones(1, 5, dtype=torch.bool),
        model.prior_mean(torch.tensor([a])),
    )
    for m, p in ((one_by_one, a), (at_once, b)):
        post = m.posterior_of(p)
        torch.testing.assert_close(post.mean, direct.mean, atol=1e-6, rtol=0)
        torch.testing.assert_close(
            post.covariance(), direct.covariance(), atol=1e-6, rtol=0
        )


def test_a_newcomer_is_the_population(population):
    model, X = fitted(population)
    new = model.add_person()
    Xq = torch.rand(4, 3, 2, dtype=torch.float64)
    mine, theirs = model.posterior(Xq, person=new), model.posterior(Xq)
    torch.testing.assert_close(mine.mean, theirs.mean)
    torch.testing.assert_close(mine.mvn.covariance_matrix, theirs.mvn.covariance_matrix)
    flat = Xq.reshape(-1, 2)  # the global seed's draws: the pool's first items
    with torch.no_grad():
        mean = model.shared.means(model.shared.basis(flat), model.item_ids(flat))
    torch.testing.assert_close(theirs.mean.reshape(-1), mean[0])  # E[w] = 0


def test_person_features_set_the_prior_of_the_weights(population):
    X, answers, _, _ = population()
    U = torch.randn(60, 2, dtype=torch.float64)
    model = CollaborativePreferenceGP(X, answers, person_features=U, num_inducing=20)
    model.fit(steps=20)
    u = torch.tensor([1.0, -2.0], dtype=torch.float64)
    new = model.add_person(features=u)
    expected = u @ model.feature_map.detach()
    torch.testing.assert_close(model.posterior_of(new).mean[0, :3], expected)
    with pytest.raises(InputDataError, match="features must be a tensor of the 2"):
        model.add_person()


def test_moments_match_monte_carlo(population, dense_basis):
    model, X = fitted(population, num_residual=4, item_effects=True)
    p, S = 5, 100_000
    Xq = X[:4].unsqueeze(0)
    with torch.no_grad():
        mean, cov = model.moments(Xq, model.posterior_of(p))
        g = torch.Generator().manual_seed(1)
        shared = model.shared
        assert model.num_items == 20  # a pool: the items' effects sampled too
        basis = dense_basis(shared, Xq[0], model.item_ids(Xq[0]))  # J x 4 x R
        C = shared.chol.tril()
        M = C.shape[-1]
        eps = torch.randn(S, *shared.mean.shape, generator=g, dtype=torch.float64)
        u = shared.mean + torch.cat(
            [
                (C @ eps[..., :M].unsqueeze(-1)).squeeze(-1),
                shared.item_log_std.exp() * eps[..., M:],
            ],
            -1,
        )
        F = (basis.unsqueeze(0) @ u.unsqueeze(-1)).squeeze(-1)  # S x J x 4
        post = model.posterior_of(p)
        z = (
            post.mean
            + torch.linalg.solve_triangular(
                post.precision_chol[0].T,
                torch.randn(post.mean.shape[-1], S, generator=g, dtype=torch.float64),
                upper=True,
            ).T
        )
        K = model.num_tastes
        f = (
            F[:, 0]
            + (z[:, :K].unsqueeze(-1) * F[:, 1:]).sum(1)
            + z[:, K:] @ shared.residual_basis(Xq[0]).T
        )
    torch.testing.assert_close(f.mean(0), mean[0, 0], atol=0.02, rtol=0)
    torch.testing.assert_close(
        torch.cov(f.T), cov[0, 0], atol=0.03 * float(cov.max()), rtol=0
    )


@pytest.mark.parametrize("inference", ["laplace", "ep"])
def test_without_tastes_a_person_is_an_exact_gp(population, inference):
    r"""K = 0 with the shared utility known to be zero: the person's posterior
    is prefbo's PairwiseLaplaceGP (Laplace) or PairwiseEPGP (EP) with the
    residual's kernel (its inducing points are all the designs, so the
    Nyström kernel is the kernel)."""
    X, answers, _, _ = population(n=8)
    model = CollaborativePreferenceGP(
        X,
        answers,
        num_tastes=0,
        num_inducing=8,
        num_residual=8,
        item_effects=False,
        people_inference=inference,
    )
    with torch.no_grad():
        model.shared.mean.zero_()  # the shared utility known to be zero
        model.shared.chol.zero_()
        model.shared.residual_scale = torch.tensor(0.8)
    comps = torch.tensor([[0, 1], [2, 1], [3, 0], [1, 4], [5, 6], [7, 2]])
    new = model.add_person()
    model.observe(new, comps[:, 0], comps[:, 1])
    kernel = ScaleKernel(RBFKernel(ard_num_dims=2)).double()
    kernel.base_kernel.lengthscale = model.shared.kernel.lengthscale.detach()
    kernel.outputscale = 0.64
    exact_model = PairwiseLaplaceGP if inference == "laplace" else PairwiseEPGP
    exact = exact_model(X, comps, covar_module=kernel).eval()
    want = exact.posterior(X)
    got = model.posterior(X, person=new)
    torch.testing.assert_close(got.mean, want.mean, atol=1e-4, rtol=0)
    torch.testing.assert_close(
        got.mvn.covariance_matrix, want.mvn.covariance_matrix, atol=1e-4, rtol=0
    )


def test_botorch_eubo_on_a_person(population, tkwargs):
    X, answers, _, _ = population(**tkwargs)
    model = CollaborativePreferenceGP(X, answers, num_inducing=16)
    model.fit(steps=10)
    acq = AnalyticExpectedUtilityOfBestOption(pref_model=model.person_model(3))
    value = acq(X[:6].reshape(3, 2, 2))
    assert value.shape == (3,) and torch.isfinite(value).all()
    sample = model.person_model(None).posterior(X[:5]).rsample(torch.Size([2]))
    assert sample.shape == (2, 5, 1) and sample.dtype == tkwargs["dtype"]


def test_item_effects_tell_equal_features_apart(population):
    X, answers, _, _ = population(n=6)
    X = torch.zeros_like(X)  # no features: only the items' own effects
    with pytest.warns(InputDataWarning, match=r"rows 0 and 1, 0 and 2, "):
        model = CollaborativePreferenceGP(
            X[:1].expand(6, -1).clone(),
            answers,
            num_tastes=1,
            item_effects=True,
            num_residual=0,
        )
    wins = torch.bincount(answers[:, 1], minlength=6) - torch.bincount(
        answers[:, 2], minlength=6
    )
    model.fit(steps=60)
    mean = model.utility_mean(None)
    assert torch.corrcoef(torch.stack([mean, wins.double()]))[0, 1] > 0.8


def test_item_effects_by_default_for_a_pool_with_more_items_than_inducing_points(
    population,
):
    r"""A pool (each design in two answers on average) with more items than
    inducing points has items; the designs of a continuous study, each
    compared about once, have none, nor a pool whose every item is an
    inducing point (the smooth functions take any values there)."""
    X, answers, _, _ = population(n=20)  # 720 answers over 20 designs

    def items(answers, **options):
        return CollaborativePreferenceGP(X, answers, **options).num_items

    assert items(answers, num_inducing=8) == 20
    assert items(answers[:20], num_inducing=8) == 20
    assert items(answers[:19], num_inducing=8) == 0
    assert items(answers, num_inducing=19) == 20
    assert items(answers, num_inducing=20) == 0
    assert items(answers) == 0  # 64 inducing points: every item is one
    assert items(answers, inducing_points=X[:5]) == 20
    twice = torch.cat([X, X])  # 40 rows, 20 distinct: all 20 are inducing points
    with pytest.warns(InputDataWarning, match=r"rows 0 and 20, 1 and 21"):
        model = CollaborativePreferenceGP(twice, answers)
    assert model.shared.Z.shape[0] == 20 and model.num_items == 40
    assert items(answers, num_inducing=8, item_effects=False) == 0
    assert items(answers[:5], item_effects=True) == 20
    with pytest.raises(
        InputTypeError, match=r"item_effects must be True, False or None; got str 'yes'"
    ):
        CollaborativePreferenceGP(X, answers, item_effects="yes")


def test_errors(population):
    X, answers, _, _ = population()
    with pytest.raises(InputTypeError, match="answers must be an m x 3 integer tensor"):
        CollaborativePreferenceGP(X, answers.double())
    with pytest.raises(InputDataError, match="compares design 2 with itself"):
        CollaborativePreferenceGP(X, torch.tensor([[0, 2, 2]]))
    with pytest.raises(
        InputDataError, match="rows of the 20 designs; got values from 1 to 20"
    ):
        CollaborativePreferenceGP(X, torch.tensor([[0, 1, 20]]))
    with pytest.raises(InputDataError, match="person_features must be 60 x e"):
        CollaborativePreferenceGP(X, answers, person_features=torch.zeros(3, 2))
    # ids with a gap: the message says where the count of people comes from
    gapped = torch.tensor([[0, 0, 1], [2, 1, 2]])
    with pytest.raises(
        InputDataError,
        match=r"must be 3 x e .*ids 0 to 2, from num_people or the answers' largest "
        r"person id \+ 1\); got shape \(2, 2\)\. Number the people 0 to P - 1",
    ):
        CollaborativePreferenceGP(X, gapped, person_features=torch.zeros(2, 2))
    model = CollaborativePreferenceGP(X, answers, num_inducing=8)
    with pytest.raises(InputDataError, match="person must be an id below 60; got 60"):
        model.observe(60, torch.tensor([0]), torch.tensor([1]))
    with pytest.raises(
        InputDataError, match="winners and losers must have one row per answer"
    ):
        model.observe(0, torch.tensor([0, 1]), torch.tensor([1]))
    with pytest.raises(InputDataError, match="num_tastes must be an int >= 0"):
        CollaborativePreferenceGP(X, answers, num_tastes=-1)
    for bad in (torch.rand(5, 1, 3, dtype=torch.float64), torch.rand(3)):
        with pytest.raises(InputDataError, match="X must be batch_shape x q x 2"):
            model.person_model(0).posterior(bad)
    with pytest.raises(InputDataError, match="person must be an id below 60; got 60"):
        model.person_model(60)  # refused at once, not at its first posterior
    with pytest.raises(
        InputDataError, match=r"rows must be rows of the 20 designs.*from 3 to 50"
    ):
        model.utility_mean(0, torch.tensor([3, 50]))
    with pytest.raises(InputTypeError, match="rows must be a 1-d integer tensor"):
        model.utility_mean(0, torch.tensor([0.5]))


def test_observe_new_designs_extends_the_table(population):
    model, X = fitted(population, steps=5)
    n = model.designs.shape[0]
    new = model.add_person()
    Xw = torch.tensor([[0.123, 0.456], [0.789, 0.012]], dtype=torch.float64)
    Xl = torch.tensor([[0.321, 0.654], [0.987, 0.210]], dtype=torch.float64)
    post = model.observe(new, Xw, Xl)
    assert model.designs.shape[0] == n + 4
    assert not torch.allclose(post.mean, torch.zeros_like(post.mean))


def test_shared_means_and_utility_mean_rows(population):
    model, X = fitted(population, steps=5)
    means = model.shared_means(X)
    assert means.shape == (model.num_tastes + 1, X.shape[0])
    torch.testing.assert_close(model.utility_mean(None), means[0])  # E[w] = 0
    new = model.add_person()
    model.observe(
        new, torch.tensor([[0.123, 0.456]], dtype=torch.float64), torch.tensor([0])
    )
    assert model.utility_mean(new).shape == (X.shape[0],)  # the initial designs


def test_people_without_answers_and_a_latent_free_model():
    X = torch.rand(10, 2, dtype=torch.float64)
    model = CollaborativePreferenceGP(X, torch.tensor([[0, 0, 1]]), num_people=5)
    model.fit(steps=1)  # people 1-4 never answered
    for _ in range(3):
        model.add_person()
    model.update_people(torch.tensor([5, 6]))
    pooled = CollaborativePreferenceGP(
        X, torch.tensor([[0, 0, 1], [1, 2, 3]]), num_tastes=0, num_residual=0
    )
    pooled.fit(steps=2)
    assert pooled.utility_mean(0).shape == (10,)
    assert pooled.posterior(X[:3]).mean.shape == (3, 1)


def nystrom(kernel_lengthscale, A, B, Z, jitter):
    r"""``k(A, Z) (k(Z, Z) + jitter I)⁻¹ k(Z, B)`` of a unit RBF kernel,
    written out here rather than through the model's bases."""

    def k(P, Q):
        d = (P[:, None, :] - Q[None, :, :]) / kernel_lengthscale
        return torch.exp(-0.5 * (d**2).sum(-1))

    Kzz = k(Z, Z) + jitter * torch.eye(len(Z), dtype=Z.dtype)
    return k(A, Z) @ torch.linalg.solve(Kzz, k(Z, B))


def test_a_model_before_any_answer_is_the_prior():
    g = torch.Generator().manual_seed(3)
    Z = torch.rand(8, 2, generator=g, dtype=torch.float64)
    model = CollaborativePreferenceGP(
        Z,
        torch.zeros(0, 3, dtype=torch.long),
        num_people=0,
        num_tastes=2,
        num_inducing=8,
        num_residual=3,
        inducing_points=Z,
    )
    model.shared.to_prior()
    assert model.num_people == 0 and model.latent_mean.shape == (0, 5)
    assert model.fit(steps=5) == []  # nothing to fit on
    Y = torch.rand(4, 2, generator=g, dtype=torch.float64)
    s = model.shared
    ell = s.kernel.lengthscale.detach().reshape(-1)
    scale = s.scale.detach()
    own = float(scale[0] ** 2 + (scale[1:] ** 2).sum())  # E[w²] = 1
    residual = float(s.residual_scale.detach() ** 2)
    expected = own * nystrom(ell, Y, Y, Z, 1e-6)
    expected = expected + residual * nystrom(ell, Y, Y, Z[:3], 1e-6)
    for person in (None, model.add_person()):
        post = model.posterior(Y, person=person)
        assert post.mean.abs().max() == 0
        torch.testing.assert_close(
            post.covariance_matrix, expected, atol=1e-8, rtol=1e-6
        )
    assert model.num_people == 1
    before = model.posterior(Y[:2], person=0).mean.detach().reshape(-1)
    model.observe(0, Y[:1], Y[1:2])  # their own part learns at once
    after = model.posterior(Y[:2], person=0).mean.detach().reshape(-1)
    assert float(after[0] - after[1]) > float(before[0] - before[1]) + 0.05


def test_non_finite_designs_are_refused_before_anything_is_stored():
    X = torch.rand(10, 2, dtype=torch.float64)
    bad = X.clone()
    bad[3, 0] = float("inf")
    with pytest.raises(InputDataError, match="designs must be finite"):
        CollaborativePreferenceGP(bad, torch.tensor([[0, 0, 1]]))
    model = CollaborativePreferenceGP(X, torch.tensor([[0, 0, 1]]))
    nan = torch.full((1, 2), float("nan"), dtype=torch.float64)
    with pytest.raises(InputDataError, match="winners must be finite"):
        model.observe(0, nan, X[:1])
    assert model.designs.shape[0] == 10
    assert model.answers.counts().tolist() == [1]
    with pytest.raises(InputDataError, match="features must be finite"):
        model.add_person(features=None) if False else CollaborativePreferenceGP(
            X, torch.tensor([[0, 0, 1]]), person_features=torch.zeros(1, 2)
        ).add_person(features=torch.tensor([float("nan"), 0.0]))


def test_the_people_s_posteriors_are_in_the_state_dict(population):
    model, X = fitted(population, steps=5)
    fresh = CollaborativePreferenceGP(X, population()[1], num_inducing=20)
    fresh.load_state_dict(model.state_dict())
    torch.testing.assert_close(fresh.utility_mean(3), model.utility_mean(3))
    model.add_person()
    with pytest.raises(RuntimeError, match="latent_mean"):
        fresh.load_state_dict(model.state_dict())


def test_observed_designs_equal_to_table_rows_reuse_them(population):
    model, X = fitted(population, steps=2)
    new = model.add_person()
    fresh = torch.tensor([[0.123, 0.456]], dtype=torch.float64)
    model.observe(new, torch.cat([X[4:5], fresh]), X[[7, 7]])
    assert model.designs.shape[0] == X.shape[0] + 1
    batch = model.answers.gather(torch.tensor([new]))
    assert batch.winners.tolist() == [[4, X.shape[0]]]
    assert batch.losers.tolist() == [[7, 7]]


def test_inducing_points_of_ones_own():
    X = torch.rand(6, 2, dtype=torch.float64)
    Z = torch.rand(9, 2, dtype=torch.float64)
    answers = torch.tensor([[0, 0, 1], [1, 2, 3]])
    model = CollaborativePreferenceGP(X, answers, inducing_points=Z, num_residual=4)
    assert torch.equal(model.shared.Z, Z) and model.latent_dim == 3 + 4
    with pytest.raises(InputDataError, match="inducing_points must be a finite M x 2"):
        CollaborativePreferenceGP(X, answers, inducing_points=torch.rand(4, 3))


def test_item_ids_are_exact_matches_among_many_items():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(200, 5, generator=g, dtype=torch.float64)
    model = CollaborativePreferenceGP(X, torch.tensor([[0, 0, 1]]), item_effects=True)
    assert torch.equal(model.item_ids(X[:100]), torch.arange(100))
    assert int(model.item_ids(X[:1] + 0.5)[0]) == -1


def test_items_of_equal_features_are_warned_of(recwarn):
    r"""Two items of equal features: each is its own item by row, but a
    design passed by its features is read as the first."""
    X = torch.rand(
        6, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    X[4] = X[1]
    answers = torch.tensor([[0, 1, 2], [0, 4, 3], [1, 0, 5]])
    with pytest.warns(InputDataWarning, match=r"rows 1 and 4 of designs have equal"):
        model = CollaborativePreferenceGP(X, answers, item_effects=True)
    assert model.item_ids(X).tolist() == [0, 1, 2, 3, 1, 5]
    recwarn.clear()
    CollaborativePreferenceGP(X, answers, item_effects=False)
    assert not [w for w in recwarn if issubclass(w.category, InputDataWarning)]


def test_items_asked_in_a_coarser_dtype_keep_their_effects():
    r"""A float64 model with item effects asked at its items cast to float32
    (``designs.float()``) reads them as those items: the same posterior as
    at the float64 designs, to float32's rounding, and the same next
    questions; designs that are no item's stay without one."""
    g = torch.Generator().manual_seed(3)
    X = torch.rand(80, 2, generator=g, dtype=torch.float64)
    people = torch.arange(10).repeat_interleave(30)
    pairs = torch.stack([torch.randperm(80, generator=g)[:2] for _ in people])
    answers = torch.cat([people.unsqueeze(-1), pairs], -1)
    model = CollaborativePreferenceGP(X, answers, num_inducing=8, item_effects=True)
    model.fit(steps=30, seed=0)
    assert float(model.shared.item_scale.detach()[0]) > 0.05  # the effects matter
    assert torch.equal(model.item_ids(X.float()), torch.arange(80))
    assert torch.equal(model.item_ids(X.float() + 0.5), torch.full((80,), -1))
    with torch.no_grad():
        exact = model.posterior(X, person=2)
        cast = model.posterior(X.float(), person=2)
    torch.testing.assert_close(cast.mean, exact.mean, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(cast.variance, exact.variance, atol=1e-4, rtol=1e-4)
    ask = torch.tensor([0, 2, 5])
    assert torch.equal(
        next_questions(model, ask, X[:20].float()), next_questions(model, ask, X[:20])
    )
    # answers told by float32 designs are the items' answers: no new rows,
    # the same posterior as told by rows
    by_rows, by_designs = copy.deepcopy(model), copy.deepcopy(model)
    by_rows.observe(4, torch.tensor([10, 3]), torch.tensor([11, 7]))
    by_designs.observe(4, X[[10, 3]].float(), X[[11, 7]].float())
    assert by_designs.designs.shape == (80, 2)
    torch.testing.assert_close(by_designs.utility_mean(4), by_rows.utility_mean(4))
    other = torch.tensor([[0.123, 0.456]])  # no item's: a new row
    assert by_designs.design_rows(other.float()).tolist() == [80]
    assert by_designs.design_rows(torch.cat([X[:1], other])).tolist() == [0, 80]


def test_duplicate_designs_give_finite_gradients():
    X = torch.rand(6, 2, dtype=torch.float64)
    X[1] = X[0]  # two rows, one design: an answer between them has no variance
    answers = torch.tensor([[0, 0, 1], [0, 2, 3], [1, 4, 5]])
    model = CollaborativePreferenceGP(X, answers, num_inducing=5)
    model.fit(steps=3)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_a_model_cast_to_another_dtype_predicts_in_it(population):
    X, answers, _, _ = population(dtype=torch.float32)
    model = CollaborativePreferenceGP(
        X, answers, person_features=torch.randn(60, 2), num_inducing=10
    )
    model.fit(steps=2)
    model.utility_mean(0)  # the factor of k(Z, Z) is kept in float32
    model.double()
    assert model.designs.dtype == torch.float64
    assert model.shared.whitened(model.designs[:3]).dtype == torch.float64
    assert model.utility_mean(0).dtype == torch.float64


def test_a_posterior_takes_designs_of_either_float_dtype(population):
    r"""Designs in another float dtype than the model's are read in the
    model's (a float32 model asked at float64 features, BoTorch's EUBO on it)."""
    X, answers, _, _ = population()
    model = CollaborativePreferenceGP(X, answers, num_inducing=10)
    model.fit(steps=2)
    for dtype in (torch.float32, torch.float64):
        model = model.to(dtype)
        for given in (torch.float32, torch.float64):
            post = model.posterior(X[:3].to(given), person=0)
            assert post.mean.dtype == dtype
            eubo = AnalyticExpectedUtilityOfBestOption(model.person_model(0))
            assert torch.isfinite(eubo(X[:2].unsqueeze(0).to(given))).all()


def test_moments_are_in_the_posteriors_dtype(twins):
    # a float32 model's moments from float64 posteriors: float64 tables in
    # which near designs' difference variances v_a + v_b - 2 c_ab (~1e-5 of
    # v here) keep float32's resolution of the features (the float64 model's
    # to 0.4%), where float32 tables lose them (81% off)
    m64, m32, cluster = twins
    X = cluster(16, 1e-3).unsqueeze(0)
    people = torch.arange(60, device=X.device)
    upper = torch.ones(16, 16, dtype=torch.bool, device=X.device).triu(1)

    def difference_variances(model, dtype):
        latent = PersonPosterior(
            model.latent_mean[people].to(dtype),
            model.latent_precision_chol[people].to(dtype),
        )
        with torch.no_grad():
            _, cov = model.moments(X.to(model.designs), latent)
        assert cov.dtype == dtype
        var = cov[:, 0].diagonal(dim1=-2, dim2=-1)
        return (var.unsqueeze(-1) + var.unsqueeze(-2) - 2 * cov[:, 0])[:, upper]

    reference = difference_variances(m64, torch.float64)
    got = difference_variances(m32, torch.float64)
    assert float(((got - reference).abs() / reference).max()) < 0.02
    difference_variances(m32, torch.float32)  # the model's own dtype


def test_utility_mean_is_the_posterior_mean(population):
    model, X = fitted(population, steps=5, num_residual=4, item_effects=True)
    with torch.no_grad():
        mean = model.posterior(X.unsqueeze(-2), person=3).mean.reshape(-1)
    torch.testing.assert_close(model.utility_mean(3), mean)


def test_forget_withdraws_a_persons_answers(population):
    # forgetting person 3 and observing all but their last answer again
    # equals a model that never saw that last answer (an undo)
    X, answers, _, _ = population(P=12, n=10, answers=6)
    model = CollaborativePreferenceGP(X, answers, num_inducing=8, num_residual=4)
    model.fit(steps=20)
    mine = answers[answers[:, 0] == 3]
    model.forget(3)
    assert int(model.answers.counts()[3]) == 0
    torch.testing.assert_close(
        model.latent_mean[3], model.prior_mean(torch.tensor([3]))[0]
    )
    torch.testing.assert_close(
        model.latent_precision_chol[3], torch.eye(model.latent_dim, dtype=X.dtype)
    )
    model.observe(3, mine[:-1, 1], mine[:-1, 2])
    fresh = copy.deepcopy(model)
    fresh.forget(3)
    for w, lo in mine[:-1, 1:].tolist():  # one at a time: the same mode
        fresh.observe(3, torch.tensor([w]), torch.tensor([lo]))
    torch.testing.assert_close(
        fresh.latent_mean[3], model.latent_mean[3], atol=1e-6, rtol=0
    )
    others = [p for p in range(12) if p != 3]
    assert model.answers.counts()[others].tolist() == [6] * 11
    with pytest.raises(InputDataError, match="person"):
        model.forget(12)


def test_design_rows_find_equal_designs_and_append_new_ones_once(population):
    X, answers, _, _ = population(P=4, n=6, answers=3)
    model = CollaborativePreferenceGP(X, answers, num_inducing=4, num_residual=2)
    new = torch.tensor([[0.25, 0.5], [0.25, 0.5]], dtype=X.dtype)
    rows = model.design_rows(torch.cat([X[[4, 1]], new, X[:1]]))
    assert rows.tolist() == [4, 1, 6, 6, 0]  # the new design once
    assert model.designs.shape[0] == 7 and model.items.tolist()[-1] == -1
    zero = torch.zeros(1, 2, dtype=X.dtype)
    assert model.design_rows(zero).tolist() == [7]
    assert model.design_rows(-zero).tolist() == [7]  # -0.0 equals 0.0
    copy_ = copy.deepcopy(model)  # a copy keeps finding rows, not the original's
    assert copy_.design_rows(new[:1]).tolist() == [6]
    assert copy_.design_rows(torch.ones(1, 2, dtype=X.dtype)).tolist() == [8]
    assert model.design_rows(torch.ones(1, 2, dtype=X.dtype)).tolist() == [8]
    assert model.designs.shape[0] == copy_.designs.shape[0] == 9
