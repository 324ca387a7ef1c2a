r"""The web application of ``prefbo serve`` (Starlette).

Pages: ``/join/<join code>`` (a start page; its button, a ``POST`` to the
same link, makes a new participant and redirects them to their own link, so
a link scanner or a chat preview that fetches the link makes nobody; an
optional ``?label=`` names the participant in the export),
``/p/<token>`` (the participant's page), ``/r/<researcher token>`` (the
researcher's page, with ``export.csv`` and ``export.json``). A person who
opens a wrong link, or a full study's, gets a page saying so.

JSON endpoints (what the page and :class:`~prefbo.serve.client.StudyClient`
use): ``POST /api/join`` ``{"join": code, "label": ...}`` -> ``{"token",
"url"}``; ``GET /api/p/<token>/question``; ``POST /api/p/<token>/answer``
``{"question_id", "choice"}`` (``choice`` ``null``: no preference) -> the
next question; ``POST /api/p/<token>/undo`` ``{"question_id"}`` (the answered
question to withdraw: a question's ``previous_id``; a repeated undo of the
same question changes nothing); ``GET /api/p/<token>/best``;
``GET /api/r/<token>/status``; ``POST /api/r/<token>/participants``.

Every error of ``/api`` is a JSON ``{"error": message}`` with a 4xx status,
or a 500 without any detail (the server logs the traceback, tokens
redacted): 400 malformed JSON, 403 joining closed, 404 unknown link or
question, 409 an answer that does not fit (answered already, not the current
question), 413 a body over 64 kB, 422 a bad choice; the pages people open
show the same as a styled page. Every response carries the headers of
:mod:`prefbo.serve.security`.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.to_thread
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from prefbo.serve import flow
from prefbo.serve.config import StudyConfig
from prefbo.serve.export import export_csv, export_json
from prefbo.serve.plots import answers_over_time, utility_slice
from prefbo.serve.render import Renderer, RenderError
from prefbo.serve.rows import ParticipantRow
from prefbo.serve.security import (
    MAX_BODY,
    SecurityHeaders,
    read_body,
    read_json,
    redact_logs,
)
from prefbo.serve.store import Store, StudyFull

__all__ = ["MAX_BODY", "StudyApp", "new_token"]

log = logging.getLogger("prefbo.serve")
HERE = Path(__file__).parent
#: what a join of a full study is told
FULL = "this study is full; joining is closed."
#: tries to show a question whose options render, before giving up
RENDER_TRIES = 5
#: seconds after which no further question is tried for one request
QUESTION_SECONDS = 10.0
#: renders waited for at once (threads of their own; more requests queue)
RENDER_WAITS = 32


ERROR_TITLES = {
    403: "This study is closed",
    404: "This link is not known",
    409: "This answer does not fit",
    413: "Too much was sent",
    422: "This cannot be used",
    500: "Something went wrong",
    503: "Please try again",
}


async def favicon(request: Request) -> Response:
    r"""The site's icon, for browsers that ask for ``/favicon.ico``."""
    icon = (HERE / "static" / "favicon.svg").read_bytes()
    return Response(icon, media_type="image/svg+xml")


#: The longest participant label (the database's column).
MAX_LABEL = 200


def check_label(label: Any) -> None:
    r"""A participant's label: ``None`` (numbered) or printable text of at
    most :data:`MAX_LABEL` characters.

    Raises:
        HTTPException: 422 naming what is wrong.
    """
    if label is None:
        return
    if not isinstance(label, str) or len(label) > MAX_LABEL:
        raise HTTPException(
            422, f"label must be a string of at most {MAX_LABEL} characters."
        )
    if not label.isprintable():
        raise HTTPException(
            422, "label must be printable text (no control characters)."
        )
    if not label.strip():
        raise HTTPException(
            422, "label must not be blank (leave it out to number the participant)."
        )


def new_token() -> str:
    r"""An unguessable token (144 random bits, URL-safe)."""
    return secrets.token_urlsafe(18)


def _short(value: Any) -> Any:
    r"""A float to 4 significant digits for the page; anything else as is."""
    return f"{value:.4g}" if isinstance(value, float) else value


