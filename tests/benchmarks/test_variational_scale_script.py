"""``benchmarks/variational_scale.py``: its data, its metric and a tiny run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "variational_scale.py"


def _load_script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    name = "_prefbo_bench_variational_scale"
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def test_data_follow_the_probit_model_and_the_metric_is_exact_for_the_truth(
    monkeypatch,
):
    bench = _load_script(monkeypatch)
    data, u = bench.make_data(20_000, 50, seed=1)
    w, l = data.comparisons[:, 0], data.comparisons[:, 1]
    assert (w != l).all()
    # P(answer agrees with the utility) = E[Φ(|Δ|/√2)] over the random pairs
    agree = ((u[w] - u[l]) > 0).double().mean()
    i = torch.cat([w, l])
    j = torch.cat([l, w])
    expected = torch.special.ndtr((u[i] - u[j]).abs() / 2**0.5).mean()
    assert abs(float(agree - expected)) < 0.02
    X, u_test, pairs = bench.test_set()
    assert bench.accuracy(u_test, u_test, pairs) == 1.0
    assert bench.accuracy(-u_test, u_test, pairs) == 0.0


def test_tiny_run_writes_a_report(monkeypatch, tmp_path):
    bench = _load_script(monkeypatch)
    out = tmp_path / "report.md"
    argv = ["--sizes", "2000", "--steps", "8", "--laplace-size", "2000"]
    text = bench.main(argv + ["--in-process", "--output", str(out)])
    assert out.read_text() == text
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert [r.split(" | ")[0] for r in rows] == [
        "| PairwiseLaplaceGP",
        "| VariationalPreferenceGP",
    ]
    accuracy = [float(r.split(" | ")[-1].rstrip(" |")) for r in rows]
    assert all(a > 0.7 for a in accuracy)
