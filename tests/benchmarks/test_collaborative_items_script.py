"""``benchmarks/collaborative_items.py``: its accuracy score and a tiny run."""

from __future__ import annotations

import torch


class Known:
    r"""A stand-in model whose posterior means are given utilities."""

    def __init__(self, utilities):
        self.utilities = utilities

    def utility_mean(self, person):
        return self.utilities[person]


def test_accuracy_counts_the_pairs_ordered_as_the_truth():
    from benchmarks.collaborative_items import accuracy

    truth = torch.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])
    assert accuracy(Known(truth), truth, 2) == 1.0
    assert accuracy(Known(-truth), truth, 2) == 0.0
    # person 0 right on (0, 1) only; person 1 right on all three pairs
    guess = torch.tensor([[0.0, 1.0, -1.0], [2.0, 1.0, 0.0]])
    assert abs(accuracy(Known(guess), truth, 2) - (1 / 3 + 1) / 2) < 1e-12


def test_quick_run_writes_a_page_with_both_fits(load_benchmark, tmp_path, capsys):
    bench = load_benchmark("collaborative_items")
    page = bench.main(["--quick", "--output", str(tmp_path / "items.md")])
    text = page.read_text()
    assert "- threads: torch threads " in text and "- versions: " in text
    rows = [line for line in text.splitlines() if line.startswith("| 12 ")]
    rows += [line for line in text.splitlines() if line.startswith("| 30 ")]
    assert len(rows) == 2
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert all(float(c) > 0 for c in cells[2:5])  # seconds, their ratio
        assert all(0.0 <= float(c) <= 1.0 for c in cells[5:])
    assert rows[0] in capsys.readouterr().out
