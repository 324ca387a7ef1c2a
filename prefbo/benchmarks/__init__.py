r"""Test problems and simulated people for preference-learning experiments."""

from prefbo.benchmarks.answer_models import (
    CONFLICT,
    INDIFFERENT,
    IndifferentPerson,
    LogitPerson,
    ParetoPerson,
)
from prefbo.benchmarks.people import SimulatedPerson
from prefbo.benchmarks.problems import Branin, UtilityProblem
from prefbo.benchmarks.suite import (
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
