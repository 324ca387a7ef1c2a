import torch

from prefbo.models.collaborative.answers import AnswerTable


def test_gather_pads_each_persons_answers_in_order():
    rows = torch.tensor([[1, 0, 1], [0, 2, 3], [1, 4, 5], [1, 6, 7], [3, 1, 0]])
    table = AnswerTable(rows, 4)
    batch = table.gather(torch.tensor([1, 2, 0]))
    assert batch.winners.tolist() == [[0, 4, 6], [0, 0, 0], [2, 0, 0]]
    assert batch.losers[0].tolist() == [1, 5, 7]
    assert batch.mask.tolist() == [[True] * 3, [False] * 3, [True, False, False]]
    assert table.counts().tolist() == [1, 3, 0, 1]


def test_added_answers_and_people_join_the_table():
    table = AnswerTable(torch.tensor([[0, 0, 1]]), 1)
    new = table.add_person()
    assert new == 1
    table.add(new, torch.tensor([2, 3]), torch.tensor([4, 5]))
    one = table.gather(torch.tensor([new]))  # read without folding
    assert one.winners.tolist() == [[2, 3]] and one.mask.all()
    table.add(0, torch.tensor([7]), torch.tensor([8]))
    both = table.gather(torch.tensor([0, 1]))
    assert both.winners.tolist() == [[0, 7], [2, 3]]
    assert table.rows.shape == (4, 3)
    assert table.counts().tolist() == [2, 2]
