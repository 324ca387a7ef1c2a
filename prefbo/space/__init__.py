r"""Search spaces of preference studies: continuous (linear or log), integer,
ordinal and categorical variables, finite item pools described by features,
and their unit-cube encoding."""

from prefbo.space.pool import ItemPool
from prefbo.space.space import KINDS, MAX_GRID, Space, variable_from_dict
from prefbo.space.variables import (
    Categorical,
    Continuous,
    Integer,
    Ordinal,
    Variable,
)

__all__ = [
    "KINDS",
    "MAX_GRID",
    "ItemPool",
    "Categorical",
    "Continuous",
    "Integer",
    "Ordinal",
    "Space",
    "Variable",
    "variable_from_dict",
]
