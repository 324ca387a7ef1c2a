import itertools
import math

import pytest
import torch

from prefbo.exceptions import (
    InputDataError,
    InputTypeError,
)
from prefbo.inducing import (
    ConditionalVarianceReduction,
    greedy_dpp_map,
)
from prefbo.utils.testing import tolerance


@pytest.mark.parametrize("with_quality", [False, True])
def test_greedy_steps_are_optimal_by_brute_force(tkwargs, with_quality, make_kernel):
    """Each greedy step maximises log det L_S over all subsets extending the prefix.

    Independent of the incremental Cholesky: dense ``L = diag(q) K diag(q)`` and
    ``slogdet`` over every subset, and the conditional variance by a solve.
    """
    n, m = 7, 4
    X = torch.rand(n, 2, **tkwargs)
    kernel = make_kernel(lengthscale=0.5, **tkwargs)
    q = 0.5 + torch.rand(n, **tkwargs) if with_quality else None
    idx, num = greedy_dpp_map(X, kernel, m, quality=q)
    assert num == m
    chosen = idx.tolist()
    assert len(set(chosen)) == m
    if q is None:  # stationary kernel: all prior variances tie, lowest index wins
        assert chosen[0] == 0
    with torch.no_grad():
        K = kernel(X).to_dense().double()
    qq = torch.ones_like(K)[0] if q is None else q.double()
    L = qq[:, None] * K * qq[None, :]
    atol = tolerance(tkwargs["dtype"], 1e-9, 1e-4)
    for step in range(1, m + 1):
        prefix = set(chosen[: step - 1])
        best = max(
            _logdet(L, s)
            for s in itertools.combinations(range(n), step)
            if prefix <= set(s)
        )
        assert _logdet(L, chosen[:step]) >= best - atol
        # the same step as "largest q² x conditional variance", by a solve
        S = torch.tensor(chosen[: step - 1], dtype=torch.long)
        cond = K.diagonal().clone()
        if step > 1:
            KSx = K[S]  # (step-1) x n
            cond -= (KSx * torch.linalg.solve(K[S][:, S], KSx)).sum(0)
        score = qq.square() * cond
        score[S] = -math.inf
        assert score[chosen[step - 1]] >= score.max() - atol


def test_float32_low_rank_kernel_stops_cleanly(tkwargs, make_kernel):
    # a very long lengthscale: the kernel matrix has a tiny numerical rank
    X = torch.linspace(0, 1, 200, **tkwargs).unsqueeze(-1)
    kernel = make_kernel(d=1, lengthscale=5.0, **tkwargs)
    idx, num = greedy_dpp_map(X, kernel, 50)
    assert 2 <= num < 50
    assert len(set(idx.tolist())) == 50
    chosen = X[idx[:num]]
    with torch.no_grad():
        Kzz = kernel(chosen).to_dense().double() / 1.7
    # the genuine choices keep K_ZZ factorisable without extra jitter
    assert torch.linalg.cholesky_ex(Kzz).info == 0


def test_greedy_dpp_map_argument_types_raise_typed_errors(make_kernel):
    X = torch.rand(10, 2, dtype=torch.float64)
    kernel = make_kernel(dtype=torch.float64)
    for bad in ("rbf", lambda a, b=None, diag=False: a):
        with pytest.raises(
            InputTypeError, match=r"covar_module must be a GPyTorch Kernel; got"
        ):
            greedy_dpp_map(X, bad, 3)
    with pytest.raises(
        InputTypeError, match=r"tol must be None or a float in \[0, 1\); got str 'a'"
    ):
        greedy_dpp_map(X, kernel, 3, tol="a")
    with pytest.raises(InputTypeError, match=r"tol must be None or a float .*got bool"):
        greedy_dpp_map(X, kernel, 3, tol=True)
    for bad in (-1.0, 1.0, math.nan):
        with pytest.raises(
            InputDataError, match=r"tol must be None or a float in \[0, 1\); got tol="
        ):
            greedy_dpp_map(X, kernel, 3, tol=bad)
    with pytest.raises(InputTypeError, match=r"tol must be None or a float .*got str"):
        ConditionalVarianceReduction(tol="a")
    # an integer tolerance 0 is a valid float tolerance
    idx, _ = greedy_dpp_map(X, kernel, 3, tol=0)
    assert idx.shape == (3,)


def _logdet(L, subset):
    idx = torch.tensor(subset)
    return torch.linalg.slogdet(L[idx][:, idx].double())[1].item()
