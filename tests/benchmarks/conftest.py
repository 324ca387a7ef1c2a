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
    (dataclasses and pickling look the module up there)."""

    def load(stem: str) -> ModuleType:
        name = f"_prefbo_bench_{stem}"
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{stem}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
        spec.loader.exec_module(module)
        return module

    return load
