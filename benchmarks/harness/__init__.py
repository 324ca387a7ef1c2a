r"""What the benchmark scripts share.

- :mod:`~benchmarks.harness.runner`: ``python -m benchmarks NAME``, the suite's
  names, and the command that starts a script (or a child process of one);
- :mod:`~benchmarks.harness.environment`: the machine, its threads and the
  library versions, recorded with every run and on every page;
- :mod:`~benchmarks.harness.shards`: each ``--shard i/k`` process's share of
  the cores, set before torch is imported;
- :mod:`~benchmarks.harness.stores`: JSON-lines stores of runs;
- :mod:`~benchmarks.harness.reports`: pages (the command written on them,
  hand-written sections kept, medians, where unpublished settings write);
- :mod:`~benchmarks.harness.problems`: the test problems and data sets;
- :mod:`~benchmarks.harness.configs`: the PBO loops compared, their seed sets
  and noise levels.

This package's ``__init__`` imports nothing (see :mod:`benchmarks`); the
runner, shards, stores and environment modules import no torch at import
time.
"""
