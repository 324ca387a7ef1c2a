r"""Benchmark prefbo's ``PairwiseLaplaceGP`` against BoTorch's ``PairwiseGP``.

Both models are fitted, in the same run, to the *same* synthetic preference data
(``d = 4``, float64) and measured on:

1. **fit time**: model construction plus ``botorch.fit.fit_gpytorch_mll`` (one
   untimed warm-up fit on a small problem runs first, so that import and
   first-call costs are excluded; it has ``n = 150`` designs, so that
   prefbo's sparse-Laplacian path is warm too); the median of
   ``--fit-repeats`` fresh fits (default 3) for ``n <= 400``, one fit above,
   the two libraries' fits interleaved (prefbo, BoTorch, prefbo, ...);
2. **posterior time**: one ``model.posterior(X)`` call with ``X`` of shape
   ``64 x 2 x 4`` (64 ``q = 2`` batches), under ``torch.no_grad()``, including
   reading the mean and the joint covariance; the median over repeats is
   reported (the first call after fitting, which may refresh cached
   factorisations, is reported separately);
3. **EUBO time**: ``optimize_acqf`` on
   ``AnalyticExpectedUtilityOfBestOption(pref_model=model)`` over the unit cube
   with ``q = 2`` and identical ``num_restarts`` / ``raw_samples`` / seed;
4. **held-out ranking accuracy**: the fraction of random pairs of fresh test
   designs whose order by posterior mean matches the order by true utility,
   plus the largest absolute difference between the two libraries' posterior
   means on the test designs (small when the fitted hyperparameters agree).

A batched section fits ``B`` independent data sets (one per "user") with one
batched prefbo fit (``B x n x d`` datapoints, per-batch hyperparameters), with
``B`` sequential prefbo fits, and with ``B`` sequential BoTorch fits.

Data:
    Designs are uniform on ``[0, 1]^4``. The true utility is a sum of sines plus
    a quadratic bowl::

        u(x) = sum_k sin(3 x_k + k / 2) - 3 ||x - c||^2,   k = 0..3,
        c = (0.3, 0.5, 0.6, 0.4).

    ``m`` distinct unordered pairs of designs are drawn at random; the pair
    ``(i, j)`` is answered "``i`` preferred" with probability
    ``Phi((u_i - u_j) / sqrt(2))`` (probit noise with unit utility noise, the
    default likelihood of both models). The test set is 500 fresh designs and
    2000 random distinct pairs of them. Everything is drawn from seeded
    ``torch.Generator`` objects.

Warnings raised by either library are recorded and counted (never raised), and
a failure of one library at one size is written into its table cells as
``error: ...`` without stopping the run.

Usage::

    python -m benchmarks laplace_vs_botorch                  # full run
    python -m benchmarks laplace_vs_botorch --quick          # a few seconds
    python -m benchmarks laplace_vs_botorch --sizes 200:1000,400:2000 \
        --skip-botorch-above 800 --seed 1

The markdown report is printed and written to
``benchmarks/results/laplace_vs_botorch.md`` (or ``--output``; ``--quick``
writes to ``<tempdir>/prefbo-quick/``); progress goes to stderr.

Timings are wall-clock medians (fits: of 3 up to n = 400, single above) with
torch's default thread count; on a machine shared with other CPU-heavy work
they can be inflated many times over, so compare libraries within one run.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from copy import deepcopy
from pathlib import Path
from typing import Any, NamedTuple

import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP
from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood
from botorch.optim import optimize_acqf
from torch import Tensor

import prefbo
from benchmarks.harness import environment, reports
from prefbo.mlls import PairwiseLaplaceMLL
from prefbo.models import PairwiseLaplaceGP

DIM = 4
DTYPE = torch.float64
CENTRE = (0.3, 0.5, 0.6, 0.4)
DEFAULT_SIZES = ((200, 1000), (400, 2000), (800, 4000), (1600, 8000))
QUICK_SIZES = ((100, 500), (200, 1000))
DEFAULT_BATCH_SIZE = 32
QUICK_BATCH_SIZE = 4
PREFBO, BOTORCH = "prefbo", "BoTorch"
LIBRARIES: dict[str, tuple[type, type]] = {
    PREFBO: (PairwiseLaplaceGP, PairwiseLaplaceMLL),
    BOTORCH: (PairwiseGP, PairwiseLaplaceMarginalLogLikelihood),
}
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "laplace_vs_botorch.md"

Cell = float | str | None  # a number, an "error: ..." / "skipped" text, or n/a


# --------------------------------------------------------------------- data
class Problem(NamedTuple):
    """One synthetic preference data set with its held-out test set.

    Attributes:
        datapoints: ``n x d`` training designs.
        comparisons: ``m x 2`` long ``[winner, loser]`` rows.
        test_X: ``n_test x d`` held-out designs.
        test_u: ``n_test`` true utilities of the held-out designs.
        test_pairs: ``n_pairs x 2`` distinct pairs of held-out designs.
    """

    datapoints: Tensor
    comparisons: Tensor
    test_X: Tensor
    test_u: Tensor
    test_pairs: Tensor


def utility(X: Tensor) -> Tensor:
    r"""The known utility ``sum_k sin(3 x_k + k/2) - 3 ||x - c||^2``.

    Args:
        X: ``... x 4`` designs in ``[0, 1]^4``.

    Returns:
        A ``...`` tensor of utilities.
    """
    phase = 0.5 * torch.arange(X.shape[-1], dtype=X.dtype, device=X.device)
    centre = torch.tensor(CENTRE, dtype=X.dtype, device=X.device)
    return torch.sin(3.0 * X + phase).sum(-1) - 3.0 * ((X - centre) ** 2).sum(-1)


def sample_distinct_pairs(n: int, m: int, generator: torch.Generator) -> Tensor:
    """Draw ``m`` distinct unordered pairs ``{i, j}``, ``i != j``, of ``range(n)``.

    Args:
        n: Number of items.
        m: Number of pairs; at most ``n (n - 1) / 2``.
        generator: The random number generator.

    Returns:
        An ``m x 2`` long tensor, each row in random order.

    Raises:
        ValueError: If there are fewer than ``m`` distinct pairs.
    """
    total = n * (n - 1) // 2
    if m > total:
        raise ValueError(f"cannot draw {m} distinct pairs from {n} items ({total}).")
    all_pairs = torch.triu_indices(n, n, offset=1)  # 2 x total
    pairs = all_pairs[:, torch.randperm(total, generator=generator)[:m]].T
    swap = torch.rand(m, generator=generator) < 0.5
    return torch.where(swap.unsqueeze(-1), pairs.flip(-1), pairs).contiguous()


def make_problem(
    n: int, m: int, n_test: int, n_test_pairs: int, generator: torch.Generator
) -> Problem:
    r"""Draw designs, probit-noisy answers and a held-out test set.

    Args:
        n: Number of training designs.
        m: Number of answered (distinct) pairs.
        n_test: Number of held-out designs.
        n_test_pairs: Number of distinct held-out pairs for the accuracy.
        generator: The random number generator.

    Returns:
        The :class:`Problem`.
    """
    X = torch.rand(n, DIM, generator=generator, dtype=DTYPE)
    u = utility(X)
    pairs = sample_distinct_pairs(n, m, generator)
    z = (u[pairs[:, 0]] - u[pairs[:, 1]]) / math.sqrt(2.0)
    first_wins = torch.rand(m, generator=generator, dtype=DTYPE) < torch.special.ndtr(z)
    comparisons = torch.where(first_wins.unsqueeze(-1), pairs, pairs.flip(-1))
    test_X = torch.rand(n_test, DIM, generator=generator, dtype=DTYPE)
    test_pairs = sample_distinct_pairs(n_test, n_test_pairs, generator)
    return Problem(X, comparisons.contiguous(), test_X, utility(test_X), test_pairs)


# ----------------------------------------------------------------- warnings
@contextmanager
def recording(*counters: Counter) -> Iterator[None]:
    """Record every warning raised inside the block into ``counters``.

    Warnings are counted by ``(category, first line of the message)`` and are
    never raised, whatever the active warning filters (e.g. pytest's
    ``filterwarnings = error``).

    Args:
        *counters: The counters to add the warnings to.

    Yields:
        Nothing.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:
                text = str(w.message).strip().splitlines()
                key = (w.category.__name__, (text[0] if text else "")[:160])
                for counter in counters:
                    counter[key] += 1


