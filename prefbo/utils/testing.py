r"""Test helpers shared by prefbo's test suite (and usable by downstream code).

The suite runs every test body for each ``(device, dtype)`` in
:func:`test_configurations`: CPU always, CUDA when one is present, float64 and
float32, as BoTorch's ``utils/testing.py`` does with its ``device`` switch.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def test_configurations() -> list[tuple[torch.device, torch.dtype]]:
    r"""``(device, dtype)`` pairs the suite runs on."""
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    return [(d, t) for d in devices for t in (torch.float64, torch.float32)]


def tolerance(dtype: torch.dtype, float64: float, float32: float) -> float:
    r"""Pick a dtype-dependent tolerance."""
    return float64 if dtype == torch.float64 else float32


def make_pairwise_data(
    n: int,
    m: int,
    d: int = 2,
    batch_shape: torch.Size = torch.Size(),
    noise_std: float = 1.0,
    seed: int = 0,
    **tkwargs,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Synthetic designs, answers and true utilities.

    Designs are uniform in the unit cube, the utility is
    ``sin(3x)`` summed over features minus a quadratic bowl, and answers are
    probit-noisy with per-design noise ``noise_std``.

    Returns:
        ``(datapoints, comparisons, utility)`` of shapes ``batch_shape x n x d``,
        ``batch_shape x m x 2`` (long) and ``batch_shape x n``.
    """
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(batch_shape + (n, d), generator=g, dtype=torch.float64)
    u = torch.sin(3 * X).sum(-1) - 3 * (X - 0.5).pow(2).sum(-1)
    i = torch.randint(n, batch_shape + (m,), generator=g)
    j = (i + torch.randint(1, n, batch_shape + (m,), generator=g)) % n
    p = torch.special.ndtr(
        (u.gather(-1, i) - u.gather(-1, j)) / (math.sqrt(2) * noise_std)
    )
    first = torch.rand(batch_shape + (m,), generator=g, dtype=torch.float64) < p
    comp = torch.stack([torch.where(first, i, j), torch.where(first, j, i)], -1)
    device = tkwargs.get("device", "cpu")
    dtype = tkwargs.get("dtype", torch.float64)
    return X.to(device=device, dtype=dtype), comp.to(device), u.to(device, dtype)


def set_scale_kernel(model: torch.nn.Module, outputscale: float, lengthscale) -> None:
    r"""Set the outputscale and lengthscale(s) of a model whose
    ``covar_module`` is a ``ScaleKernel`` around a kernel with lengthscales."""
    with torch.no_grad():
        model.covar_module.outputscale = outputscale
        model.covar_module.base_kernel.lengthscale = lengthscale


def random_answers(seed: int) -> tuple[Tensor, Tensor]:
    r"""An outside trial's random data set: ``d`` in 1..5, ``n`` in 3..29
    designs uniform in the unit cube, ``m`` in 5..149 random answers (pairs of
    distinct designs, winner first), all drawn from ``seed``.

    Returns:
        ``(X, comparisons)``: ``n x d`` float64 and ``m' x 2`` long.
    """
    g = torch.Generator().manual_seed(seed)
    d = int(torch.randint(1, 6, (1,), generator=g))
    n = int(torch.randint(3, 30, (1,), generator=g))
    m = int(torch.randint(5, 150, (1,), generator=g))
    X = torch.rand(n, d, dtype=torch.float64, generator=g)
    comp = torch.randint(0, n, (m, 2), generator=g)
    return X, comp[comp[:, 0] != comp[:, 1]]
