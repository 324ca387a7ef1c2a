import pytest
import torch

from prefbo.data.conversions import (
    choices_to_pairs,
    orderings_to_pairs,
    validate_orderings,
)
from prefbo.exceptions import InputDataError, UnsupportedError


def test_orderings_to_pairs_reports_the_source_rows():
    o = torch.tensor([[3, 1, -1], [0, 2, 1]])
    pairs, rows = orderings_to_pairs(o, "all")
    assert pairs.tolist() == [[3, 1], [0, 2], [0, 1], [2, 1]]
    assert rows.tolist() == [0, 1, 1, 1]
    with pytest.raises(InputDataError, match="mode must be one of"):
        orderings_to_pairs(o, "cyclic")


def test_validate_orderings_pads_ragged_rows_and_rejects_empty_ones():
    out = validate_orderings([[2, 0], [1]], 3)
    assert out.dtype == torch.long and out.tolist() == [[2, 0], [1, -1]]
    with pytest.raises(
        InputDataError, match="must list at least one item per row; row 0"
    ):
        validate_orderings([[]], 3)


def test_choices_to_pairs_skips_padding_and_reports_the_source_sets():
    sets = torch.tensor([[2, 0, -1], [1, 3, 4]])
    chosen = torch.tensor([[False, True, False], [False, False, True]])
    pairs, rows = choices_to_pairs(sets, chosen)
    assert pairs.tolist() == [[0, 2], [4, 1], [4, 3]]
    assert rows.tolist() == [0, 1, 1]
    with pytest.raises(UnsupportedError, match="set 1 has 0 chosen options"):
        choices_to_pairs(sets, torch.tensor([[False, True, False], [False] * 3]))
