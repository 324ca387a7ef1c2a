"""``prefbo.models.skew_checks``: SkewGP's size guard, memory estimate,
consistency check and progress hook."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from prefbo.exceptions import InfeasibleConstraintsError, UnsupportedError
from prefbo.models.skew_checks import (
    check_consistent,
    check_skew_size,
    progress_hook,
    resample_memory_bytes,
    sampled_dimension,
)


def test_sampled_dimension_and_the_stated_sizes():
    assert [
        sampled_dimension(k, 10, 40) for k in ("probit", "none", "jnd", "shared")
    ] == [
        40,
        10,
        10,
        20,
    ]
    # the module docstring's figures: 1,000 and 10,000 probit answers, float64:
    # 4 m² numbers of 8 bytes and two m² masks of 1 byte, plus small terms
    small = 3 * 4 + 2 * 1000 * 2
    assert resample_memory_bytes("probit", 2, 1000, 1000, 0, 8) == (
        8 * (4 * 1000**2 + small) + 2 * 1000**2
    )
    assert resample_memory_bytes("probit", 2, 1000, 1000, 0, 8) / 1e6 == (
        pytest.approx(34, rel=0.01)
    )
    assert resample_memory_bytes("probit", 2, 10_000, 10_000, 0, 8) / 1e9 == (
        pytest.approx(3.4, rel=0.01)
    )


def test_check_skew_size():
    check_skew_size("probit", 5, 2000, 2000, 16, 8, 2000)
    check_skew_size("probit", 5, 10**6, 10**6, 16, 8, None)
    with pytest.raises(UnsupportedError, match=r"2001-dimensional.*PairwiseEPGP"):
        check_skew_size("probit", 5, 2001, 2001, 16, 8, 2000)


def test_check_consistent_names_the_cycle():
    check_consistent(torch.tensor([[0, 1], [1, 2]]), 3)
    with pytest.raises(InfeasibleConstraintsError, match="0 ≻ 1 ≻ 2 ≻ 0"):
        check_consistent(torch.tensor([[0, 1], [1, 2], [2, 0]]), 3)


def test_progress_hook_reports_done_and_total():
    calls = []
    bar, hook = progress_hook(lambda *a: calls.append(a), 10, 3)
    hook(4)
    hook(6)
    assert bar is None and calls == [(4, 10), (10, 10)]
    assert progress_hook(False, 10, 10**6) == (None, None)
    assert progress_hook(None, 10, 3) == (None, None)  # small: no bar
    bar, hook = progress_hook(None, 10, 500)  # large: a bar
    assert bar is not None and hook == bar.update
    bar.close()


@pytest.mark.slow  # a fresh interpreter: imports take seconds
def test_memory_estimate_bounds_the_measured_peak():
    """The peak resident memory of a SkewGP at m = 800 probit answers (4 m²
    float64 numbers, 20 MB, stated), measured in a fresh process from the
    kernel's high-water mark, is within the estimate and not far below it.

    glibc's malloc is told to map every block of 64 kB or more on its own, so
    that freed memory leaves the resident set and the high-water mark is what
    was alive at once, as the estimate counts.
    """
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc high-water mark")
    code = textwrap.dedent(
        """
        import torch
        from prefbo import SkewGP
        from prefbo.models.skew_checks import resample_memory_bytes
        g = torch.Generator().manual_seed(0)
        X = torch.rand(40, 2, generator=g, dtype=torch.float64)
        comp = torch.randint(0, 40, (2000, 2), generator=g)
        comp = comp[comp[:, 0] != comp[:, 1]][:800]
        kw = dict(num_samples=4, num_chains=2, burnin=0, thinning=0, seed=0)
        SkewGP(X[:3], torch.tensor([[0, 1], [1, 2]]), **kw)  # warm up torch
        def rss(key):
            for line in open("/proc/self/status"):
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        open("/proc/self/clear_refs", "w").write("5")
        base = rss("VmRSS:")
        model = SkewGP(X, comp, **kw)
        stated = resample_memory_bytes("probit", 40, 800, 800, 4, 8)
        print(rss("VmHWM:") - base, stated)
        """
    )
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    measured, stated = int(out[0]), int(out[1])
    assert 0.6 * stated <= measured <= stated
