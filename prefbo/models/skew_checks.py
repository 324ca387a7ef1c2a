r"""What :class:`~prefbo.models.SkewGP` checks before it samples, and how it
reports a long run.

Size. The sampled dimension ``p`` (:func:`sampled_dimension`) is ``m`` (the
answers) for the probit model, ``n`` (the designs) for ``"none"`` and
``"jnd"`` and ``2n`` for ``"shared"``. A probit resample holds ``3 p²``
numbers while it samples (the factor of ``Σ``, the constraint matrix ``-I``
and the sampler's precision) and ``2 p²`` plus three copies of the ``S x p``
draws while it forms their weights; with many designs the ``S x n`` weights
and ``Q = Dᵀ Σ⁻¹ D`` (``n x n``) add to that. The hard-constraint models
also hold their ``k x p`` constraint matrix, and the linear programs that
find their start about 25 times that. See :func:`resample_memory_bytes`:
1,000 probit answers about 2 designs in float64 with the default 2048 draws
take at most about 68 MB, 10,000 about 2.8 GB, 300 answers about 1,000
designs 46 MB, beside a fixed cost of about 50 MB for a process's first
resample. A Gibbs sweep is ``p`` sequential coordinate updates, so the run
time grows with ``p`` times the sweeps
(``burnin + ceil(num_samples / num_chains) (thinning + 1)``). Above
``max_dimension`` :func:`check_skew_size` refuses, naming
:class:`~prefbo.models.PairwiseEPGP`, whose cost is cubic in the ``n``
designs however many answers there are.

Consistency. ``noise="none"`` needs answers without a cycle
(:func:`check_consistent`).

Progress. :func:`progress_hook` turns ``SkewGP``'s ``progress`` argument
into the samplers' ``progress`` hook (a tqdm bar, or a callable told
``(done, total)``).

Arguments. :func:`check_skew_data`, :func:`check_jnd`,
:func:`sampler_options` and :func:`check_progress` check the constructor's
data, just-noticeable-difference, sampler and progress arguments.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from torch import Tensor
from tqdm import tqdm

from prefbo.data.validation import (
    validate_comparisons,
    validate_datapoints,
    validate_pairwise_data,
)
from prefbo.exceptions import (
    InfeasibleConstraintsError,
    InputDataError,
    InputTypeError,
    UnsupportedError,
)
from prefbo.utils.checks import check_int, check_positive_float, check_seed

AUTO_PROGRESS_DIM = 500  # progress=None shows a bar from this sampled dimension


def sampled_dimension(noise: str, n: int, m: int) -> int:
    r"""``p``, the dimension of the truncated normal a ``SkewGP`` samples:
    ``m`` answers (probit), ``n`` designs (none, jnd) or ``2n`` (shared)."""
    return m if noise == "probit" else 2 * n if noise == "shared" else n


def resample_memory_bytes(
    noise: str,
    n: int,
    m: int,
    k: int,
    num_samples: int,
    itemsize: int,
    *,
    num_chains: int = 1,
) -> int:
    r"""An upper estimate of the peak memory of ``SkewGP.resample``.

    The largest of what is alive at once in each phase of a resample, with
    ``p`` the sampled dimension (:func:`sampled_dimension`), ``S`` the
    stored draws and ``S' = ceil(S / C) C`` the rows of the ``C`` chains'
    draw buffer, in numbers of ``itemsize`` bytes:

    - probit, the kernel: ``n²`` beside ``K`` while GPyTorch evaluates it;
      ``Σ = D K Dᵀ``: ``m n + p²``;
    - probit, sampling: ``3 p²``, the factor ``L`` of ``Σ``, the constraint
      matrix ``-I`` and the sampler's precision (Gibbs' conditional weights,
      LinESS's transposed root), plus the draws, ``S' p``;
    - probit, the weights ``(Σ⁻¹ rᵀ)ᵀ D`` of the draws:
      ``2 p² + S' p + 2 S p + S n``, ``L`` and the copy of it that
      ``torch.cholesky_solve`` works on, the draws, two solved copies and
      the ``S x n`` weights; then ``Q = Dᵀ Σ⁻¹ D``:
      ``p² + S' p + S n + 2 m n + n²``. With many designs (``S n``, ``n²``)
      these are the peak, with few the sampling is, from about ``p = S``;
    - hard constraints: ``3 n²`` while ``K`` gets its nugget; finding the
      start, the root and the constraints (``p² + k p``) and the two linear
      programs of ``find_interior_point``, whose dense whitened copies SciPy
      and HiGHS copy again: measured below ``16 p² + 24 k p`` float64
      numbers (about 25 times the ``k x p`` constraint matrix; 400 and 800
      designs with 2 answers a design, 400 with 4); sampling,
      ``2 p² + 2 k p + S' p`` (the root, the precision, the dense ``k x p``
      constraint matrix and its transpose, the draws); the weights,
      ``3 n² + S' p + S n``. ``"shared"`` keeps the factor of ``K``
      (``n²``) beside its root while it finds the start and samples.

    Alive throughout and added: ``K`` and the ``m x n`` difference matrix
    ``D`` with the chains' states, ``n² + m n + C (4 p + k)`` (probit), or
    ``3 n² + 2 m n + C (4 p + k)`` (the kernel matrices, ``D``, the states),
    and two boolean ``k x p`` masks of the constraint matrix (one byte an
    entry).

    Not counted, as they do not grow with the problem: the workspace of the
    linear-algebra library and the buffers it keeps for reuse (MKL: about
    6 MB per thread, 12-15 MB with 2 threads), LinESS's noise blocks
    (``2¹⁷`` numbers each, a few MB), and the one-off cost of a process's
    first resample (about 50 MB: MKL and OpenMP start-up, code paged in; up
    to ~90 MB at 2,000 designs). Freed blocks that glibc keeps in its heap
    are not counted either: with its default thresholds the resident peak
    of a warm process at 2,000 designs and 1,000 answers was up to 25 MB
    above this count in 2 of 5 runs (167 MB, below it, with
    ``MALLOC_MMAP_THRESHOLD_=65536``). The probit model writes ``-I`` into
    the memory of ``Σ`` once ``Σ`` is factored: freeing that ``m x m`` block
    raised glibc's adaptive mmap threshold, so the sampler's ``m x m`` blocks
    went to the heap and stayed resident past sampling (22 MB above this
    count at 1,600 answers).
    ``benchmarks/skew_memory.py`` measures the peak against this estimate.

    Args:
        noise: The noise model.
        n: Designs.
        m: Answers.
        k: Constraint rows (``m``, plus ``2 m_b`` indiscernible rows for jnd).
        num_samples: Stored draws ``S``.
        itemsize: Bytes per number (8 for float64).
        num_chains: Chains ``C``, which draw ``ceil(S / C)`` each.

    Returns:
        Bytes.
    """
    p = sampled_dimension(noise, n, m)
    kept = -(-num_samples // num_chains) * num_chains  # the chains' draw buffer
    if noise == "probit":
        phases = [
            n * n,
            m * n + p * p,
            3 * p * p + kept * p,
            2 * p * p + kept * p + 2 * num_samples * p + num_samples * n,
            p * p + kept * p + num_samples * n + 2 * m * n + n * n,
        ]
        small = n * n + m * n + num_chains * (4 * p + k)
        return itemsize * (max(phases) + small) + 2 * k * p
    else:
        factor = n * n if noise == "shared" else 0  # K's factor beside the root
        start = p * p + factor + k * p + (8 * (16 * p * p + 24 * k * p)) // itemsize
        phases = [
            3 * n * n,
            start,
            2 * p * p + factor + 2 * k * p + kept * p,
            3 * n * n + kept * p + num_samples * n,
        ]
    small = 3 * n * n + 2 * m * n + num_chains * (4 * p + k)
    return itemsize * (max(phases) + small) + 2 * k * p


def check_skew_size(
    noise: str,
    n: int,
    m: int,
    k: int,
    num_samples: int,
    itemsize: int,
    max_dimension: int | None,
    *,
    num_chains: int = 1,
) -> None:
    r"""Refuse a sampled dimension above ``max_dimension`` (``None``: any).

    Args: as :func:`resample_memory_bytes`, and ``max_dimension``.

    Raises:
        UnsupportedError: Naming the dimension, the memory it would need,
            ``PairwiseEPGP`` and how to lift the limit.
    """
    p = sampled_dimension(noise, n, m)
    if max_dimension is None or p <= max_dimension:
        return
    need = resample_memory_bytes(
        noise, n, m, k, num_samples, itemsize, num_chains=num_chains
    )
    what = f"{m} answers" if noise == "probit" else f"{n} designs"
    raise UnsupportedError(
        f"SkewGP(noise={noise!r}) would sample a {p}-dimensional truncated normal "
        f"({what}), needing about {need / 1e9:.2g} GB and sweeps of {p} sequential "
        f"updates; that is above max_dimension={max_dimension}. Use PairwiseEPGP "
        f"(the EP approximation of this posterior, cubic in the {n} designs however "
        "many answers), or pass max_dimension=None (or a larger value) to sample "
        "anyway."
    )


def progress_hook(
    progress: bool | Callable[[int, int], None] | None, total: int, p: int
) -> tuple[Any, Callable[[int], None] | None]:
    r"""The samplers' ``progress`` hook for ``total`` transitions.

    Args:
        progress: ``True`` (a tqdm bar on stderr), ``False`` (none), a
            callable told ``(done, total)`` transitions, or ``None`` (the bar
            when ``p >= AUTO_PROGRESS_DIM``).
        total: Transitions the run will make.
        p: The sampled dimension.

    Returns:
        ``(bar, hook)``: the tqdm bar to close (or ``None``) and the hook
        (or ``None``).
    """
    if progress is None:
        progress = p >= AUTO_PROGRESS_DIM
    if progress is True:
        bar = tqdm(total=total, desc="SkewGP sampling", unit="sweep", file=sys.stderr)
        return bar, bar.update
    if progress is False:
        return None, None
    report, done = progress, [0]

    def hook(steps: int) -> None:
        done[0] += steps
        report(done[0], total)

    return None, hook


def find_preference_cycle(comparisons: Tensor, n: int) -> list[int] | None:
    r"""A directed cycle ``[a, b, …, a]`` in "winner beats loser" edges, if any."""
    succ: dict[int, list[int]] = {i: [] for i in range(n)}
    for w, l in comparisons.tolist():
        succ[w].append(l)
    state = [0] * n  # 0 new, 1 on stack, 2 done
    parent = [-1] * n
    for root in range(n):
        if state[root]:
            continue
        stack = [(root, iter(succ[root]))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state[nxt] == 1:  # back edge: a cycle
                cycle, cur = [nxt], node
                while cur != nxt:
                    cycle.append(cur)
                    cur = parent[cur]
                cycle.append(nxt)
                return cycle[::-1]
            elif state[nxt] == 0:
                parent[nxt] = node
                state[nxt] = 1
                stack.append((nxt, iter(succ[nxt])))
    return None


def check_consistent(comparisons: Tensor, n: int) -> None:
    r"""Raise if the answers (``m x 2`` ``[winner, loser]`` indices into ``n``
    designs) contain a cycle, which ``noise="none"`` cannot hold."""
    cycle = find_preference_cycle(comparisons, n)
    if cycle is not None:
        raise InfeasibleConstraintsError(
            "noise='none' (consistent preferences) cannot hold: the answers "
            f"contain the cycle {' ≻ '.join(map(str, cycle))}. Use a noisy "
            "model (noise='probit' or 'shared')."
        )


def check_skew_data(datapoints: Tensor, comparisons: Tensor) -> tuple[Tensor, Tensor]:
    r"""Validate SkewGP's data: ``n x d`` designs and ``m x 2`` ``[winner,
    loser]`` rows into them, unbatched.

    Returns:
        The validated ``(datapoints, comparisons)``.

    Raises:
        InputDataError: Malformed data.
        UnsupportedError: Batched data.
    """
    datapoints = validate_datapoints(datapoints)
    datapoints, comparisons = validate_pairwise_data(datapoints, comparisons)
    if datapoints.ndim != 2:
        raise UnsupportedError(
            "SkewGP takes unbatched data (n x d designs, m x 2 comparisons); got "
            f"datapoints of shape {tuple(datapoints.shape)}."
        )
    return datapoints, comparisons


def check_jnd(
    noise: str, jnd_threshold: object, indiscernible: Tensor | None, n: int
) -> tuple[float | None, Tensor | None]:
    r"""Check the just-noticeable-difference arguments: a finite
    ``jnd_threshold > 0`` with ``noise="jnd"``, neither argument otherwise,
    and ``indiscernible`` ``m_b x 2`` pairs of ``n`` designs.

    Returns:
        The checked ``(jnd_threshold, indiscernible)``.

    Raises:
        InputDataError: A missing, non-positive or non-finite threshold, an
            argument given with another ``noise``, or malformed pairs.
        InputTypeError: A non-numeric threshold.
    """
    if noise == "jnd":
        if jnd_threshold is None:
            raise InputDataError(
                "noise='jnd' needs jnd_threshold > 0 (finite, the "
                "just-noticeable difference δ); got None."
            )
        jnd_threshold = check_positive_float("jnd_threshold", jnd_threshold)
    elif jnd_threshold is not None or indiscernible is not None:
        raise InputDataError(
            "jnd_threshold and indiscernible apply to noise='jnd' only; got "
            f"noise={noise!r}."
        )
    if indiscernible is not None:
        indiscernible = validate_comparisons(indiscernible, n=n, name="indiscernible")
    return jnd_threshold, indiscernible


def sampler_options(
    sampler: str,
    num_chains: object,
    burnin: object,
    thinning: object,
    seed: object,
) -> dict[str, Any]:
    r"""Check ``sampler`` (``"gibbs"`` or ``"lin_ess"``) and its options;
    ``burnin`` and ``thinning`` default to 200 and 8 Gibbs sweeps or 1000 and
    4 LinESS steps.

    Returns:
        The sampler's ``num_chains``, ``burnin``, ``thinning`` and ``seed``.

    Raises:
        InputDataError: An unknown ``sampler`` or a count below its minimum.
        InputTypeError: A count or ``seed`` that is not an integer.
    """
    if sampler not in ("gibbs", "lin_ess"):
        raise InputDataError(f"sampler must be 'gibbs' or 'lin_ess'; got {sampler!r}.")
    gibbs = sampler == "gibbs"
    if burnin is None:
        burnin = 200 if gibbs else 1000
    if thinning is None:
        thinning = 8 if gibbs else 4
    return {
        "num_chains": check_int("num_chains", num_chains, 1),
        "burnin": check_int("burnin", burnin, 0),
        "thinning": check_int("thinning", thinning, 0),
        "seed": check_seed("seed", seed, allow_none=True),
    }


def check_progress(progress: object) -> None:
    r"""``progress`` must be a bool, a callable ``progress(done, total)`` or
    ``None``.

    Raises:
        InputTypeError: Naming the type that came.
    """
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise InputTypeError(
            "progress must be a bool, a callable progress(done, total) or "
            f"None; got {type(progress).__name__}."
        )
