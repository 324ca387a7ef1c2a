import torch

from prefbo.inducing import (
    MaxValueEntropyQuality,
)


def test_entropy_quality_sign_convention(tkwargs, make_pref_model):
    model = make_pref_model(**tkwargs)
    X = torch.rand(50, 2, **tkwargs)
    with torch.no_grad():
        mean = model.posterior(X).mean.squeeze(-1)
    samples = mean.max() + 0.3 * torch.randn(64, **tkwargs)
    q = MaxValueEntropyQuality(model, alpha=0.2, max_samples=samples)(X, 10)
    # IG decreases in γ = (μ* − ŷ)/σ*: the quality grows with the mean
    assert q.argmax() == mean.argmax() and q.max() == 1.0
    order = mean.argsort()
    assert (q[order].diff() >= 0).all()
    q_min = MaxValueEntropyQuality(
        model, alpha=0.2, max_samples=-samples, maximize=False
    )(X, 10)
    assert q_min.argmax() == mean.argmin()
    # the Gumbel fit (default) gives the same ordering
    q_gumbel = MaxValueEntropyQuality(model, alpha=0.2)(X, 10)
    assert (q_gumbel[order].diff() >= 0).all()


def test_thompson_max_moments(tkwargs64, make_pref_model):
    model = make_pref_model(**tkwargs64)
    # few, well-separated candidates: a well-conditioned joint covariance
    X = torch.tensor([[0.1, 0.1], [0.9, 0.2], [0.5, 0.5], [0.2, 0.9]], **tkwargs64)
    quality = MaxValueEntropyQuality(
        model, max_value_method="thompson", num_max_samples=4096
    )
    with torch.no_grad():
        post = model.posterior(X)
        mean = post.mean.squeeze(-1)
        mu, sd = quality.max_moments(X, mean)
        f = post.rsample(torch.Size([4096])).squeeze(-1).amax(-1)
    assert mu.shape == sd.shape == (1,)
    assert mu > mean.max()  # E[max] ≥ max E
    torch.testing.assert_close(mu, f.mean().view(1), rtol=0, atol=5 * f.std() / 64)
    torch.testing.assert_close(sd, f.std().view(1), rtol=0.1, atol=0)
