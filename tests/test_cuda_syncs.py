r"""Host synchronisations on CUDA, counted with torch's sync debug mode.

Each test runs one path under ``torch.cuda.set_sync_debug_mode("warn")`` and
lists where the host waited for the device (file and line of the call). Skipped
without CUDA.
"""

from __future__ import annotations

import gc
import math
import threading
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import prefbo
from prefbo.acquisition import FastAnalyticEUBO, thompson_batch
from prefbo.inference.anderson import ANDERSON_FROM
from prefbo.models import PairwiseEPGP, PairwiseLaplaceGP
from prefbo.utils.testing import make_pairwise_data

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

PACKAGE = str(Path(prefbo.__file__).parent)
MODELS = {"laplace": PairwiseLaplaceGP, "ep": PairwiseEPGP}


@contextmanager
def host_syncs() -> Iterator[Counter]:
    r"""Count the synchronising CUDA calls this thread makes inside the block,
    by call site: the innermost frame and the innermost prefbo frame (garbage
    collection is paused, so that no finaliser runs inside)."""
    sites: Counter = Counter()
    thread = threading.get_ident()

    def record(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" not in str(message) or threading.get_ident() != thread:
            return
        frames = traceback.extract_stack()[:-1]
        ours = [f for f in frames if f.filename.startswith(PACKAGE)]
        where = f"{Path(filename).name}:{lineno}"
        if ours:
            where += f" via {Path(ours[-1].filename).name}:{ours[-1].lineno}"
        sites[where] += 1

    torch.cuda.synchronize()
    gc.collect()
    gc.disable()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield sites
        finally:
            torch.cuda.set_sync_debug_mode("default")
            gc.enable()


@pytest.fixture(autouse=True)
def _warm_sync_debug():
    with host_syncs():  # the first switch of the debug mode reads the device once
        pass


def _model(kind: str, dtype: torch.dtype, n: int = 40, batch: int = 0, d: int = 2):
    X, comp, _ = make_pairwise_data(n, 2 * n, d=d, seed=1, dtype=dtype)
    if batch:  # identical copies: the same iterations, B times the work
        X, comp = X.expand(batch, *X.shape), comp.expand(batch, *comp.shape)
    return MODELS[kind](X.cuda(), comp.cuda())


def fit_read_budget(kind: str, dtype: torch.dtype, its: int) -> int:
    r"""The host reads of a whitened-form fit of ``its`` iterations, at most.

    Laplace: the stiffness test every iteration and the convergence flags
    every 4th; once per solve the prior's Cholesky check, the factorisation
    check, the unconverged-warning test and the log determinant's two checks.
    EP, per sweep: the stiffness test, the factorisation check, the stall
    test, the convergence flags (and float32's holdability check), plus
    Anderson's acceptance test on each extrapolating sweep; once per solve
    the prior's Cholesky check, the end test and the final stiffness test.
    """
    if kind == "laplace":
        return its + math.ceil(its / 4) + 5
    per_sweep = 4 + (dtype == torch.float32)
    return per_sweep * its + max(0, its - ANDERSON_FROM) + 3


#: The larger problem's designs (float32's kernel matrix of 160 designs in 2-D
#: needs jitter, a warning and other reads).
LARGE_N = {torch.float64: 160, torch.float32: 40}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_fit_syncs_are_per_iteration_not_per_problem(kind, dtype):
    _model(kind, dtype).approximation  # noqa: B018 (CUDA's lazy initialisation)
    counts = []
    for batch in (0, 16):
        model = _model(kind, dtype, batch=batch)
        with host_syncs() as sites:
            state = model.approximation
        assert state.mode.device.type == "cuda"
        its = state.iterations
        assert sum(sites.values()) <= fit_read_budget(kind, dtype, its), (
            f"{kind} fit, {its} iterations, synchronised: {dict(sites)}"
        )
        counts.append((its, sum(sites.values())))
        print(
            f"SYNCS fit {kind} {dtype} B={batch or 1} iterations={its}: {dict(sites)}"
        )
    assert counts[0] == counts[1], f"{kind}: (iterations, syncs) {counts}"


def _posterior_syncs(model, X) -> Counter:
    model.posterior(X)  # the first call builds the caches
    with host_syncs() as sites, torch.no_grad():
        post = model.posterior(X)
        mean, variance = post.mean, post.variance
    assert bool(torch.isfinite(mean).all() & (variance > 0).all())
    return sites


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_posterior_syncs_are_few_and_fixed(kind, dtype):
    # the cache check, the test points' finiteness check, GPyTorch's kernel
    # (x1 == x2) and variance (clamp warning) checks
    small = _posterior_syncs(
        _model(kind, dtype).eval(), torch.rand(16, 2, 2, dtype=dtype, device="cuda")
    )
    large = _posterior_syncs(
        _model(kind, dtype, n=LARGE_N[dtype]).eval(),
        torch.rand(256, 2, 2, dtype=dtype, device="cuda"),
    )
    print(f"SYNCS posterior {kind} {dtype}: {dict(small)}")
    assert sum(small.values()) <= 4, f"{kind} posterior: {dict(small)}"
    assert small == large, f"{kind} posterior: {dict(small)} vs {dict(large)}"


def _eubo_syncs(model, b: int) -> Counter:
    acqf = FastAnalyticEUBO(model)
    X = torch.rand(b, 2, 2, dtype=model.datapoints.dtype, device="cuda")
    X.requires_grad_(True)
    acqf(X).sum().backward()  # the first call builds the caches
    X.grad = None
    with host_syncs() as sites:
        acqf(X).sum().backward()
    assert X.grad is not None and bool(torch.isfinite(X.grad).all())
    return sites


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_eubo_value_and_gradient_sync_once(dtype):
    # one read: the question points' finiteness check
    small = _eubo_syncs(_model("laplace", dtype).eval(), 16)
    large = _eubo_syncs(_model("laplace", dtype, n=LARGE_N[dtype]).eval(), 256)
    print(f"SYNCS EUBO {dtype}: {dict(small)}")
    assert sum(small.values()) <= 1, f"EUBO: {dict(small)}"
    assert small == large, f"EUBO: {dict(small)} vs {dict(large)}"


def _thompson_syncs(model, paths: int, steps: int) -> Counter:
    dtype = model.datapoints.dtype
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=dtype, device="cuda")
    kwargs = {"raw_samples": 64, "num_restarts": 2, "num_steps": steps, "seed": 0}
    thompson_batch(model, bounds, paths, **kwargs)
    with host_syncs() as sites:
        out = thompson_batch(model, bounds, paths, **kwargs)
    assert out.shape == (paths, 2) and out.device.type == "cuda"
    return sites


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_thompson_batch_syncs_do_not_grow_with_paths_or_steps(dtype):
    # the bounds check, the cache check, and two blocking host-to-device
    # copies in BoTorch's random-feature draws
    small = _thompson_syncs(_model("laplace", dtype).eval(), 8, 3)
    model = _model("laplace", dtype, n=LARGE_N[dtype]).eval()
    large = _thompson_syncs(model, 512, 12)
    print(f"SYNCS thompson_batch {dtype}: {dict(small)}")
    assert sum(small.values()) <= 4, f"thompson_batch: {dict(small)}"
    assert small == large, f"thompson_batch: {dict(small)} vs {dict(large)}"
