r"""Data-parallel variational fit on synthetic pairwise data, run by ``torchrun``.

Example (2 CPU processes, ``gloo``)::

    torchrun --standalone --nproc_per_node=2 -m prefbo.fit.distributed_example \
        --answers 20000 --inducing 64 --batch-size 2048 --epochs 10

or on a machine with ``G`` GPUs (``nccl``, one GPU per process)::

    torchrun --standalone --nproc_per_node=G -m prefbo.fit.distributed_example \
        --device cuda

Every process builds the same problem (:func:`build_problem`: synthetic
designs and probit-noisy comparisons from
:func:`~prefbo.utils.testing.make_pairwise_data`, a
:class:`~prefbo.models.variational.VariationalPreferenceGP`), joins the
process group torchrun describes in its environment (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, ``LOCAL_RANK``), and calls
:func:`~prefbo.fit.fit_variational` with ``distributed=True``. Rank 0 prints
the per-epoch ELBO; with ``--out DIR`` every rank ``r`` also saves
``DIR/rank{r}.pt``, a dict with ``elbo`` (the per-epoch ELBO list),
``world_size`` and ``state_dict`` (the fitted model's), which the test suite
compares with a one-process fit of the same seed. Without ``torchrun`` (no
``WORLD_SIZE`` in the environment) it runs as a process group of one.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist

from prefbo.data import PairwiseComparisons
from prefbo.fit.variational import VariationalFitResult, fit_variational
from prefbo.models.variational import VariationalPreferenceGP
from prefbo.utils.testing import make_pairwise_data

DTYPES = {"float64": torch.float64, "float32": torch.float32}


def build_problem(
    num_designs: int,
    num_answers: int,
    num_inducing: int,
    *,
    dim: int = 2,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float64,
) -> VariationalPreferenceGP:
    r"""The synthetic problem every rank (and a one-process reference) builds.

    Args:
        num_designs: ``n``, designs uniform in ``[0, 1]^dim``.
        num_answers: ``m``, probit-noisy pairwise comparisons.
        num_inducing: ``M``, chosen among the designs by the model's default
            allocator.
        dim: ``d``.
        seed: Seeds the data and torch's global RNG before the model is built.
        device: Where the data and the model live.
        dtype: Their floating dtype.

    Returns:
        A :class:`~prefbo.models.variational.VariationalPreferenceGP` with
        the data attached.
    """
    X, comparisons, _ = make_pairwise_data(
        num_designs, num_answers, dim, seed=seed, device=device, dtype=dtype
    )
    torch.manual_seed(seed)
    return VariationalPreferenceGP(
        PairwiseComparisons(X, comparisons), inducing_points=num_inducing
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchrun --nproc_per_node=W -m prefbo.fit.distributed_example",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--designs", type=int, default=200)
    parser.add_argument("--answers", type=int, default=4000)
    parser.add_argument("--inducing", type=int, default=32)
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float64")
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="cuda: nccl"
    )
    parser.add_argument(
        "--backend", default=None, help="default: nccl for cuda, gloo for cpu"
    )
    parser.add_argument("--out", type=Path, default=None, help="save rank{r}.pt")
    parser.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    return parser


def main(argv: list[str] | None = None) -> VariationalFitResult:
    r"""Join the process group, fit, save, leave the group.

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``).

    Returns:
        This rank's :class:`~prefbo.fit.VariationalFitResult`.
    """
    args = _parser().parse_args(argv)
    device = torch.device(args.device)
    if args.device == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    group: dict = {"device_id": device if device.type == "cuda" else None}
    if "WORLD_SIZE" not in os.environ:  # a plain `python -m`: a group of one
        group.update(store=dist.HashStore(), rank=0, world_size=1)
    dist.init_process_group(backend, **group)
    try:
        rank = dist.get_rank()
        model = build_problem(
            args.designs,
            args.answers,
            args.inducing,
            dim=args.dim,
            seed=args.seed,
            device=device,
            dtype=DTYPES[args.dtype],
        )
        result = fit_variational(
            model,
            batch_size=args.batch_size,
            epochs=args.epochs,
            lr=args.lr,
            seed=args.seed,
            early_stopping_patience=None,
            progress=not args.quiet,
            distributed=True,
        )
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
            torch.save(
                {
                    "elbo": result.elbo,
                    "world_size": result.world_size,
                    "state_dict": state,
                },
                args.out / f"rank{rank}.pt",
            )
        if rank == 0 and not args.quiet:
            print(
                f"{result.world_size} process(es), {backend}: ELBO "
                f"{result.elbo[0]:.3f} -> {result.elbo[-1]:.3f} in "
                f"{sum(result.seconds):.2f} s",
                flush=True,
            )
        return result
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
