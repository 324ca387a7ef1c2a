import pytest
import torch

import prefbo.data
from prefbo.data import containers
from prefbo.data.choices import ChoiceSets
from prefbo.data.labels import LabelComparisons, Rankings
from prefbo.data.pairwise import PairwiseComparisons


def test_containers_and_conversions_are_importable_from_both_places():
    for name in containers.__all__:
        assert getattr(prefbo.data, name) is getattr(containers, name)


def _global_rows(data, design_index):
    r"""Each answer of ``data`` as a list, designs mapped through ``design_index``."""
    if isinstance(data, PairwiseComparisons):
        rows = torch.cat(data.answers)  # (m + m_b) x 2
        return design_index[rows].tolist()
    if isinstance(data, LabelComparisons):
        return [[int(design_index[c]), w, l] for c, w, l in data.comparisons.tolist()]
    if isinstance(data, Rankings):
        return [[v for v in row if v >= 0] for row in data.orderings.tolist()]
    return [
        (
            [int(design_index[v]) for v in s[m]],
            [int(design_index[v]) for v in s[c]],
        )
        for s, m, c in zip(data.option_sets, data.mask, data.chosen, strict=True)
    ]


def _designs(kind, row):
    if kind == "labels":
        return row[:1]
    return row[0] if kind == "choices" else row


def _make(kind, X):
    dev = X.device
    if kind == "pairwise":
        return PairwiseComparisons(
            X,
            torch.tensor([[0, 1], [4, 2], [5, 1]], device=dev),
            torch.tensor([[3, 4], [1, 2]], device=dev),
        )
    if kind == "labels":
        return LabelComparisons(
            X, [[0, 1, 2], [3, 0, 1], [5, 2, 0], [3, 1, 0], [1, 2, 1]], num_labels=3
        )
    if kind == "rankings":
        return Rankings(X, [[0, 1], [2], [1, 0, 2], [2, 1], [0], [1, 2]])
    return ChoiceSets(
        X,
        [[0, 1, 2], [3, 4], [5, 0, 1, 2], [4, 1], [3, 1]],
        [[1], [3, 4], [2], [4], [1]],
    )


@pytest.mark.parametrize("kind", ["pairwise", "labels", "rankings", "choices"])
def test_select_keeps_the_answers_and_only_the_designs_they_touch(tkwargs, kind):
    X = torch.linspace(0, 1, 12, **tkwargs).reshape(6, 2)
    data = _make(kind, X)
    assert data.num_designs == 6
    sub, design_index, order = data.select(torch.tensor([4, 0, 2], device=X.device))
    assert type(sub) is type(data) and sub.num_answers == 3
    assert sorted(order.tolist()) == [0, 2, 4]
    designs = sub.datapoints if hasattr(sub, "datapoints") else sub.features
    torch.testing.assert_close(designs, X[design_index])
    everything = _global_rows(data, torch.arange(6, device=X.device))
    expected = [everything[i] for i in order.tolist()]
    assert _global_rows(sub, design_index) == expected
    if kind == "rankings":  # one context per ordering, in the order asked
        assert design_index.tolist() == order.tolist() == [4, 0, 2]
    else:  # exactly the designs the selected answers touch, sorted
        touched = {d for row in expected for d in _designs(kind, row)}
        assert design_index.tolist() == sorted(touched)
