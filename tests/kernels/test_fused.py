import gpytorch
import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

from prefbo.kernels import default_preference_covar_module
from prefbo.kernels.fused import ScaledRBFGram, prior_gram


def _module_gram(kernel, X):
    with gpytorch.settings.lazily_evaluate_kernels(False):
        return kernel(X).to_dense()


def _randomised(kernel, **tkwargs):
    kernel = kernel.to(**tkwargs)
    with torch.no_grad():
        ls = kernel.base_kernel.lengthscale
        kernel.base_kernel.lengthscale = 0.3 + torch.rand_like(ls)
        kernel.outputscale = 0.5 + 3 * torch.rand_like(kernel.outputscale)
    return kernel


def _grads(kernel, X, G, gram):
    kernel.zero_grad()
    K = gram(kernel, X)
    (K * G).sum().backward()
    return K.detach(), [p.grad.clone() for p in kernel.parameters()]


@pytest.mark.parametrize(
    "x_batch, k_batch",
    [((), ()), ((3,), ()), ((), (2,)), ((2,), (2,)), ((4, 1), (3,))],
)
def test_values_and_gradients_equal_gpytorch(tkwargs, x_batch, k_batch):
    X = torch.rand(*x_batch, 9, 3, **tkwargs)
    kernel = _randomised(
        default_preference_covar_module(3, batch_shape=torch.Size(k_batch)), **tkwargs
    )
    out_batch = torch.broadcast_shapes(x_batch, k_batch)
    G = torch.randn(*out_batch, 9, 9, **tkwargs)  # not symmetric on purpose
    K_ref, g_ref = _grads(kernel, X, G, _module_gram)
    K, g = _grads(kernel, X, G, prior_gram)
    assert K.shape == out_batch + (9, 9)
    tol = 1e-12 if tkwargs["dtype"] == torch.float64 else 1e-5
    torch.testing.assert_close(K, K_ref, rtol=tol, atol=tol)
    for a, b in zip(g, g_ref):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=100 * tol, atol=100 * tol)


@pytest.mark.parametrize("ard", [True, False])
def test_bitwise_gpytorch_values_with_and_without_graph(ard):
    # GPyTorch zeroes the diagonal's distances without a graph, and always in
    # its one-lengthscale path; a short lengthscale makes the quadratic
    # expansion's rounding visible there
    X = torch.rand(50, 6, dtype=torch.float64)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=6 if ard else None)).double()
    G = torch.randn(50, 50, dtype=torch.float64)
    K_ref, g_ref = _grads(kernel, X, G, _module_gram)
    K, g = _grads(kernel, X, G, prior_gram)
    torch.testing.assert_close(K, K_ref, rtol=0, atol=0)
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    with torch.no_grad():
        kernel.base_kernel.lengthscale = 0.01
    K = prior_gram(kernel, X)
    torch.testing.assert_close(K, _module_gram(kernel, X), rtol=0, atol=0)
    assert (K.diagonal() != kernel.outputscale).any() == ard
    with torch.no_grad():
        K_ref = _module_gram(kernel, X)
        assert (K_ref.diagonal() == kernel.outputscale).all()
        torch.testing.assert_close(prior_gram(kernel, X), K_ref, rtol=0, atol=0)


def test_gradient_matches_finite_differences():
    X = torch.rand(2, 6, 3, dtype=torch.float64)
    ls = (0.4 + torch.rand(2, 1, 3, dtype=torch.float64)).requires_grad_(True)
    os_ = (1.0 + torch.rand(2, dtype=torch.float64)).requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda a, b: ScaledRBFGram.apply(X, a, b, False), (ls, os_)
    )


def test_used_only_where_it_is_exact():
    X = torch.rand(5, 2, dtype=torch.float64)
    default = default_preference_covar_module(2)
    assert type(prior_gram(default, X).grad_fn).__name__ == "ScaledRBFGramBackward"

    class MyRBF(RBFKernel):
        pass

    others = [
        ScaleKernel(MyRBF(ard_num_dims=2)),  # subclasses may change forward
        ScaleKernel(MaternKernel(ard_num_dims=2)),
        ScaleKernel(RBFKernel(ard_num_dims=1, active_dims=[1])),
        RBFKernel(ard_num_dims=2),
    ]
    for kernel in others:
        kernel = kernel.to(torch.float64)
        K = prior_gram(kernel, X)
        assert "ScaledRBFGram" not in type(K.grad_fn).__name__
        torch.testing.assert_close(K, _module_gram(kernel, X))
    # inputs that need a gradient (a learnable input transform) go through
    # GPyTorch, which differentiates in the inputs too
    Xg = X.clone().requires_grad_(True)
    prior_gram(default, Xg).sum().backward()
    assert Xg.grad is not None and Xg.grad.abs().sum() > 0


def test_second_derivatives_are_refused_not_wrong():
    X = torch.rand(5, 2, dtype=torch.float64)
    ls = torch.full((1, 2), 0.5, dtype=torch.float64, requires_grad=True)
    os_ = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    K = ScaledRBFGram.apply(X, ls, os_, False)
    (g,) = torch.autograd.grad(K.sum(), ls, create_graph=True)
    with pytest.raises(
        RuntimeError, match="once_differentiable|twice|does not require grad"
    ):
        g.sum().backward()
