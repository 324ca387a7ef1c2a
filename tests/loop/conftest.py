"""Shared helpers of the loop's tests."""

import pytest


def _ask_and_tell(opt, answers, problem=None):
    asked = []
    for a in answers:
        X = opt.ask()
        asked.append(X)
        opt.tell(int(problem(X).argmax()) if problem is not None else a)
    return asked


@pytest.fixture
def ask_and_tell():
    r"""``ask_and_tell(opt, answers, problem=None)``: ask, then tell each of
    ``answers`` (or, given ``problem``, the option of highest utility);
    returns the questions asked."""
    return _ask_and_tell
