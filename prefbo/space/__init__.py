r"""Search spaces of preference studies: continuous (linear or log), integer,
ordinal and categorical variables, and their unit-cube encoding."""

from prefbo.space.space import MAX_GRID, Space
from prefbo.space.variables import (
    Categorical,
    Continuous,
    Integer,
    Ordinal,
    Variable,
    variable_from_dict,
)

__all__ = [
    "MAX_GRID",
    "Categorical",
    "Continuous",
    "Integer",
    "Ordinal",
    "Space",
    "Variable",
    "variable_from_dict",
]
