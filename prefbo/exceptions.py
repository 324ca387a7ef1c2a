r"""Errors and warnings raised by prefbo.

Every error names the argument at fault, what was expected and what came, in
the style of BoTorch's ``botorch.exceptions``. Errors subclass the built-in
exception a caller would already catch (``ValueError``, ``TypeError``), so
``except ValueError`` keeps working.
"""

from __future__ import annotations


class PrefboError(Exception):
    r"""Base class of every prefbo error."""


class InputDataError(PrefboError, ValueError):
    r"""Training data (designs, comparisons) are malformed or inconsistent."""


class InfeasibleConstraintsError(InputDataError):
    r"""Linear constraints (e.g. hard preference constraints) admit no point."""


class SessionLogError(InputDataError):
    r"""A session log is damaged before its last line, or is not a session log."""


class SessionLogLockedError(SessionLogError):
    r"""A session log is open for writing in another optimiser (one writer per log)."""


class SettingsVersionError(InputDataError):
    r"""Settings (a session log's header) of a layout this prefbo cannot
    read: a newer version, or one that is not a version at all."""


class InputTypeError(PrefboError, TypeError):
    r"""An argument has the wrong type or dtype."""


class UnsupportedError(PrefboError, ValueError):
    r"""A valid request that this model or function does not support."""


class NumericalError(PrefboError, RuntimeError):
    r"""A computation failed numerically (non-finite values, no factorisation)."""


class PrefboWarning(UserWarning):
    r"""Base class of every prefbo warning."""


class NumericalWarning(PrefboWarning):
    r"""Jitter was added or an iteration stopped early; results may be less exact."""


class ConvergenceWarning(PrefboWarning):
    r"""An iterative solver hit its iteration budget before its tolerance."""


class ComparisonGraphWarning(PrefboWarning):
    r"""The answers cannot order some designs except through the kernel."""


class SessionLogWarning(PrefboWarning):
    r"""A session log ends in a torn line (a crash mid-write); it was dropped."""
