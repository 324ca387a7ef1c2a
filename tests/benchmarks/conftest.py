"""Shared fixtures of the benchmark scripts' tests."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

import pytest


@pytest.fixture
def load_benchmark() -> Callable[[str], ModuleType]:
    r"""``load_benchmark("pbo_regret")``: the module ``benchmarks.pbo_regret``
    (the script ``python -m benchmarks pbo_regret`` runs), imported from the
    repository root."""

    def load(stem: str) -> ModuleType:
        return importlib.import_module(f"benchmarks.{stem}")

    return load
