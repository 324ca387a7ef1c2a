r"""A registry of named entries: the loop's strategies and model kinds.

:class:`~prefbo.loop.PreferentialOptimizer` looks its ``strategy`` and
``model`` up by name in one registry each, so a strategy or a model kind of
one's own is added by registering it (before the optimiser is built or a
session log that names it is resumed), without touching the optimiser.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from prefbo.exceptions import InputDataError, InputTypeError
from prefbo.utils.checks import describe

T = TypeVar("T")


class Registry(Generic[T]):
    r"""Entries by name, in order of registration.

    Attributes:
        argument: The optimiser argument that names an entry (``"strategy"``,
            ``"model"``), used in error messages.
        entry_argument: The name of the registering function's argument that
            takes the entry (``"strategy"``, ``"kind"``).
        what: What an entry is, in words (``"a Strategy instance"``).
        entries: The ``{name: entry}`` table.
    """

    def __init__(
        self,
        argument: str,
        entry_argument: str,
        what: str,
        accepts: Callable[[object], bool],
        entries: dict[str, T],
    ) -> None:
        r"""
        Args:
            argument: The optimiser argument that names an entry.
            entry_argument: The registering function's argument for the entry.
            what: What an entry is, in words.
            accepts: Whether an object can be registered.
            entries: The built-in entries.
        """
        self.argument, self.entry_argument = argument, entry_argument
        self.what, self._accepts = what, accepts
        self.entries = dict(entries)

    def register(self, name: str, entry: T) -> None:
        r"""Add ``entry`` as ``name``.

        Raises:
            InputTypeError: ``name`` is not a string or ``entry`` not
                acceptable.
            InputDataError: ``name`` is already registered.
        """
        if not isinstance(name, str):
            raise InputTypeError(f"name must be a str; got {type(name).__name__}.")
        if not self._accepts(entry):
            raise InputTypeError(
                f"{self.entry_argument} must be {self.what}; got {entry!r}."
            )
        if name in self.entries:
            raise InputDataError(f"{self.argument} {name!r} is already registered.")
        self.entries[name] = entry

    def names(self) -> tuple[str, ...]:
        r"""The registered names, in order of registration."""
        return tuple(self.entries)

    def get(self, name: str) -> T:
        r"""The entry registered as ``name``.

        Raises:
            InputTypeError: ``name`` is not a string.
            InputDataError: No entry has that name.
        """
        names = self.names()
        if not isinstance(name, str):
            raise InputTypeError(
                f"{self.argument} must be a str naming one of {names}; got "
                f"{describe(name)}."
            )
        if name not in names:
            raise InputDataError(
                f"{self.argument} must be one of {names}; got {name!r} (one of your "
                "own must be registered first, also before resuming a log that "
                "names it)."
            )
        return self.entries[name]
