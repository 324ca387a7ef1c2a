r"""How a served study shows an option (the study file's ``[display]``).

- ``values``: the values with their names (the page shows them itself);
- ``files``: a file per design from a folder, named by ``pattern`` formatted
  with the design's values (``"{photo}.jpg"``); its type from the extension;
- ``callable``: ``module:function``, called with the design's values (a dict
  by variable name) and returning ``(bytes, mime type)``, e.g. a photo
  filter applied to a photo. The module is looked up on the study file's
  folder first; at start-up it is imported and tried on a sample design,
  which must return within :data:`SAMPLE_SECONDS`. While serving, each call
  runs on a thread of its own and is given :data:`RENDER_SECONDS` from its
  start: a design it fails on or does not return for is a
  :class:`RenderError` (the question is replaced) and is remembered, so a
  function that hangs on a design is not called on it again. Calls that never
  return are counted (:attr:`Renderer.stuck`); from :data:`MAX_STUCK` on the
  display is broken: every render fails at once and ``/healthz`` says so.

The page shows images, audio, video and text by their mime type.
"""

from __future__ import annotations

import importlib
import mimetypes
import sys
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, NamedTuple

from prefbo.serve.config import StudyConfig, StudyFileError


class Rendered(NamedTuple):
    r"""A rendered option: its bytes and their mime type."""

    content: bytes
    mime: str


CACHE_SIZE = 512  # rendered options (and designs that failed) kept in memory
#: Seconds a callable may take on the sample design at start-up.
SAMPLE_SECONDS = 10.0
#: Seconds a callable may take on a design while serving.
RENDER_SECONDS = 5.0
#: Calls still running past their time from which the display is broken.
MAX_STUCK = 8


class RenderError(Exception):
    r"""A design that could not be rendered (the server logs why)."""


class Renderer:
    r"""Renders a study's options; checks a callable at start-up.

    Raises:
        StudyFileError: ``display.function`` cannot be imported, is not
            callable, or fails, returns something else than ``(bytes,
            mime type)`` or takes over :data:`SAMPLE_SECONDS` on a sample
            design (the message names the study file and the field).
    """

    def __init__(self, config: StudyConfig) -> None:
        self.config = config
        self.kind = config.display["kind"]
        self._cache: OrderedDict[Any, Rendered] = OrderedDict()
        self._failed: OrderedDict[Any, str] = OrderedDict()
        self._running: dict[Any, Future] = {}
        self._stuck: set[Any] = set()
        self._lock = threading.Lock()
        self._function: Callable[[dict[str, Any]], Any] | None = None
        if self.kind == "callable":
            self._function = load_callable(
                config.display["function"], config.root, config.name
            )
        if self.kind == "files":
            self._folder = (config.root / config.display["folder"]).resolve()
        if self.kind == "callable":  # one design now: a wrong return stops here
            self._try_sample()

    def _try_sample(self) -> None:
        r"""Render a sample design, given :data:`SAMPLE_SECONDS` (a callable
        that hangs is left behind on its thread: the start-up stops).

        Raises:
            StudyFileError: The design was not rendered in time, or not
                rendered (the message names the study file and the field).
        """
        sample = self.config.space.decode(self.config.space.sample(1, seed=0))[0]
        where = (
            f"{self.config.name}: display.function {self.config.display['function']!r}"
        )
        try:
            self.render(sample, timeout=SAMPLE_SECONDS)
        except RenderError as e:  # its message names display.function
            message = str(e).removeprefix("display.function ")
            raise StudyFileError(f"{where} {message}") from e

    def mime(self, values: dict[str, Any]) -> str | None:
        r"""The mime type of an option (``None`` for ``values``)."""
        if self.kind == "values":
            return None
        if self.kind == "files":
            return _guess(self._file(values))
        return self.render(values).mime

    def check(self, values: dict[str, Any]) -> str | None:
        r"""The mime type of an option that can be shown (``None`` for
        ``values``): a callable's option is rendered (and cached), a file's
        must exist.

        Raises:
            RenderError: The option cannot be shown.
        """
        if self.kind == "files":
            path = self._file(values)
            if not path.is_file():
                raise RenderError(f"no file {path.name!r} in the display folder.")
        return self.mime(values)

    def render(self, values: dict[str, Any], timeout: float | None = None) -> Rendered:
        r"""An option's bytes and mime type.

        Args:
            values: The design, a dict by variable name.
            timeout: Seconds a callable may take (default
                :data:`RENDER_SECONDS`).

        Raises:
            RenderError: The option cannot be rendered: the file cannot be
                read, or the callable failed (any exception, ``SystemExit``
                too), returned something else than ``(bytes, mime type)`` or
                did not return in time, on this design now or before.
        """
        key = tuple(sorted((k, repr(v)) for k, v in values.items()))
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            if key in self._failed:
                raise RenderError(self._failed[key])
        if self.kind == "files":
            path = self._file(values)
            try:
                out = Rendered(path.read_bytes(), _guess(path))
            except OSError as e:
                raise RenderError(f"cannot read {path}: {e}") from e
        elif self.kind == "callable":
            out = self._call(
                key, values, RENDER_SECONDS if timeout is None else timeout
            )
        else:
            raise RenderError("a 'values' display has nothing to render.")
        with self._lock:
            _remember(self._cache, key, out)
        return out

    @property
    def stuck(self) -> int:
        r"""Calls of the callable still running past their time."""
        with self._lock:
            return len(self._stuck)

    def health(self) -> dict[str, Any]:
        r"""``{"ok", "stuck"}``: the display is broken (``ok`` false) once
        :data:`MAX_STUCK` calls have not returned."""
        stuck = self.stuck
        return {"ok": stuck < MAX_STUCK, "stuck": stuck}

    def _call(self, key: Any, values: dict[str, Any], timeout: float) -> Rendered:
        r"""The callable's ``(bytes, mime type)`` for ``values``, run on a
        thread of its own (one run per design at a time) and waited for
        ``timeout`` seconds from its start; a failure is remembered for the
        design, a run past its time counted in :attr:`stuck` until it ends."""
        with self._lock:
            if len(self._stuck) >= MAX_STUCK:
                raise RenderError(
                    f"display.function is stuck: {len(self._stuck)} calls have "
                    "not returned; fix it and restart the server."
                )
            future = self._running.get(key)
            if future is None:
                future = Future()
                self._running[key] = future
                threading.Thread(
                    target=self._run,
                    args=(key, future, dict(values)),
                    name="prefbo-render",
                    daemon=True,
                ).start()
        try:
            result = future.result(timeout)
        except FutureTimeout:
            with self._lock:
                if not future.done():
                    self._stuck.add(key)
            return self._fail(
                key,
                f"display.function did not return within {timeout:g} s on {values}.",
            )
        except BaseException as e:  # the user's code, SystemExit included
            return self._fail(key, f"display.function failed on {values}: {e!r}")
        content, mime = result if _pair(result) else (None, None)
        if not isinstance(content, (bytes, bytearray)) or not isinstance(mime, str):
            return self._fail(
                key,
                "display.function must return (bytes, mime type); got "
                f"{_shape(result)} for {values}.",
            )
        return Rendered(bytes(content), mime)

    def _run(self, key: Any, future: Future, values: dict[str, Any]) -> None:
        r"""One call of the callable, its outcome set on ``future``."""
        try:
            future.set_result(self._function(values))
        except BaseException as e:  # the user's code: reported, not raised
            future.set_exception(e)
        finally:
            with self._lock:
                self._running.pop(key, None)
                self._stuck.discard(key)

    def _fail(self, key: Any, message: str) -> Rendered:
        with self._lock:
            _remember(self._failed, key, message)
        raise RenderError(message)

    def _file(self, values: dict[str, Any]) -> Path:
        name = self.config.display["pattern"].format(**values)
        path = (self._folder / name).resolve()
        if not path.is_relative_to(self._folder):
            raise RenderError(f"{name!r} lies outside the display folder.")
        return path


def _remember(cache: OrderedDict, key: Any, value: Any) -> None:
    r"""Put ``key`` in a bounded LRU ``cache`` (:data:`CACHE_SIZE`)."""
    cache[key] = value
    cache.move_to_end(key)
    if len(cache) > CACHE_SIZE:
        cache.popitem(last=False)


def _pair(result: Any) -> bool:
    r"""Whether ``result`` is a tuple of two."""
    return isinstance(result, tuple) and len(result) == 2


def _shape(result: Any) -> str:
    r"""What a callable returned, in words: ``(str, str)`` for a pair."""
    if isinstance(result, tuple):
        return "(" + ", ".join(type(x).__name__ for x in result) + ")"
    return type(result).__name__


def _guess(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def load_callable(
    spec: str, root: Path, study: str = "study"
) -> Callable[[dict[str, Any]], Any]:
    r"""The function ``module:function``, the module looked up in ``root``
    first.

    Args:
        spec: ``"module:function"``.
        root: The study file's folder.
        study: The study file's name, for the messages.

    Raises:
        StudyFileError: It cannot be imported (whatever the module raises,
            a ``SyntaxError`` too: named on one line with the file and line)
            or is not callable.
    """
    where = f"{study}: display.function {spec!r}"
    module_name, _, attr = spec.partition(":")
    if str(root.resolve()) not in sys.path:
        sys.path.insert(0, str(root.resolve()))
    importlib.invalidate_caches()  # a module written since the last import
    try:
        function = getattr(importlib.import_module(module_name), attr)
    except KeyboardInterrupt:  # the person at the terminal: stop
        raise
    except BaseException as e:  # the user's module: anything it raises at import
        line = None if isinstance(e, SyntaxError) else _line_in(e, root)
        at = "" if line is None else f" ({line})"
        raise StudyFileError(f"{where} cannot be loaded: {describe(e)}{at}") from e
    if not callable(function):
        raise StudyFileError(f"{where} is not callable; got {type(function).__name__}.")
    return function


def describe(error: BaseException) -> str:
    r"""``error`` as ``"Type: message"`` on one line (a ``SyntaxError``'s
    message names its file and line)."""
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _line_in(error: BaseException, root: Path) -> str | None:
    r"""The innermost line of ``error``'s traceback in a file under
    ``root`` (``"render.py line 3"``), or ``None``."""
    root, found = root.resolve(), None
    for frame, lineno in traceback.walk_tb(error.__traceback__):
        name = frame.f_code.co_filename
        if name.startswith("<"):  # <frozen importlib._bootstrap>, <string>
            continue
        path = Path(name).resolve()
        if path.is_relative_to(root):
            found = f"{path.relative_to(root)} line {lineno}"
    return found
