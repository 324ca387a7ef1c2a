r"""Search spaces of preference studies: continuous (linear or log), integer,
ordinal, categorical and circular variables, finite item pools described by
features, and their unit-cube encoding."""

from prefbo.space.circular import Circular
from prefbo.space.pool import ItemPool
from prefbo.space.space import KINDS, MAX_GRID, Space, variable_from_dict
from prefbo.space.variables import (
    MAX_INTEGER_SPAN,
    MAX_LOG_INTEGER,
    Categorical,
    Continuous,
    Integer,
    Ordinal,
    Variable,
)

__all__ = [
    "KINDS",
    "MAX_GRID",
    "MAX_INTEGER_SPAN",
    "MAX_LOG_INTEGER",
    "ItemPool",
    "Categorical",
    "Circular",
    "Continuous",
    "Integer",
    "Ordinal",
    "Space",
    "Variable",
    "variable_from_dict",
]
