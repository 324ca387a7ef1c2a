r"""Stated against measured peak memory of ``SkewGP``'s resample.

For each size a fresh interpreter builds one ``SkewGP`` (which samples) and
reports the growth of its resident set from just before the model is built to
the kernel's high-water mark (``/proc/self/status`` ``VmHWM``, reset through
``/proc/self/clear_refs``), against
:func:`~prefbo.models.skew_checks.resample_memory_bytes`.

Target: ``noise="probit"``, ``m`` answers about 2 designs in ``[0, 1]²``
(70 % one way), or with ``--designs N`` about ``N`` designs (random pairs
answered by a random utility), float64, ``num_samples=2048`` and ``num_chains=16`` (the
defaults), seed 0; ``burnin=0`` and ``thinning=0`` (the memory does not
depend on the number of sweeps, only the run time does). The hard-constraint
models use ``n`` designs and ``2n`` answers consistent with a random utility.

Columns (MB, 10⁶ bytes; ``threads``: torch's intra-op threads, which set
MKL's buffers):

- ``cold``: the growth in a process that has built no model before, so it
  includes the one-off cost of the first resample (MKL and OpenMP buffers,
  code paged in): about 50 MB whatever the size;
- ``warm``: the growth after a small model has been built first, the case
  :func:`resample_memory_bytes` bounds;
- ``warm, mmap``: the same with glibc told to map every block of 64 kB or more
  on its own (``MALLOC_MMAP_THRESHOLD_=65536``), so freed blocks leave the
  resident set and the high-water mark is what was alive at once.

Usage::

    python -m benchmarks skew_memory              # 200, 400, 800, 1600 answers
    python -m benchmarks skew_memory --sizes 200 400
    python -m benchmarks skew_memory --sizes 300 1000 --designs 1000

It prints the machine, the threads (which the measuring processes inherit)
and the versions, then the table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap

from benchmarks.harness import environment

CHILD = textwrap.dedent(
    """
    import sys
    import torch
    from prefbo import SkewGP
    from prefbo.models.skew_checks import resample_memory_bytes

    noise, size, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    designs = int(sys.argv[4])
    kw = dict(num_samples=2048, num_chains=16, burnin=0, thinning=0, seed=0,
              progress=False, max_dimension=None)
    g = torch.Generator().manual_seed(0)
    if noise == "probit" and designs > 2:
        X = torch.rand(designs, 2, generator=g, dtype=torch.float64)
        u = torch.randn(designs, generator=g, dtype=torch.float64)
        comp = torch.randint(0, designs, (2 * size, 2), generator=g)
        comp = comp[comp[:, 0] != comp[:, 1]][:size]
        comp = torch.where((u[comp[:, 0]] > u[comp[:, 1]])[:, None], comp,
                           comp.flip(-1))
        extra = {}
    elif noise == "probit":
        X = torch.rand(2, 2, generator=g, dtype=torch.float64)
        one_way = torch.rand(size, generator=g) < 0.7
        comp = torch.where(one_way[:, None], torch.tensor([[0, 1]]),
                           torch.tensor([[1, 0]]))
        extra = {}
    else:
        X = torch.rand(size, 2, generator=g, dtype=torch.float64)
        u = torch.randn(size, generator=g, dtype=torch.float64)
        comp = torch.randint(0, size, (4 * size, 2), generator=g)
        comp = comp[comp[:, 0] != comp[:, 1]][: 2 * size]
        comp = torch.where((u[comp[:, 0]] > u[comp[:, 1]])[:, None], comp,
                           comp.flip(-1))
        extra = {"jnd_threshold": 1e-3} if noise == "jnd" else {}
    if warm:
        SkewGP(X[:2], torch.tensor([[0, 1]]), noise=noise, **kw,
               **extra).posterior(X[:2])

    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024

    open("/proc/self/clear_refs", "w").write("5")
    base = status("VmRSS:")
    model = SkewGP(X, comp, noise=noise, **kw, **extra)
    measured = status("VmHWM:") - base
    n, m = X.shape[0], comp.shape[0]
    stated = resample_memory_bytes(noise, n, m, m, 2048, 8, num_chains=16)
    print(measured, stated, torch.get_num_threads())
    """
)


def measure(
    noise: str, size: int, warm: bool, mmap: bool, designs: int = 2
) -> tuple[int, int, int]:
    r"""``(measured, stated)`` bytes and torch's threads, in a fresh interpreter."""
    env = dict(os.environ)
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if mmap:
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            noise,
            str(size),
            "1" if warm else "0",
            str(designs),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    if run.returncode != 0:
        raise RuntimeError(run.stderr)
    out = run.stdout.split()
    return int(out[-3]), int(out[-2]), int(out[-1])


def main(argv: list[str] | None = None) -> None:
    r"""Measure every size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 400, 800, 1600])
    parser.add_argument(
        "--noise", default="probit", choices=["probit", "none", "jnd", "shared"]
    )
    parser.add_argument(
        "--designs", type=int, default=2, help="probit: designs the answers are about"
    )
    args = parser.parse_args(argv)
    print("\n".join(environment.lines()) + "\n")
    print(
        "| noise | designs | size | threads | stated | cold | warm | warm, mmap "
        "| stated - warm |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        runs = [
            measure(args.noise, size, warm, mmap, args.designs)
            for warm, mmap in [(False, False), (True, False), (True, True)]
        ]
        (cold, stated, threads), (warm, _, _), (mmap, _, _) = runs
        print(
            f"| {args.noise} | {args.designs} | {size} | {threads} "
            f"| {stated / 1e6:.1f} "
            f"| {cold / 1e6:.1f} | {warm / 1e6:.1f} | {mmap / 1e6:.1f} "
            f"| {(stated - warm) / 1e6:+.1f} |",
            flush=True,
        )