def error_text(exc: BaseException) -> str:
    """A one-line, table-safe description of an exception.

    Args:
        exc: The exception.

    Returns:
        ``"error: Type: message"``, truncated to 120 characters.
    """
    msg = " ".join(str(exc).split())
    text = f"error: {type(exc).__name__}: {msg}".replace("|", "/")
    return text if len(text) <= 120 else text[:117] + "..."


# --------------------------------------------------------------- measuring
def fit_model(library: str, problem: Problem) -> tuple[Any, float]:
    """Construct and fit one library's model, timing both steps together.

    Args:
        library: ``"prefbo"`` or ``"BoTorch"``.
        problem: The data (``datapoints`` may carry a batch dimension).

    Returns:
        The fitted model (in eval mode) and the wall time in seconds.
    """
    model_cls, mll_cls = LIBRARIES[library]
    t0 = time.perf_counter()
    model = model_cls(problem.datapoints, problem.comparisons)
    mll = mll_cls(model.likelihood, model)
    fit_gpytorch_mll(mll)
    elapsed = time.perf_counter() - t0
    model.eval()
    return model, elapsed


def time_posterior(model: Any, X: Tensor, repeats: int) -> tuple[float, float]:
    """Time ``model.posterior(X)`` including reading its mean and covariance.

    Args:
        model: A fitted model.
        X: ``b x q x d`` test points.
        repeats: Number of timed calls (at least 1).

    Returns:
        ``(first call, median of the calls)`` in seconds.
    """
    times = []
    with torch.no_grad():
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            posterior = model.posterior(X)
            _ = posterior.mean, posterior.mvn.covariance_matrix
            times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times)


