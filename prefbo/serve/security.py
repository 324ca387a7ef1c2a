r"""What ``prefbo serve`` does to every request and log line, whatever the
route: bounded JSON bodies, security headers, and secrets kept out of logs.

- :func:`read_json` reads a request body up to :data:`MAX_BODY` bytes and
  stops reading there (a body that declares or sends more is a 413 after at
  most that much), and refuses JSON nested deeper than
  :data:`MAX_DEPTH` (a 400, before the parser's recursion limit is reached).
- :class:`SecurityHeaders` adds :data:`HEADERS` to every response: a
  content security policy that allows only the server's own scripts, styles
  and media, no framing (clickjacking), no MIME sniffing, and no
  ``Referer`` (participants' tokens are in their URLs).
- :class:`RedactTokens`, a logging filter, replaces the secret part of every
  participant, researcher and join path (:func:`redact`) in a log record's
  message, arguments and traceback.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY = 64 * 1024  # bytes
MAX_DEPTH = 32  # nesting of a JSON body

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        "img-src 'self' data: blob:; media-src 'self' blob:; object-src 'none'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

#: the path segment after each of these is a secret
_SECRET = re.compile(r"(/(?:api/)?(?:p|r)/|/join/)[^/\s?#\"']+")


def redact(text: str) -> str:
    r"""``text`` with the secret of every ``/p/<token>``, ``/r/<token>``,
    ``/api/p/<token>``, ``/api/r/<token>`` and ``/join/<code>`` replaced by
    ``…``."""
    return _SECRET.sub(r"\1…", text)


class RedactTokens(logging.Filter):
    r"""A logging filter that redacts (:func:`redact`) a record's message,
    its string arguments (kept in place, so formatters that unpack them,
    such as uvicorn's access formatter, still work) and its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redacted(v) for k, v in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def _redacted(value: Any) -> Any:
    return redact(value) if isinstance(value, str) else value


#: loggers whose records can carry a request's path
LOGGERS = ("prefbo.serve", "uvicorn", "uvicorn.error", "uvicorn.access")


def redact_logs() -> None:
    r"""Add :class:`RedactTokens` to the loggers of :data:`LOGGERS` (once).

    A logger's filter sees the records made on that logger, so each logger
    that a path reaches gets its own."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())


class SecurityHeaders:
    r"""ASGI middleware adding :data:`HEADERS` to every HTTP response that
    does not set them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self.headers if k not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def read_body(request: Request) -> bytes:
    r"""The request's body, read up to :data:`MAX_BODY` bytes.

    Raises:
        HTTPException: 413 when the body declares or sends more (reading
            stops at the limit).
    """
    too_big = HTTPException(413, f"the body is over {MAX_BODY // 1024} kB.")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise too_big
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise too_big
    return bytes(raw)


async def read_json(request: Request) -> dict[str, Any]:
    r"""The request's JSON object (an empty body: ``{}``).

    Raises:
        HTTPException: 413 (see :func:`read_body`); 400 when the body is not
            JSON, not an object, or nested deeper than :data:`MAX_DEPTH`.
    """
    raw = await read_body(request)
    if _depth(raw) > MAX_DEPTH:
        raise HTTPException(400, f"the body is nested deeper than {MAX_DEPTH} levels.")
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        raise HTTPException(400, "the body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise HTTPException(400, "the body must be a JSON object.")
    return data


def _depth(raw: bytes) -> int:
    r"""The deepest nesting of brackets in ``raw`` outside strings (an
    upper bound on a JSON document's depth, for any input)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest
