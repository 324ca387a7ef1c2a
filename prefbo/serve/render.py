r"""How a served study shows an option (the study file's ``[display]``).

- ``values``: the values with their names (the page shows them itself);
- ``files``: a file per design from a folder, named by ``pattern`` formatted
  with the design's values (``"{photo}.jpg"``); its type from the extension;
- ``callable``: ``module:function``, called with the design's values (a dict
  by variable name) and returning ``(bytes, mime type)``, e.g. a photo
  filter applied to a photo. The module is looked up on the study file's
  folder first.

The page shows images, audio, video and text by their mime type.
"""

from __future__ import annotations

import importlib
import mimetypes
import sys
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefbo.serve.config import StudyConfig, StudyFileError

CACHE_SIZE = 512  # rendered options kept in memory


class RenderError(Exception):
    r"""A design that could not be rendered (the server logs why)."""


class Renderer:
    r"""Renders a study's options; checks a callable at start-up.

    Raises:
        StudyFileError: ``display.function`` cannot be imported, is not
            callable, or fails or returns something else than ``(bytes,
            mime type)`` on a sample design.
    """

    def __init__(self, config: StudyConfig) -> None:
        self.config = config
        self.kind = config.display["kind"]
        self._cache: OrderedDict[Any, tuple[bytes, str]] = OrderedDict()
        self._function: Callable[[dict[str, Any]], Any] | None = None
        if self.kind == "callable":
            self._function = load_callable(config.display["function"], config.root)
        if self.kind == "files":
            self._folder = (config.root / config.display["folder"]).resolve()
        if self.kind == "callable":  # one design now: a wrong return stops here
            sample = config.space.decode(config.space.sample(1, seed=0))[0]
            try:
                self.render(sample)
            except RenderError as e:
                raise StudyFileError(f"display.function: {e}") from e

    def mime(self, values: dict[str, Any]) -> str | None:
        r"""The mime type of an option (``None`` for ``values``)."""
        if self.kind == "values":
            return None
        if self.kind == "files":
            return _guess(self._file(values))
        return self.render(values)[1]

    def render(self, values: dict[str, Any]) -> tuple[bytes, str]:
        r"""``(bytes, mime type)`` of an option."""
        key = tuple(sorted((k, repr(v)) for k, v in values.items()))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        if self.kind == "files":
            path = self._file(values)
            try:
                out = (path.read_bytes(), _guess(path))
            except OSError as e:
                raise RenderError(f"cannot read {path}: {e}") from e
        elif self.kind == "callable":
            try:
                result = self._function(dict(values))
            except Exception as e:  # the user's code: reported, not raised
                raise RenderError(f"display.function failed on {values}: {e!r}") from e
            if (
                not isinstance(result, tuple)
                or len(result) != 2
                or not isinstance(result[0], (bytes, bytearray))
                or not isinstance(result[1], str)
            ):
                raise RenderError(
                    "display.function must return (bytes, mime type); got "
                    f"{type(result).__name__} for {values}."
                )
            out = (bytes(result[0]), result[1])
        else:
            raise RenderError("a 'values' display has nothing to render.")
        self._cache[key] = out
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return out

    def _file(self, values: dict[str, Any]) -> Path:
        name = self.config.display["pattern"].format(**values)
        path = (self._folder / name).resolve()
        if not path.is_relative_to(self._folder):
            raise RenderError(f"{name!r} lies outside the display folder.")
        return path


def _guess(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def load_callable(spec: str, root: Path) -> Callable[[dict[str, Any]], Any]:
    r"""The function ``module:function``, the module looked up in ``root``
    first.

    Raises:
        StudyFileError: It cannot be imported or is not callable.
    """
    module_name, _, attr = spec.partition(":")
    if str(root.resolve()) not in sys.path:
        sys.path.insert(0, str(root.resolve()))
    try:
        function = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise StudyFileError(f"display.function {spec!r} cannot be loaded: {e}") from e
    if not callable(function):
        raise StudyFileError(f"display.function {spec!r} is not callable.")
    return function