def time_eubo(model: Any, args: argparse.Namespace) -> tuple[float, float]:
    """Time ``optimize_acqf`` on the analytic EUBO of ``model`` (``q = 2``).

    The global torch RNG is seeded with ``args.seed`` inside a forked RNG
    state, and the same seed is passed to the initial-condition generator, so
    that both libraries start from the same raw samples.

    Args:
        model: A fitted preference model.
        args: The parsed command line (``num_restarts``, ``raw_samples``,
            ``acqf_maxiter``, ``seed``).

    Returns:
        ``(seconds, EUBO value at the returned candidate pair)``.
    """
    bounds = torch.stack([torch.zeros(DIM, dtype=DTYPE), torch.ones(DIM, dtype=DTYPE)])
    with torch.random.fork_rng():
        torch.manual_seed(args.seed)
        t0 = time.perf_counter()
        acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
        _, value = optimize_acqf(
            acqf,
            bounds=bounds,
            q=2,
            num_restarts=args.num_restarts,
            raw_samples=args.raw_samples,
            options={"seed": args.seed, "maxiter": args.acqf_maxiter},
        )
        elapsed = time.perf_counter() - t0
    return elapsed, float(value.max())


def posterior_mean(model: Any, X: Tensor) -> Tensor:
    """Posterior mean of the utility.

    Args:
        model: A fitted model.
        X: ``[batch x] n_test x d`` designs.

    Returns:
        The ``[batch x] n_test`` posterior mean.
    """
    with torch.no_grad():
        return model.posterior(X).mean.squeeze(-1)


def ranking_accuracy(mean: Tensor, true_u: Tensor, pairs: Tensor) -> Tensor:
    """Fraction of pairs ordered the same way by ``mean`` and by ``true_u``.

    Args:
        mean: ``[batch x] n_test`` predicted utilities.
        true_u: ``[batch x] n_test`` true utilities.
        pairs: ``[batch x] n_pairs x 2`` index pairs.

    Returns:
        The ``[batch]`` accuracies.
    """
    i, j = pairs[..., 0], pairs[..., 1]
    d_mean = mean.gather(-1, i) - mean.gather(-1, j)
    d_true = true_u.gather(-1, i) - true_u.gather(-1, j)
    return ((d_mean > 0) == (d_true > 0)).to(DTYPE).mean(-1)


def hyperparameters(model: Any) -> Tensor:
    """Outputscale and lengthscales of a ``ScaleKernel(base)`` covariance.

    Args:
        model: A fitted model with the default kernel.

    Returns:
        A flat tensor ``[outputscale, lengthscale_1, ..., lengthscale_d]``
        (per batch element, concatenated).
    """
    kernel = model.covar_module
    return torch.cat(
        [
            kernel.outputscale.detach().reshape(-1),
            kernel.base_kernel.lengthscale.detach().reshape(-1),
        ]
    )


