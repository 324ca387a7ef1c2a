import torch

from prefbo.models.collaborative.design_index import DesignIndex, design_keys


def test_equal_designs_share_their_first_row_and_signed_zeros_are_equal():
    table = torch.tensor([[0.0, 1.0], [0.5, 0.5], [0.0, 1.0], [-0.0, 0.25]])
    index = DesignIndex()
    X = torch.tensor([[0.0, 1.0], [0.0, 0.25], [0.7, 0.1], [0.5, 0.5]])
    assert index.find(table, X) == [0, 3, -1, 1]
    assert design_keys(torch.tensor([[-0.0]])) == design_keys(torch.tensor([[0.0]]))


def test_new_designs_are_numbered_once_after_the_table():
    table = torch.rand(5, 3, dtype=torch.float64)
    index = DesignIndex()
    fresh = torch.rand(2, 3, dtype=torch.float64)
    X = torch.cat([table[[4]], fresh[[0]], fresh[[0]], fresh[[1]], table[[0]]])
    rows, new = index.add(table, X)
    assert rows == [4, 5, 5, 6, 0] and new == [1, 3]
    table = torch.cat([table, X[new]])
    index.extended(table)
    assert index.find(table, fresh) == [5, 6]


def test_a_table_that_is_not_the_indexed_one_is_indexed_anew():
    table = torch.rand(4, 2, dtype=torch.float64)
    index = DesignIndex()
    assert index.find(table, table[[2]]) == [2]
    other = table.flip(0).clone()  # same shape, another tensor
    assert index.find(other, table[[2]]) == [1]
    longer = torch.cat([other, table[[2]]])
    assert index.find(longer, table[[2]]) == [1]  # its first equal row