class StudyApp:
    r"""The handlers of one study; :meth:`app` is the ASGI application.

    Args:
        store: The study's database.
        config: The study.
        renderer: How options are shown.
        join_code: The secret in the join link.
        researcher_token: The secret of the researcher's page.
        health: What ``/healthz`` reports, a dict with ``ok`` (200 if true,
            else 503; see :func:`~prefbo.serve.supervisor.health_report`);
            default: a write probe of the database alone.
    """

    def __init__(
        self,
        store: Store,
        config: StudyConfig,
        renderer: Renderer,
        join_code: str,
        researcher_token: str,
        health: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.store, self.config, self.renderer = store, config, renderer
        self.join_code, self.researcher_token = join_code, researcher_token
        self.health = health
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(["html"]),
        )
        self.templates.filters["short"] = _short
        self._render_waits = anyio.CapacityLimiter(RENDER_WAITS)

    # ------------------------------------------------------------ helpers
    def _participant(self, token: str) -> ParticipantRow:
        row = self.store.participant_by_token(token)
        if row is None:
            raise HTTPException(404, "unknown participant link.")
        return row

    def _researcher(self, token: str) -> None:
        if not hmac.compare_digest(token.encode(), self.researcher_token.encode()):
            raise HTTPException(404, "not found.")

    async def _body(self, request: Request) -> dict[str, Any]:
        return await read_json(request)

    async def _with_media(self, pid: int, question: dict[str, Any]) -> dict[str, Any]:
        r"""``question`` with each option's mime type; a question with an
        option that cannot be rendered is replaced by a new one (logged), so
        nobody answers an option they could not see. The renders are waited
        for on threads of their own (:data:`RENDER_WAITS`), never the
        request threads that pages, static files and answers need.

        Raises:
            HTTPException: 503 when :data:`RENDER_TRIES` questions in a row
                could not be rendered, or :data:`QUESTION_SECONDS` passed.
        """
        deadline = time.monotonic() + QUESTION_SECONDS
        for _ in range(RENDER_TRIES):
            if question.get("done") or self.renderer.kind == "values":
                return question
            try:
                question["media"] = [
                    await anyio.to_thread.run_sync(
                        self.renderer.check, o, limiter=self._render_waits
                    )
                    for o in question["options"]
                ]
                return question
            except RenderError as e:
                question = await run_in_threadpool(
                    self._replace, pid, question["question_id"], e
                )
            if time.monotonic() > deadline:
                break
        raise HTTPException(503, "no question could be shown; try again later.")

    def _replace(self, pid: int, question_id: str, error: Exception) -> dict:
        r"""Replace participant ``pid``'s question ``question_id`` that
        cannot be shown; where another request (a second tab) replaced it
        first, or the participant moved on, their current question instead:
        a step whose reply shows it (an answer, stored already) is not
        refused for it."""
        try:
            question = flow.replace(
                self.store, self.config, pid, question_id, str(error)
            )
            level, done = logging.WARNING, "replaced by a new one"
        except flow.Conflict:
            question = flow.current(self.store, self.config, pid)
            level, done = logging.INFO, "replaced already"
        log.log(
            level,
            "question %s of participant %d cannot be shown (%s); %s",
            question_id,
            pid,
            error,
            done,
        )
        return question

    def _join(self, label: Any) -> tuple[int, str]:
        check_label(label)
        if label is None:
            label = f"participant {self.store.count_participants() + 1}"
        token = new_token()
        try:
            pid = self.store.add_participant(token, label, self.config.max_participants)
        except StudyFull:
            raise HTTPException(403, FULL) from None
        return pid, token

    def _page(self, name: str, http_status: int = 200, **context: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(config=self.config, **context)
        return HTMLResponse(html, status_code=http_status)

    def _full(self) -> bool:
        most = self.config.max_participants
        return most is not None and self.store.count_participants() >= most

    # -------------------------------------------------------- participant
    async def join_page(self, request: Request) -> Response:
        r"""``GET`` / ``HEAD``: the start page, which makes nobody; ``POST``
        (its button): a new participant, redirected to their own link."""
        code = request.path_params["code"]
        if not hmac.compare_digest(code.encode(), self.join_code.encode()):
            raise HTTPException(404, "unknown join link.")
        if request.method == "POST":
            form = parse_qs((await read_body(request)).decode("utf-8", "replace"))
            label = form.get("label", [None])[0] or None
            _, token = await run_in_threadpool(self._join, label)
            return RedirectResponse(f"/p/{token}", status_code=303)
        label = request.query_params.get("label")
        check_label(label)
        if await run_in_threadpool(self._full):
            raise HTTPException(403, FULL)
        return self._page("start.html", code=code, label=label)

    async def api_join(self, request: Request) -> Response:
        data = await self._body(request)
        code = data.get("join")
        if not isinstance(code, str) or not hmac.compare_digest(
            code.encode(), self.join_code.encode()
        ):
            raise HTTPException(404, "unknown join code.")
        _, token = await run_in_threadpool(self._join, data.get("label"))
        return JSONResponse({"token": token, "url": f"/p/{token}"})

    async def participant_page(self, request: Request) -> Response:
        token = request.path_params["token"]
        await run_in_threadpool(self._participant, token)
        return self._page("participant.html", token=token)

    async def question(self, request: Request) -> Response:
        token = request.path_params["token"]

        def work() -> tuple[int, dict[str, Any]]:
            pid = self._participant(token).id
            return pid, flow.current(self.store, self.config, pid)

        return JSONResponse(await self._with_media(*await run_in_threadpool(work)))

    async def answer(self, request: Request) -> Response:
        token = request.path_params["token"]
        data = await self._body(request)
        if "choice" not in data:
            raise HTTPException(
                422, "choice is missing (an option index, or null: no preference)."
            )

        def work() -> tuple[int, dict[str, Any]]:
            pid = self._participant(token).id
            nxt = flow.answer(
                self.store,
                self.config,
                pid,
                data.get("question_id"),
                data["choice"],
            )
            return pid, nxt

        return JSONResponse(await self._with_media(*await run_in_threadpool(work)))

    async def undo(self, request: Request) -> Response:
        token = request.path_params["token"]
        data = await self._body(request)

        def work() -> tuple[int, dict[str, Any]]:
            pid = self._participant(token).id
            return pid, flow.undo(self.store, self.config, pid, data.get("question_id"))

        return JSONResponse(await self._with_media(*await run_in_threadpool(work)))

    async def best(self, request: Request) -> Response:
        token = request.path_params["token"]

        def work() -> dict[str, Any]:
            pid = self._participant(token).id
            snap = self.store.latest_snapshot()
            fav = None if snap is None else snap.data["participants"].get(str(pid))
            return {
                "favourite": fav,
                "as_of_answers": None if snap is None else snap.answers,
            }

        return JSONResponse(await run_in_threadpool(work))

    async def option(self, request: Request) -> Response:
        token = request.path_params["token"]
        qid, index = request.path_params["qid"], request.path_params["index"]

        def work() -> tuple[bytes, str]:
            pid = self._participant(token).id
            shown = [q for q in self.store.questions_of(pid) if q.id == qid]
            if not shown or shown[0].shown_at is None:
                raise HTTPException(404, "no such question for this participant.")
            if not 0 <= index < len(shown[0].options):
                raise HTTPException(404, "no such option.")
            values = flow.option_values(self.config, shown[0].options)
            try:
                return self.renderer.render(values[index])
            except RenderError as e:
                log.error("rendering option %d of %s: %s", index, qid, e)
                raise HTTPException(500, "the option could not be rendered.") from e

        content, mime = await run_in_threadpool(work)
        return Response(content, media_type=mime, headers={"Cache-Control": "private"})

    # --------------------------------------------------------- researcher
    def _status(self) -> dict[str, Any]:
        snap = self.store.latest_snapshot()
        return {
            "participants": [p.as_dict() for p in self.store.participants()],
            "answers": self.store.count_answers(),
            "snapshot": None if snap is None else snap.as_dict(),
        }

    async def researcher_page(self, request: Request) -> Response:
        token = request.path_params["token"]
        self._researcher(token)
        status = await run_in_threadpool(self._status)
        answered = await run_in_threadpool(self.store.answered)
        times = [q.answered_at for q in answered]
        snap = status["snapshot"]
        slices = [] if snap is None else snap["data"].get("slices", [])
        return self._page(
            "researcher.html",
            token=token,
            status=status,
            join_url=f"{str(request.base_url).rstrip('/')}/join/{self.join_code}",
            answers_plot=answers_over_time(times),
            slice_plots=[(s["name"], utility_slice(s)) for s in slices],
        )

    async def api_status(self, request: Request) -> Response:
        self._researcher(request.path_params["token"])
        return JSONResponse(await run_in_threadpool(self._status))

    async def api_add_participant(self, request: Request) -> Response:
        self._researcher(request.path_params["token"])
        data = await self._body(request)
        pid, token = await run_in_threadpool(self._join, data.get("label"))
        return JSONResponse({"id": pid, "token": token, "url": f"/p/{token}"})

    async def export(self, request: Request) -> Response:
        self._researcher(request.path_params["token"])
        fmt = request.path_params["fmt"]
        if fmt == "csv":
            text = await run_in_threadpool(export_csv, self.store, self.config)
            return Response(
                text,
                media_type="text/csv",
                headers={"Content-Disposition": "attachment; filename=answers.csv"},
            )
        if fmt == "json":
            data = await run_in_threadpool(export_json, self.store, self.config)
            return JSONResponse(data)
        raise HTTPException(404, "export as csv or json.")

    # ---------------------------------------------------------- the app
    def app(self) -> SecurityHeaders:
        r"""The ASGI application (Starlette's, inside
        :class:`~prefbo.serve.security.SecurityHeaders`)."""

        async def http_error(request: Request, exc: Exception) -> Response:
            assert isinstance(exc, HTTPException)
            return self._error(request, exc.status_code, exc.detail)

        async def flow_error(request: Request, exc: Exception) -> Response:
            status = {flow.Conflict: 409, flow.NotFound: 404, flow.Invalid: 422}
            return self._error(request, status[type(exc)], str(exc))

        async def server_error(request: Request, exc: Exception) -> Response:
            log.exception("%s %s", request.method, request.url.path, exc_info=exc)
            return self._error(request, 500, "internal server error.")

        # its own threads: busy request threads (a display that hangs, a
        # crowd) must not keep /healthz from answering
        health_threads = anyio.CapacityLimiter(2)

        async def health(request: Request) -> Response:
            if self.health is not None:
                report = await anyio.to_thread.run_sync(
                    self.health, limiter=health_threads
                )
            else:  # no workers of its own to report on: the database
                error = await anyio.to_thread.run_sync(
                    self.store.write_probe, limiter=health_threads
                )
                database = {"ok": error is None, "error": error}
                report = {"ok": error is None, "database": database, "workers": []}
            if self.renderer.kind == "callable":
                report["display"] = self.renderer.health()
                report["ok"] = report["ok"] and report["display"]["ok"]
            return JSONResponse(report, status_code=200 if report["ok"] else 503)

        routes = [
            Route("/healthz", health),
            Route("/favicon.ico", favicon),
            Route("/join/{code}", self.join_page, methods=["GET", "POST"]),
            Route("/p/{token}", self.participant_page),
            Route("/p/{token}/option/{qid}/{index:int}", self.option),
            Route("/r/{token}", self.researcher_page),
            Route("/r/{token}/export.{fmt}", self.export),
            Route("/api/join", self.api_join, methods=["POST"]),
            Route("/api/p/{token}/question", self.question),
            Route("/api/p/{token}/answer", self.answer, methods=["POST"]),
            Route("/api/p/{token}/undo", self.undo, methods=["POST"]),
            Route("/api/p/{token}/best", self.best),
            Route("/api/r/{token}/status", self.api_status),
            Route(
                "/api/r/{token}/participants",
                self.api_add_participant,
                methods=["POST"],
            ),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
        handlers = {
            HTTPException: http_error,
            flow.Conflict: flow_error,
            flow.NotFound: flow_error,
            flow.Invalid: flow_error,
            Exception: server_error,
        }
        redact_logs()
        # outside Starlette's own error middleware, so that a 500 has them too
        return SecurityHeaders(Starlette(routes=routes, exception_handlers=handlers))

    def _error(self, request: Request, status: int, message: str) -> Response:
        r"""An error as JSON for ``/api`` (and the exports), as a page for
        the pages people open."""
        path = request.url.path
        if path.startswith("/api/") or path.endswith((".csv", ".json")):
            return JSONResponse({"error": message}, status_code=status)
        title = ERROR_TITLES.get(status, "Something went wrong")
        return self._page(
            "error.html", status, title=title, message=message, status=status
        )