def attempt(cells: dict[str, Cell], key: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn``; on failure put its error text in ``cells[key]``.

    Args:
        cells: The result cells of one library at one size.
        key: The cell that the failure is reported in.
        fn: The measurement.

    Returns:
        ``fn()``, or ``None`` if it raised.
    """
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported, never fatal
        cells[key] = error_text(exc)
        print(f"    {key}: {cells[key]}", file=sys.stderr)
        if os.environ.get("PREFBO_BENCH_TRACEBACK"):
            traceback.print_exc()
        return None


# -------------------------------------------------------------- benchmarks
def warm_up(args: argparse.Namespace, log: Counter) -> None:
    """Untimed fit, posterior and EUBO of both libraries on a small problem.

    Args:
        args: The parsed command line.
        log: Counter receiving the warm-up warnings.
    """
    generator = torch.Generator().manual_seed(args.seed + 999_983)
    problem = make_problem(150, 300, 20, 20, generator)
    tiny = argparse.Namespace(
        **{**vars(args), "num_restarts": 2, "raw_samples": 8, "acqf_maxiter": 5}
    )
    for library in LIBRARIES:
        with recording(log):
            try:
                model, _ = fit_model(library, problem)
                time_posterior(model, problem.test_X[:8].reshape(4, 2, DIM), 1)
                time_eubo(model, tiny)
            except Exception as exc:  # noqa: BLE001 - warm-up only
                print(f"  warm-up {library}: {error_text(exc)}", file=sys.stderr)


def fit_libraries(
    libraries: Sequence[str],
    problem: Problem,
    args: argparse.Namespace,
    cells: dict[str, dict[str, Cell]],
    counters: dict[str, Sequence[Counter]],
) -> dict[str, Any]:
    """Fit every library's model, the repeats interleaved; never raises.

    For ``n <= --fit-repeats-up-to`` each library is fitted ``--fit-repeats``
    times (a fresh model each time) in the order prefbo, BoTorch, prefbo,
    BoTorch, ..., so that a slow spell of the machine falls on both; the
    median time goes into the ``fit`` cell.

    Args:
        libraries: The libraries to fit.
        problem: The data set.
        args: The parsed command line.
        cells: Per-library result cells, filled in place (``fit``, or error
            texts and ``n/a`` for a library whose fit failed).
        counters: Per-library warning counters.

    Returns:
        The last fitted model of each library whose fits all succeeded.
    """
    n = problem.datapoints.shape[-2]
    repeats = args.fit_repeats if n <= args.fit_repeats_up_to else 1
    times: dict[str, list[float]] = {library: [] for library in libraries}
    models: dict[str, Any] = {}
    failed: set[str] = set()
    for _ in range(repeats):
        for library in libraries:
            if library in failed:
                continue
            with recording(*counters[library]):
                fitted = attempt(
                    cells[library], "fit", lambda lib=library: fit_model(lib, problem)
                )
            if fitted is None:
                failed.add(library)
                models.pop(library, None)
                continue
            models[library] = fitted[0]
            times[library].append(fitted[1])
    for library in libraries:
        if library in failed:
            for key in cells[library]:
                if key != "fit":
                    cells[library][key] = "n/a (fit failed)"
        else:
            cells[library]["fit"] = statistics.median(times[library])
    return models


def measure_library(
    library: str,
    model: Any,
    problem: Problem,
    X_post: Tensor,
    args: argparse.Namespace,
    cells: dict[str, Cell],
) -> tuple[Tensor | None, Tensor | None]:
    """Fill one library's cells for its fitted model; never raises.

    Args:
        library: ``"prefbo"`` or ``"BoTorch"``.
        model: The library's fitted model (see :func:`fit_libraries`).
        problem: The data set.
        X_post: ``64 x 2 x d`` points for the posterior timing.
        args: The parsed command line.
        cells: The library's result cells, filled in place (numbers, or error
            texts for the steps that failed).

    Returns:
        The posterior mean on the test designs and the fitted hyperparameters
        (each ``None`` if unavailable).
    """
    tag = f"  n={problem.datapoints.shape[-2]}: {library}"
    print(f"{tag} fit {cells['fit']:.3f} s", file=sys.stderr)
    repeats = args.posterior_repeats
    timed = attempt(cells, "posterior", lambda: time_posterior(model, X_post, repeats))
    if timed is not None:
        cells["posterior_first"], cells["posterior"] = timed
    mean = attempt(cells, "accuracy", lambda: posterior_mean(model, problem.test_X))
    if mean is not None:
        accuracy = ranking_accuracy(mean, problem.test_u, problem.test_pairs)
        cells["accuracy"] = float(accuracy)
    hyper = attempt({}, "hyperparameters", lambda: hyperparameters(model))
    eubo = attempt(cells, "eubo", lambda: time_eubo(model, args))
    if eubo is not None:
        cells["eubo"], cells["eubo_value"] = eubo
        print(f"{tag} EUBO {cells['eubo']:.3f} s", file=sys.stderr)
    return mean, hyper


def copy_hyperparameters_mean_diff(
    source: Any, target: Any, problem: Problem, source_mean: Tensor
) -> float:
    """Posterior-mean difference once ``target`` has ``source``'s kernel values.

    A copy of ``target`` gets the raw kernel parameters of ``source`` (matched
    by name and size) and recomputes its Laplace mode; what remains of the
    difference is due to the models, not to where the optimiser stopped.

    Args:
        source: The fitted prefbo model.
        target: The fitted BoTorch model (left unchanged).
        problem: The data set.
        source_mean: ``source``'s posterior mean on ``problem.test_X``.

    Returns:
        The largest absolute difference of the posterior means on the test
        designs.
    """
    clone = deepcopy(target)
    params = dict(source.covar_module.named_parameters())
    with torch.no_grad():
        for name, param in clone.covar_module.named_parameters():
            param.copy_(params[name].reshape(param.shape))
    clone.set_train_data(problem.datapoints, problem.comparisons, update_model=True)
    clone.eval()
    return float((posterior_mean(clone, problem.test_X) - source_mean).abs().max())


def max_abs_z(model: Any) -> float:
    """Largest ``|f_w - f_l| / (sqrt(2) sigma)`` over the comparisons at the mode.

    BoTorch's ``PairwiseGP`` clamps this to ``[-3, 3]`` in the likelihood
    derivatives, so its mode differs from the exact Laplace mode when it is
    exceeded.

    Args:
        model: A fitted, unbatched prefbo ``PairwiseLaplaceGP``.

    Returns:
        The largest standardised utility difference.
    """
    f, comparisons = model.utility, model.comparisons
    diff = f[..., comparisons[..., 0]] - f[..., comparisons[..., 1]]
    return float(diff.abs().max() / (math.sqrt(2.0) * model.likelihood.noise_std))


def run_size(
    n: int, m: int, args: argparse.Namespace, logs: dict[str, Counter]
) -> dict[str, Any]:
    """Benchmark both libraries on one data set of ``n`` designs, ``m`` answers.

    Args:
        n: Number of designs.
        m: Number of answers.
        args: The parsed command line.
        logs: Per-library warning counters (for the whole run).

    Returns:
        A row: ``n``, ``m``, per-library cells (``fit``, ``posterior``,
        ``posterior_first``, ``eubo``, ``eubo_value``, ``accuracy``,
        ``warnings``) and the cross-library ``mean_diff``, ``hyper_diff``,
        ``equal_diff`` (mean difference at equal hyperparameters) and
        ``max_z`` (see :func:`max_abs_z`).
    """
    generator = torch.Generator().manual_seed(args.seed * 1_000_003 + n * 7919 + m)
    problem = make_problem(n, m, args.n_test, args.n_test_pairs, generator)
    X_post = torch.rand(64, 2, DIM, generator=generator, dtype=DTYPE)
    row: dict[str, Any] = {"n": n, "m": m}
    means: dict[str, Tensor] = {}
    hypers: dict[str, Tensor] = {}
    active: list[str] = []
    for library in LIBRARIES:
        row[library] = dict.fromkeys(
            ("fit", "posterior", "posterior_first", "eubo", "eubo_value", "accuracy")
        )
        skip = args.skip_botorch_above
        if library == BOTORCH and skip is not None and n > skip:
            for key in row[library]:
                row[library][key] = "skipped"
            print(f"  n={n}: {library} skipped (n > {skip})", file=sys.stderr)
        else:
            active.append(library)
    counters = {library: Counter() for library in active}
    models = fit_libraries(
        active,
        problem,
        args,
        {library: row[library] for library in active},
        {library: (counters[library], logs[library]) for library in active},
    )
    for library in active:
        cells = row[library]
        if library in models:
            with recording(counters[library], logs[library]):
                mean, hyper = measure_library(
                    library, models[library], problem, X_post, args, cells
                )
            if mean is not None:
                means[library] = mean
            if hyper is not None:
                hypers[library] = hyper
        cells["warnings"] = float(sum(counters[library].values()))
    if len(means) == 2:
        row["mean_diff"] = float((means[PREFBO] - means[BOTORCH]).abs().max())
    if len(hypers) == 2 and hypers[PREFBO].shape == hypers[BOTORCH].shape:
        rel = (hypers[PREFBO] - hypers[BOTORCH]).abs() / hypers[BOTORCH].abs()
        row["hyper_diff"] = float(rel.max())
    diagnostics: dict[str, Callable[[], float]] = {}
    if PREFBO in models:
        diagnostics["max_z"] = lambda: max_abs_z(models[PREFBO])
    if len(models) == 2 and PREFBO in means:
        diagnostics["equal_diff"] = lambda: copy_hyperparameters_mean_diff(
            models[PREFBO], models[BOTORCH], problem, means[PREFBO]
        )
    for key, fn in diagnostics.items():
        with recording(logs["other"]):
            value = attempt(row, key, fn)
        if value is not None:
            row[key] = value
    return row


def fit_sequentially(
    library: str, problems: Sequence[Problem]
) -> tuple[float, list[Tensor], list[float]]:
    """Fit one model per data set, one after the other.

    Args:
        library: ``"prefbo"`` or ``"BoTorch"``.
        problems: The data sets.

    Returns:
        The summed fit time, the posterior means on each test set and the
        ranking accuracies.
    """
    total, means, accuracies = 0.0, [], []
    for problem in problems:
        model, elapsed = fit_model(library, problem)
        total += elapsed
        mean = posterior_mean(model, problem.test_X)
        means.append(mean)
        accuracies.append(
            float(ranking_accuracy(mean, problem.test_u, problem.test_pairs))
        )
    return total, means, accuracies


def run_batched(args: argparse.Namespace, logs: dict[str, Counter]) -> dict[str, Any]:
    """One batched prefbo fit vs ``B`` sequential prefbo and BoTorch fits.

    Args:
        args: The parsed command line (``batch_size``, ``batch_n``,
            ``batch_m``, ...).
        logs: Per-library warning counters (for the whole run).

    Returns:
        A row with times (``batched``, ``seq_prefbo``, ``seq_botorch``), mean
        accuracies (``acc_*``), and ``mean_diff``: the largest absolute
        difference between the batched and the sequential prefbo posterior
        means on the test designs.
    """
    B, n, m = args.batch_size, args.batch_n, args.batch_m
    generator = torch.Generator().manual_seed(args.seed * 1_000_003 + 424_242)
    problems = [
        make_problem(n, m, args.n_test, args.n_test_pairs, generator) for _ in range(B)
    ]
    stacked = Problem(*(torch.stack(parts) for parts in zip(*problems)))
    row: dict[str, Any] = {"B": B, "n": n, "m": m}
    batched_mean = None
    with recording(logs[PREFBO]):
        fitted = attempt(row, "batched", lambda: fit_model(PREFBO, stacked))
        if fitted is not None:
            model, row["batched"] = fitted
            print(
                f"  batched: prefbo B={B} fit {row['batched']:.3f} s", file=sys.stderr
            )
            batched_mean = attempt(
                row, "acc_batched", lambda: posterior_mean(model, stacked.test_X)
            )
            if batched_mean is not None:
                row["acc_batched"] = float(
                    ranking_accuracy(
                        batched_mean, stacked.test_u, stacked.test_pairs
                    ).mean()
                )

    for library, key in ((PREFBO, "seq_prefbo"), (BOTORCH, "seq_botorch")):
        skip = args.skip_botorch_above
        if library == BOTORCH and skip is not None and n > skip:
            row[key] = row["acc_" + key] = "skipped"
            continue
        with recording(logs[library]):
            result = attempt(
                row, key, lambda lib=library: fit_sequentially(lib, problems)
            )
        if result is None:
            continue
        row[key], seq_means, accuracies = result
        row["acc_" + key] = statistics.fmean(accuracies)
        print(
            f"  batched: {library} {B} sequential fits {row[key]:.3f} s",
            file=sys.stderr,
        )
        if library == PREFBO and batched_mean is not None:
            diff = torch.stack(seq_means) - batched_mean
            row["mean_diff"] = float(diff.abs().max())
    return row


# --------------------------------------------------------------- reporting
def fmt(value: Cell, kind: str = "s") -> str:
    """Format one table cell.

    Args:
        value: A number, a text (error / skipped) or ``None``.
        kind: ``"s"`` (seconds), ``"ms"`` (seconds shown in milliseconds),
            ``"x"`` (ratio), ``"acc"`` (fraction), ``"e"`` (scientific) or
            ``"int"``.

    Returns:
        The cell text.
    """
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return str(value)
    if kind == "ms":
        value *= 1e3
    if kind == "acc":
        return f"{value:.3f}"
    if kind == "e":
        return f"{value:.1e}"
    if kind == "int":
        return f"{value:.0f}"
    for limit, digits in ((100, 0), (10, 1), (1, 2)):
        if abs(value) >= limit:
            return f"{value:.{digits}f}"
    return f"{value:.3f}"


def ratio(slow: Cell, fast: Cell) -> Cell:
    """``slow / fast`` when both are positive numbers.

    Args:
        slow: The reference time (BoTorch, or sequential fits).
        fast: The time compared with it.

    Returns:
        The speed-up, or ``"skipped"`` / ``None`` when not available.
    """
    if isinstance(slow, float) and isinstance(fast, float) and fast > 0:
        return slow / fast
    if "skipped" in (slow, fast):
        return "skipped"
    return None


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A markdown table.

    Args:
        header: Column titles.
        rows: Cell texts.

    Returns:
        The table's lines.
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render(
    args: argparse.Namespace,
    size_rows: Sequence[dict[str, Any]],
    batch_row: dict[str, Any] | None,
    logs: dict[str, Counter],
    command: str,
    total_seconds: float,
    loads: tuple[str, str] = ("n/a", "n/a"),
) -> str:
    """The full markdown report.

    Args:
        args: The parsed command line.
        size_rows: Rows from :func:`run_size`.
        batch_row: The row from :func:`run_batched`, or ``None``.
        logs: Warning counters by library (and ``"warm-up"`` / ``"other"``).
        command: The command line that produced the report.
        total_seconds: Wall time of the whole run.
        loads: 1-minute load averages at the start and the end of the run.

    Returns:
        The markdown text.
    """
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    out = [
        "# prefbo `PairwiseLaplaceGP` vs BoTorch `PairwiseGP`",
        "",
        f"- date: {now}",
        f"- versions: {environment.versions_text()}, prefbo "
        f"{getattr(prefbo, '__version__', '?')}",
        f"- machine: {environment.machine()}; load average {loads[0]} at the "
        f"start, {loads[1]} at the end",
        f"- threads: {environment.threads()}",
        f"- command: `{command}`",
        f"- settings: d={DIM}, float64, seed {args.seed}; fit: median of "
        f"{args.fit_repeats} for n <= {args.fit_repeats_up_to}; EUBO q=2, "
        f"{args.num_restarts} restarts, {args.raw_samples} raw samples, "
        f"maxiter {args.acqf_maxiter}; posterior: 64 x 2 x {DIM}, median of "
        f"{args.posterior_repeats}; test: {args.n_test} designs, "
        f"{args.n_test_pairs} pairs",
        "- utility: u(x) = sum_k sin(3 x_k + k/2) - 3 ||x - c||^2, "
        f"c = {CENTRE}; answers ~ Phi((u_i - u_j) / sqrt(2))",
        f"- total wall time: {total_seconds:.1f} s",
        "",
        "## One data set",
        "",
        "Speed-up = BoTorch time / prefbo time. Accuracy: fraction of held-out "
        "pairs ordered correctly by the posterior mean.",
        "",
    ]
    header = [
        "n",
        "m",
        "fit prefbo (s)",
        "fit BoTorch (s)",
        "fit speed-up ×",
        "posterior prefbo (ms)",
        "posterior BoTorch (ms)",
        "speed-up ×",
        "EUBO prefbo (s)",
        "EUBO BoTorch (s)",
        "speed-up ×",
        "accuracy prefbo",
        "accuracy BoTorch",
    ]
    rows = []
    for r in size_rows:
        p, b = r[PREFBO], r[BOTORCH]
        rows.append(
            [
                str(r["n"]),
                str(r["m"]),
                fmt(p["fit"]),
                fmt(b["fit"]),
                fmt(ratio(b["fit"], p["fit"]), "x"),
                fmt(p["posterior"], "ms"),
                fmt(b["posterior"], "ms"),
                fmt(ratio(b["posterior"], p["posterior"]), "x"),
                fmt(p["eubo"]),
                fmt(b["eubo"]),
                fmt(ratio(b["eubo"], p["eubo"]), "x"),
                fmt(p["accuracy"], "acc"),
                fmt(b["accuracy"], "acc"),
            ]
        )
    out += table(header, rows)
    out += [
        "",
        "## Agreement and diagnostics",
        "",
        "Δ mean: max |prefbo − BoTorch| posterior mean on the test designs. "
        "Δ hyper: max relative difference of the fitted outputscale and "
        "lengthscales. Δ mean, equal hyper: Δ mean once BoTorch's model is given "
        "prefbo's fitted kernel values. max abs z: largest |f_w − f_l| / (√2 σ) at "
        "prefbo's mode (BoTorch clamps z to [−3, 3], so the modes differ above 3). "
        "First call: the first `posterior` call after fitting. EUBO value: the "
        "acquisition value at each library's own optimum.",
        "",
    ]
    header = [
        "n",
        "m",
        "Δ mean",
        "Δ hyper",
        "Δ mean, equal hyper",
        "max abs z",
        "first call prefbo (ms)",
        "first call BoTorch (ms)",
        "EUBO value prefbo",
        "EUBO value BoTorch",
        "warnings prefbo",
        "warnings BoTorch",
    ]
    rows = []
    for r in size_rows:
        p, b = r[PREFBO], r[BOTORCH]
        rows.append(
            [
                str(r["n"]),
                str(r["m"]),
                fmt(r.get("mean_diff"), "e"),
                fmt(r.get("hyper_diff"), "e"),
                fmt(r.get("equal_diff"), "e"),
                fmt(r.get("max_z")),
                fmt(p["posterior_first"], "ms"),
                fmt(b["posterior_first"], "ms"),
                fmt(p["eubo_value"], "acc"),
                fmt(b["eubo_value"], "acc"),
                fmt(p.get("warnings"), "int"),
                fmt(b.get("warnings"), "int"),
            ]
        )
    out += table(header, rows)
    if batch_row is not None:
        r = batch_row
        out += [
            "",
            "## Batched fits",
            "",
            f"{r['B']} independent data sets of n={r['n']}, m={r['m']}: one batched "
            "prefbo fit (`B x n x d`, per-batch hyperparameters) vs sequential fits. "
            "Speed-up = sequential time / batched prefbo time. Δ mean: max |batched "
            "− sequential prefbo| posterior mean on the test designs.",
            "",
        ]
        header = [
            "B",
            "n",
            "m",
            "batched prefbo (s)",
            "sequential prefbo (s)",
            "sequential BoTorch (s)",
            "speed-up vs prefbo ×",
            "speed-up vs BoTorch ×",
            "accuracy batched",
            "accuracy seq. prefbo",
            "accuracy seq. BoTorch",
            "Δ mean",
        ]
        out += table(
            header,
            [
                [
                    str(r["B"]),
                    str(r["n"]),
                    str(r["m"]),
                    fmt(r.get("batched")),
                    fmt(r.get("seq_prefbo")),
                    fmt(r.get("seq_botorch")),
                    fmt(ratio(r.get("seq_prefbo"), r.get("batched")), "x"),
                    fmt(ratio(r.get("seq_botorch"), r.get("batched")), "x"),
                    fmt(r.get("acc_batched"), "acc"),
                    fmt(r.get("acc_seq_prefbo"), "acc"),
                    fmt(r.get("acc_seq_botorch"), "acc"),
                    fmt(r.get("mean_diff"), "e"),
                ]
            ],
        )
    out += ["", "## Warnings", ""]
    for name, counter in logs.items():
        out.append(f"- {name}: {sum(counter.values())}")
        for (category, message), count in counter.most_common(10):
            out.append(f"  - {count} × {category}: {message}")
    return "\n".join(out) + "\n"


def load_average() -> str:
    """The 1-minute load average, a sign of competing work during the run.

    Returns:
        It formatted, or ``"n/a"`` where the platform has none.
    """
    load = environment.load_average()
    return "n/a" if load is None else f"{load:.2f}"


# --------------------------------------------------------------------- CLI
def parse_sizes(text: str) -> list[tuple[int, int]]:
    """Parse ``"200:1000,400:2000"`` into ``[(200, 1000), (400, 2000)]``.

    Args:
        text: Comma-separated ``n:m`` pairs.

    Returns:
        The sizes.

    Raises:
        argparse.ArgumentTypeError: On malformed input.
    """
    sizes = []
    for item in text.split(","):
        try:
            n, m = (int(part) for part in item.strip().split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected n:m pairs such as 200:1000,400:2000; got {item!r}"
            ) from None
        if n < 2 or m < 1:
            raise argparse.ArgumentTypeError(f"need n >= 2 and m >= 1; got {item!r}")
        sizes.append((n, m))
    return sizes


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser.

    Returns:
        The parser.
    """
    parser = argparse.ArgumentParser(
        description="Compare prefbo's PairwiseLaplaceGP with BoTorch's PairwiseGP "
        "(fit, posterior and EUBO times, held-out accuracy, batched fits) on the "
        "same synthetic d=4 preference data.",
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=None,
        help="comma-separated n:m (designs:answers) pairs; default "
        + ",".join(f"{n}:{m}" for n, m in DEFAULT_SIZES)
        + " (with --quick: "
        + ",".join(f"{n}:{m}" for n, m in QUICK_SIZES)
        + ")",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small run: sizes 100:500,200:1000 and a batch of "
        f"{QUICK_BATCH_SIZE} data sets (explicit --sizes / --batch-size win)",
    )
    parser.add_argument(
        "--skip-botorch-above",
        type=int,
        default=None,
        metavar="N",
        help="do not run BoTorch for n > N (its cells say 'skipped')",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed (default: %(default)s)"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"number B of data sets in the batched comparison; default "
        f"{DEFAULT_BATCH_SIZE} ({QUICK_BATCH_SIZE} with --quick); 0 skips it",
    )
    parser.add_argument(
        "--batch-n",
        type=int,
        default=100,
        help="designs per batched data set (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-m",
        type=int,
        default=None,
        help="answers per batched data set (default 5 x --batch-n)",
    )
    parser.add_argument(
        "--num-restarts",
        type=int,
        default=4,
        help="optimize_acqf num_restarts (default: %(default)s)",
    )
    parser.add_argument(
        "--raw-samples",
        type=int,
        default=256,
        help="optimize_acqf raw_samples (default: %(default)s)",
    )
    parser.add_argument(
        "--acqf-maxiter",
        type=int,
        default=200,
        help="L-BFGS-B iterations per optimize_acqf run (default: %(default)s)",
    )
    parser.add_argument(
        "--fit-repeats",
        type=int,
        default=3,
        help="fits per library and size (fresh model each), the median time is "
        "reported, for sizes n <= --fit-repeats-up-to (default: %(default)s)",
    )
    parser.add_argument(
        "--fit-repeats-up-to",
        type=int,
        default=400,
        metavar="N",
        help="largest n whose fit is repeated; larger sizes are timed once "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--posterior-repeats",
        type=int,
        default=7,
        help="timed posterior calls per model; the median is reported "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--n-test",
        type=int,
        default=500,
        help="held-out test designs per data set (default: %(default)s)",
    )
    parser.add_argument(
        "--n-test-pairs",
        type=int,
        default=2000,
        help="distinct held-out pairs for the ranking accuracy (default: %(default)s)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="where to write the markdown report (default: "
        "benchmarks/results/laplace_vs_botorch.md; with --quick "
        "<tempdir>/prefbo-quick/laplace_vs_botorch.md)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the markdown report and write it to a file.

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status (0).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    if args.batch_size is None:
        args.batch_size = QUICK_BATCH_SIZE if args.quick else DEFAULT_BATCH_SIZE
    if args.batch_m is None:
        args.batch_m = 5 * args.batch_n
    if args.output is None:
        base = reports.scratch_dir() if args.quick else DEFAULT_OUTPUT.parent
        args.output = base / DEFAULT_OUTPUT.name
    command = reports.command("laplace_vs_botorch", argv)

    load_start = load_average()
    t_start = time.perf_counter()
    logs: dict[str, Counter] = {
        PREFBO: Counter(),
        BOTORCH: Counter(),
        "warm-up": Counter(),
        "other": Counter(),
    }
    with recording(logs["other"]):
        print("warm-up ...", file=sys.stderr)
        warm_up(args, logs["warm-up"])
        size_rows = []
        for n, m in args.sizes:
            print(f"size n={n}, m={m} ...", file=sys.stderr)
            size_rows.append(run_size(n, m, args, logs))
        batch_row = None
        if args.batch_size > 0:
            print(
                f"batched: B={args.batch_size}, n={args.batch_n}, m={args.batch_m}",
                file=sys.stderr,
            )
            batch_row = run_batched(args, logs)
    total = time.perf_counter() - t_start
    loads = (load_start, load_average())
    report = render(args, size_rows, batch_row, logs, command, total, loads)
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report, encoding="utf-8")
    print(f"written to {args.output} (total {total:.1f} s)", file=sys.stderr)
    return 0
