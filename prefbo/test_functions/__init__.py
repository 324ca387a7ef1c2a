r"""Test problems and simulated people for preference-learning experiments."""

from prefbo.test_functions.answer_models import (
    CONFLICT,
    INDIFFERENT,
    IndifferentPerson,
    LogitPerson,
    ParetoPerson,
)
from prefbo.test_functions.people import BasePerson, SimulatedPerson
from prefbo.test_functions.problems import Branin, UtilityProblem
from prefbo.test_functions.suite import (
    Ackley5,
    Hartmann3,
    Hartmann6,
    Hartmann6in20,
    ThermalComfort,
)

__all__ = [
    "CONFLICT",
    "INDIFFERENT",
    "Ackley5",
    "BasePerson",
    "Branin",
    "Hartmann3",
    "Hartmann6",
    "Hartmann6in20",
    "IndifferentPerson",
    "LogitPerson",
    "ParetoPerson",
    "SimulatedPerson",
    "ThermalComfort",
    "UtilityProblem",
]
