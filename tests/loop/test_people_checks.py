"""``prefbo.loop.people_checks``: a batched step's people and screens."""

import pytest
import torch

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.loop import people_questions as pq
from prefbo.loop.box import DesignBox
from prefbo.loop.people_checks import check_people


def test_bad_people_and_shown_are_named(collaborative):
    X = pq.candidates(None, 2, 0, count=8)
    people = torch.tensor([0, 1])
    with pytest.raises(
        InputDataError,
        match=r"shown must hold one entry per person \(2\): the options on their "
        r"screen, or None; got 1 entries\.",
    ):
        pq.ask_people(collaborative, people, X, [None])
    with pytest.raises(InputDataError, match=r"shown must hold .*; got None\."):
        check_people(collaborative, people, None)
    with pytest.raises(
        InputDataError,
        match=r"shown\[1\] must be the 2 x 2 finite options on person 1's screen \("
        r"model "
        r"points\), or None; got a torch.float64 tensor of shape \(3, 2\)\.",
    ):
        pq.ask_people(collaborative, people, X, [None, X[:3]])
    with pytest.raises(
        InputDataError,
        match=r"people must be the model's person ids, in \[0, 4\); got values "
        r"from 0 to 4 \(add a newcomer with model.add_person\(\) first\)\.",
    ):
        pq.ask_people(collaborative, torch.tensor([0, 4]), X, [None, None])
    with pytest.raises(
        InputTypeError, match=r"people must be a 1-d integer tensor .*; got list"
    ):
        pq.ask_people(collaborative, [0, 1], X, [None, None])
    with pytest.raises(
        InputTypeError, match=r"model must be a CollaborativePreferenceGP .*; got str"
    ):
        check_people("model", people, [None, None])


def test_bad_virtual_comparisons_on_screen_are_named(collaborative):
    X = pq.candidates(None, 2, 0, count=8)
    people = torch.tensor([0, 1])
    shown = [X[:2], None]
    V = torch.zeros(1, 2, 2, dtype=torch.float64)
    with pytest.raises(
        InputDataError,
        match=r"shown_virtual must hold one entry per person \(2\): the virtual "
        r"comparisons their question on screen carries, or None; got 1 entries\.",
    ):
        pq.ask_people(collaborative, people, X, shown, shown_virtual=[V])
    with pytest.raises(
        InputDataError,
        match=r"shown_virtual\[0\] must be the k x 2 x 2 finite virtual comparisons "
        r"\[inner, face\] of the question on that person's screen \(model "
        r"points\), or None; got a torch.float64 tensor of shape \(2, 2\)\.",
    ):
        pq.ask_people(collaborative, people, X, shown, shown_virtual=[V[0], None])
    with pytest.raises(
        InputDataError, match=r"shown_virtual\[1\] .* for a person with no question"
    ):
        pq.ask_people(collaborative, people, X, shown, shown_virtual=[None, V])


def test_non_finite_screens_and_points_outside_the_box_are_named(collaborative):
    r"""A NaN question on screen, or one in the box's own units where its
    model coordinates are expected, is refused naming the entry."""
    X = pq.candidates(None, 2, 0, count=8)
    people = torch.tensor([0, 1])
    nan = torch.full((2, 2), float("nan"), dtype=torch.float64)
    with pytest.raises(
        InputDataError, match=r"shown\[0\] must be .*; got .* with NaN or inf entries\."
    ):
        pq.ask_people(collaborative, people, X, [nan, None])
    V = torch.full((1, 2, 2), float("nan"), dtype=torch.float64)
    with pytest.raises(
        InputDataError, match=r"shown_virtual\[0\] .* with NaN or inf entries\."
    ):
        pq.ask_people(collaborative, people, X, [X[:2], None], shown_virtual=[V, None])
    box = DesignBox(torch.tensor([[0.0, -5.0], [1.0, 5.0]], dtype=torch.float64))
    units = torch.tensor([[[0.1, 4.0], [0.0, 5.0]]], dtype=torch.float64)
    with pytest.raises(
        InputDataError,
        match=r"shown_virtual\[0\] must lie in the box's model coordinates, "
        r"\[0.0, 0.0\] to \[1.0, 1.0\]; got values from \[0.0, 4.0\] to \[0.1, "
        r"5.0\] \(designs in the box's own units\? map them with box.to_model\)\.",
    ):
        pq.ask_people(
            collaborative,
            people,
            X,
            [X[:2], None],
            shown_virtual=[units, None],
            box=box,
            step=0.1,
        )
    with pytest.raises(InputDataError, match=r"shown\[1\] must lie in the box"):
        pq.ask_people(collaborative, people, X, [None, units[0]], box=box, step=0.1)
