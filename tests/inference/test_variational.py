import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.means import ConstantMean

from prefbo.inference.variational import whitened_answer_moments

JITTER = 1e-4


def _setup(Q=2, t=3, M=5, u=7, k=4, p=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    dt = torch.float64
    kernel = ScaleKernel(RBFKernel(batch_shape=torch.Size([Q])), batch_shape=(Q,))
    mean = ConstantMean(batch_shape=torch.Size([Q]))
    kernel, mean = kernel.to(dt), mean.to(dt)
    with torch.no_grad():
        kernel.outputscale = torch.tensor([1.3, 0.7], dtype=dt)
        kernel.base_kernel.lengthscale = torch.tensor([[[0.4]], [[0.6]]], dtype=dt)
        mean.constant.copy_(torch.tensor([0.2, -0.5], dtype=dt))
    Z = torch.rand(Q, M, 2, generator=g, dtype=dt)
    m = torch.randn(Q, M, generator=g, dtype=dt)
    R = 0.3 * torch.randn(Q, M, M, generator=g, dtype=dt)
    S = R @ R.transpose(-1, -2) + 0.2 * torch.eye(M, dtype=dt)
    X = torch.rand(u, 2, generator=g, dtype=dt)
    designs = torch.stack([torch.randperm(u, generator=g)[:p] for _ in range(k)])
    designs[0, 2] = designs[0, 0]  # the same design, as another utility
    outputs = torch.randint(t, (k, p), generator=g)
    outputs[0, 2] = (outputs[0, 0] + 1) % t
    W = torch.randn(Q, t, generator=g, dtype=dt)
    return kernel, mean, Z, m, S, X, designs, outputs, W


def _dense_moments(kernel, mean, Z, m, S, X, designs, outputs, W):
    r"""The latents' marginal from the unwhitened conditional: u = L v,
    g | u ~ N(μ + K_XZ K_ZZ⁻¹ u, K_XX − K_XZ K_ZZ⁻¹ K_ZX) with dense inverses."""
    with torch.no_grad():
        Kzz = kernel(Z).to_dense() + JITTER * torch.eye(Z.shape[-2], dtype=X.dtype)
        Kxz = kernel(X.expand(Z.shape[0], -1, -1), Z).to_dense()
        Kxx = kernel(X.expand(Z.shape[0], -1, -1)).to_dense()
        Kxx = Kxx + JITTER * torch.eye(X.shape[0], dtype=X.dtype)
        L = torch.linalg.cholesky(Kzz)
        P = Kxz @ torch.linalg.inv(Kzz)  # Q x u x M
        mu = mean(X.expand(Z.shape[0], -1, -1)) + (P @ L @ m.unsqueeze(-1)).squeeze(-1)
        cov = Kxx - P @ Kxz.transpose(-1, -2) + P @ L @ S @ L.transpose(-1, -2) @ P.mT
    k, p = designs.shape
    means = torch.zeros(k, p, dtype=X.dtype)
    covs = torch.zeros(k, p, p, dtype=X.dtype)
    for a in range(k):
        for i in range(p):
            wi = W[:, outputs[a, i]]
            means[a, i] = (wi * mu[:, designs[a, i]]).sum()
            for j in range(p):
                wj = W[:, outputs[a, j]]
                c = cov[:, designs[a, i], designs[a, j]]
                covs[a, i, j] = (wi * wj * c).sum()
    return means, covs, mu, cov


def test_moments_equal_the_dense_unwhitened_conditional():
    kernel, mean, Z, m, S, X, designs, outputs, W = _setup()
    with torch.no_grad():
        got_mean, got_cov = whitened_answer_moments(
            kernel, mean, Z, m, S, X, designs, outputs, W, jitter=JITTER
        )
    exp_mean, exp_cov, _, _ = _dense_moments(
        kernel, mean, Z, m, S, X, designs, outputs, W
    )
    assert got_mean.shape == (4, 3) and got_cov.shape == (4, 3, 3)
    torch.testing.assert_close(got_mean, exp_mean)
    torch.testing.assert_close(got_cov, exp_cov)


def test_moments_match_monte_carlo_draws_of_the_variational_posterior():
    kernel, mean, Z, m, S, X, designs, outputs, W = _setup(seed=1)
    with torch.no_grad():
        got_mean, got_cov = whitened_answer_moments(
            kernel, mean, Z, m, S, X, designs, outputs, W, jitter=JITTER
        )
    _, _, mu, cov = _dense_moments(kernel, mean, Z, m, S, X, designs, outputs, W)
    # draw the latent GPs at X, then the utilities each answer touches
    g = torch.Generator().manual_seed(0)
    n = 200_000
    eps = torch.randn(n, *mu.shape, 1, generator=g, dtype=X.dtype)
    draws = mu + (torch.linalg.cholesky(cov) @ eps).squeeze(-1)  # n x Q x u
    f = torch.einsum("nqu,qt->ntu", draws, W)  # n x t x u
    touched = f[:, outputs, designs]  # n x k x p
    torch.testing.assert_close(touched.mean(0), got_mean, rtol=0, atol=0.02)
    centred = touched - touched.mean(0)
    mc_cov = torch.einsum("nki,nkj->kij", centred, centred) / n
    torch.testing.assert_close(mc_cov, got_cov, rtol=0.03, atol=0.02)


def test_output_jitter_and_padding():
    kernel, mean, Z, m, S, X, designs, outputs, W = _setup(seed=2)
    with torch.no_grad():
        base_mean, base = whitened_answer_moments(
            kernel, mean, Z, m, S, X, designs, outputs, W, jitter=JITTER
        )
        _, jittered = whitened_answer_moments(
            kernel,
            mean,
            Z,
            m,
            S,
            X,
            designs,
            outputs,
            W,
            jitter=JITTER,
            output_jitter=0.5,
        )
        mask = torch.ones(4, 3, dtype=torch.bool)
        mask[1, 2] = False
        padded_mean, padded = whitened_answer_moments(
            kernel, mean, Z, m, S, X, designs, outputs, W, jitter=JITTER, mask=mask
        )
    same = (designs.unsqueeze(-1) == designs.unsqueeze(-2)) & (
        outputs.unsqueeze(-1) == outputs.unsqueeze(-2)
    )
    torch.testing.assert_close(jittered - base, 0.5 * same.to(base.dtype))
    assert padded_mean[1, 2] == 0 and padded[1, 2, 2] == 1
    assert (padded[1, 2, :2] == 0).all() and (padded[1, :2, 2] == 0).all()
    keep = mask.unsqueeze(-1) & mask.unsqueeze(-2)
    torch.testing.assert_close(padded[keep], base[keep])
    torch.testing.assert_close(padded_mean[mask], base_mean[mask])


def test_one_latent_with_an_unbatched_kernel():
    kernel, mean, Z, m, S, X, designs, outputs, W = _setup()
    k1 = ScaleKernel(RBFKernel()).double()
    with torch.no_grad():
        k1.outputscale = 1.3
        k1.base_kernel.lengthscale = 0.4
    eye = torch.eye(1, dtype=X.dtype)
    with torch.no_grad():
        got_mean, got_cov = whitened_answer_moments(
            k1,
            ConstantMean().double(),
            Z[0],
            m[0],
            S[0],
            X,
            designs,
            torch.zeros_like(outputs),
            eye,
            jitter=JITTER,
        )
        exp_mean, exp_cov, _, _ = _dense_moments(
            k1,
            ConstantMean().double(),
            Z[:1],
            m[:1],
            S[:1],
            X,
            designs,
            torch.zeros_like(outputs),
            eye,
        )
    torch.testing.assert_close(got_mean, exp_mean)
    torch.testing.assert_close(got_cov, exp_cov)
