import warnings

import botorch.optim.closures.core as closures
import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.optim.fit import fit_gpytorch_mll_scipy
from gpytorch.constraints import Interval
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior, SmoothedBoxPrior

from prefbo import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.exceptions import InputTypeError
from prefbo.kernels import default_preference_covar_module
from prefbo.mlls import PairwiseEPMLL, PairwiseLaplaceMLL
from prefbo.mlls.bounds import box_prior_bounds

NAME = "model.covar_module.raw_outputscale"


def test_bounds_are_the_box_on_the_raw_scale(separable_data):
    X, comps = separable_data
    model = PairwiseLaplaceGP(X, comps)
    mll = PairwiseLaplaceMLL(model.likelihood, model)
    bounds = box_prior_bounds(mll)
    assert set(bounds) == {NAME}
    assert NAME in dict(mll.named_parameters())
    constraint = model.covar_module.raw_outputscale_constraint
    lo, hi = (constraint.transform(b) for b in bounds[NAME])
    torch.testing.assert_close(lo, torch.tensor([0.01], dtype=torch.float64))
    torch.testing.assert_close(hi, torch.tensor([100.0], dtype=torch.float64))


def test_batched_kernel_gets_one_bound_per_element():
    X = torch.rand(3, 6, 2, dtype=torch.float64)
    comps = torch.tensor([[0, 1], [2, 3]]).expand(3, 2, 2)
    kernel = default_preference_covar_module(2, batch_shape=torch.Size([3]))
    model = PairwiseLaplaceGP(X, comps, covar_module=kernel)
    lo, hi = box_prior_bounds(PairwiseLaplaceMLL(model.likelihood, model))[NAME]
    assert lo.shape == hi.shape == (3,)


def test_edges_beyond_the_constraint_are_left_to_it(separable_data):
    kernel = ScaleKernel(
        RBFKernel(ard_num_dims=2, lengthscale_prior=GammaPrior(2.4, 2.7)),
        outputscale_prior=SmoothedBoxPrior(0.01, 100.0),
        outputscale_constraint=Interval(0.05, 50.0),
    ).double()
    X, comps = separable_data
    model = PairwiseLaplaceGP(X, comps, covar_module=kernel)
    bounds = box_prior_bounds(PairwiseLaplaceMLL(model.likelihood, model))
    assert bounds == {NAME: (None, None)}
    plain = ScaleKernel(RBFKernel(ard_num_dims=2)).double()  # no box prior
    model = PairwiseLaplaceGP(X, comps, covar_module=plain)
    assert box_prior_bounds(PairwiseLaplaceMLL(model.likelihood, model)) == {}
    with pytest.raises(InputTypeError, match="mll must be"):
        box_prior_bounds(model)


@pytest.mark.parametrize(
    "model_cls, mll_cls",
    [(PairwiseLaplaceGP, PairwiseLaplaceMLL), (PairwiseEPGP, PairwiseEPMLL)],
)
def test_bounded_fit_reaches_a_better_optimum_in_fewer_evaluations(
    monkeypatch, model_cls, mll_cls, separable_data
):
    calls = [0]
    call = closures.ForwardBackwardClosure.__call__

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return call(self, *args, **kwargs)

    monkeypatch.setattr(closures.ForwardBackwardClosure, "__call__", counted)
    X, comps = separable_data
    out = {}
    for bounded in (False, True):
        model = model_cls(X, comps)
        mll = mll_cls(model.likelihood, model)
        kwargs = {"bounds": box_prior_bounds(mll)} if bounded else {}
        calls[0] = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # BoTorch's own optimiser both times: prefbo's default fit bounds
            fit_gpytorch_mll(
                mll, optimizer=fit_gpytorch_mll_scipy, optimizer_kwargs=kwargs
            )
        model.train()
        with torch.no_grad():
            value = mll(model(*model.train_inputs), model.train_targets).item()
        out[bounded] = calls[0], model.covar_module.outputscale.item(), value
    (n_free, os_free, v_free), (n_box, os_box, v_box) = out[False], out[True]
    # unbounded, L-BFGS-B crawls along the prior's wall and stops short of it
    assert os_free < 100.0 and os_box == pytest.approx(100.0, abs=1e-9)
    assert v_box > v_free
    assert n_box < n_free
