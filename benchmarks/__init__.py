r"""prefbo's benchmark suite: the scripts behind the published figures.

Each script is a module of this package with a ``main()``; run one with
``python -m benchmarks NAME [options]`` from the repository root
(``python -m benchmarks --help`` lists them). What the scripts share (problems,
loop configurations, JSON-lines stores, pages, the description of the machine,
its threads and the library versions) lives in :mod:`benchmarks.harness`.
Pages are written to ``benchmarks/results/``; what experiments that were not
kept taught is in ``benchmarks/decisions.md``.

This module imports nothing: a script that shares the cores between shards
(:mod:`benchmarks.harness.shards`) must set its thread variables before torch
is imported.
"""
