import pytest
import torch

from prefbo.exceptions import InputDataError
from prefbo.loop.answers import Answer, check_question, pairs_from


def test_choices_become_winner_over_each_other_option_with_designs_merged():
    a = torch.tensor([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], dtype=torch.float64)
    b = torch.tensor([[0.7, 0.8], [0.3, 0.4]], dtype=torch.float64)
    designs, comps = pairs_from([Answer(1, a, 2), Answer(2, b, 1)])
    assert torch.equal(designs, torch.cat([a, b[:1]]))
    assert comps.tolist() == [[2, 0], [2, 1], [1, 3]]
    designs, comps = pairs_from([])
    assert comps.shape == (0, 2)


def test_bad_questions_are_named():
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    with pytest.raises(InputDataError, match=r"option 1 has x\[0\] = 2\.0 outside"):
        check_question(torch.tensor([[0.5, 0.5], [2.0, 0.5]]), bounds)
    with pytest.raises(InputDataError, match=r"options 0 and 1 are the same"):
        check_question(torch.tensor([[0.5, 0.5], [0.5, 0.5]]), bounds)
