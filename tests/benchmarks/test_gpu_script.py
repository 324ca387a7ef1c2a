"""``benchmarks/gpu.py``: its quick CPU run writes every section with numbers."""

from __future__ import annotations

import re


def test_quick_run_reports_every_part(tmp_path, load_benchmark, capsys):
    module = load_benchmark("gpu")
    out = tmp_path / "gpu.md"
    assert module.main(["--quick", "--output", str(out)]) == 0
    text = out.read_text()
    for header in ("## 1.", "## 2.", "## 3.", "## 4.", "## 5.", "## 6.", "## 7."):
        assert header in text
    # the SVGP row: estimated and measured epoch times, both positive
    row = next(line for line in text.splitlines() if line.startswith("| cpu | 100,000"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[4]) > 0 and float(cells[5]) > 0
    # the Laplace rows report an efficiency in [0, 1] (two decimals: on a
    # loaded machine a small solve's rounds to 0.00)
    effs = [float(m) for m in re.findall(r"\| (0\.\d+|1\.00) \|$", text, re.M)]
    assert effs and all(0 <= e <= 1 for e in effs)
    # Thompson sampling: designs per second, positive
    lines = text.splitlines()
    row = next(line for line in lines if line.startswith("| cpu | 6 | 100 |"))
    assert float(row.strip("|").split("|")[-1].replace(",", "")) > 0
    # EUBO: both maximisers reach the same EUBO under BoTorch's own model
    # (the two models share data and kernel, so their posteriors agree)
    row = next(line for line in text.splitlines() if line.startswith("| cpu | 100 |"))
    cells = [float(c) for c in row.strip("|").split("|")[2:]]
    assert cells[0] > 0 and cells[1] > 0
    assert abs(cells[3] - cells[4]) <= 1e-3 * abs(cells[3])
    # the collaborative model: a pool of 100 items with their effects on,
    # and participants' questions per second, positive
    row = next(line for line in text.splitlines() if line.startswith("| cpu | 200 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "100" and float(cells[4]) > 0
    assert float(cells[-1].replace(",", "")) > 0
