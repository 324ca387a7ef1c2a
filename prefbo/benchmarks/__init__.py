r"""Test problems and simulated people for preference-learning experiments."""

from prefbo.benchmarks.people import SimulatedPerson
from prefbo.benchmarks.problems import Branin, UtilityProblem

__all__ = ["Branin", "SimulatedPerson", "UtilityProblem"]
