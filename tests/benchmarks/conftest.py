"""Shared fixtures of the benchmark scripts' tests."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def load_benchmark(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    r"""``load_benchmark("pbo_regret")`` imports ``benchmarks/pbo_regret.py``
    as a module from its path, registered in ``sys.modules`` for the test
    (dataclasses and pickling look the module up there), with ``benchmarks/``
    on ``sys.path`` as ``python benchmarks/pbo_regret.py`` has it (a script
    imports its sibling modules, e.g. ``_shard_threads``)."""

    monkeypatch.syspath_prepend(str(BENCHMARKS))

    def load(stem: str) -> ModuleType:
        name = f"_prefbo_bench_{stem}"
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{stem}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def variant_regrets(load_benchmark) -> Callable[[str, str], tuple[list, list]]:
    r"""``variant_regrets("pbo_lapse", "lapse-ep-0")``: the regrets of 8
    answers (Branin, σ = 0.1, seed 0) of that script's variant and of the
    loop's default, for the tests that a variant's neutral setting asks the
    default's questions."""

    def run(stem: str, variant: str) -> tuple[list, list]:
        bench = load_benchmark(stem)
        make_loop = bench.pbo_variants.VARIANTS[variant]
        regret = bench.pbo_variants.pbo_regret.run_one
        mine = regret("Branin", 0.1, 0, variant, answers=8, make_loop=make_loop)
        default = regret("Branin", 0.1, 0, "default", answers=8)
        return mine["regret"], default["regret"]

    return run
