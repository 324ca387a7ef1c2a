r"""The web application of ``prefbo serve`` (Starlette).

Pages: ``/join/<join code>`` (a new participant, redirected to their own
link), ``/p/<token>`` (the participant's page), ``/r/<researcher token>``
(the researcher's page, with ``export.csv`` and ``export.json``).

JSON endpoints (what the page and :class:`~prefbo.serve.client.StudyClient`
use): ``POST /api/join`` ``{"join": code, "label": ...}`` -> ``{"token",
"url"}``; ``GET /api/p/<token>/question``; ``POST /api/p/<token>/answer``
``{"question_id", "choice"}`` (``choice`` ``null``: no preference) -> the
next question; ``POST /api/p/<token>/undo``; ``GET /api/p/<token>/best``;
``GET /api/r/<token>/status``; ``POST /api/r/<token>/participants``.

Every error is a JSON ``{"error": message}`` with a 4xx status, or a 500
without any detail (the server logs the traceback): 400 malformed JSON, 403
joining closed, 404 unknown link or question, 409 an answer that does not
fit (answered already, not the current question), 413 a body over 64 kB,
422 a bad choice.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
from pathlib import Path
from typing import Any

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
from prefbo.serve.store import Store

log = logging.getLogger("prefbo.serve")
HERE = Path(__file__).parent
MAX_BODY = 64 * 1024


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
    """

    def __init__(
        self,
        store: Store,
        config: StudyConfig,
        renderer: Renderer,
        join_code: str,
        researcher_token: str,
    ) -> None:
        self.store, self.config, self.renderer = store, config, renderer
        self.join_code, self.researcher_token = join_code, researcher_token
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(["html"]),
        )
        self.templates.filters["short"] = _short

    # ------------------------------------------------------------ helpers
    def _participant(self, token: str) -> dict[str, Any]:
        row = self.store.participant_by_token(token)
        if row is None:
            raise HTTPException(404, "unknown participant link.")
        return row

    def _researcher(self, token: str) -> None:
        if not hmac.compare_digest(token.encode(), self.researcher_token.encode()):
            raise HTTPException(404, "not found.")

    async def _body(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        if len(raw) > MAX_BODY:
            raise HTTPException(413, f"the body is over {MAX_BODY} bytes.")
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            raise HTTPException(400, "the body is not valid JSON.") from None
        if not isinstance(data, dict):
            raise HTTPException(400, "the body must be a JSON object.")
        return data

    def _with_media(self, question: dict[str, Any]) -> dict[str, Any]:
        if question.get("done") or self.renderer.kind == "values":
            return question
        try:
            question["media"] = [self.renderer.mime(o) for o in question["options"]]
        except RenderError:
            log.exception("rendering question %s", question.get("question_id"))
            question["media"] = [None] * len(question["options"])
        return question

    def _join(self, label: Any) -> tuple[int, str]:
        most = self.config.max_participants
        if most is not None and self.store.count_participants() >= most:
            raise HTTPException(403, "this study is full; joining is closed.")
        if label is None:
            label = f"participant {self.store.count_participants() + 1}"
        if not isinstance(label, str) or len(label) > 200:
            raise HTTPException(422, "label must be a string of at most 200 chars.")
        token = new_token()
        return self.store.add_participant(token, label), token

    def _page(self, name: str, **context: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(config=self.config, **context)
        return HTMLResponse(html)

    # -------------------------------------------------------- participant
    async def join_page(self, request: Request) -> Response:
        code = request.path_params["code"]
        if not hmac.compare_digest(code.encode(), self.join_code.encode()):
            raise HTTPException(404, "unknown join link.")
        label = request.query_params.get("label")
        _, token = await run_in_threadpool(self._join, label)
        return RedirectResponse(f"/p/{token}", status_code=303)

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

        def work() -> dict[str, Any]:
            pid = self._participant(token)["id"]
            return self._with_media(flow.current(self.store, self.config, pid))

        return JSONResponse(await run_in_threadpool(work))

    async def answer(self, request: Request) -> Response:
        token = request.path_params["token"]
        data = await self._body(request)
        if "choice" not in data:
            raise HTTPException(
                422, "choice is missing (an option index, or null: no preference)."
            )

        def work() -> dict[str, Any]:
            pid = self._participant(token)["id"]
            nxt = flow.answer(
                self.store,
                self.config,
                pid,
                data.get("question_id"),
                data["choice"],
            )
            return self._with_media(nxt)

        return JSONResponse(await run_in_threadpool(work))

    async def undo(self, request: Request) -> Response:
        token = request.path_params["token"]

        def work() -> dict[str, Any]:
            pid = self._participant(token)["id"]
            return self._with_media(flow.undo(self.store, self.config, pid))

        return JSONResponse(await run_in_threadpool(work))

    async def best(self, request: Request) -> Response:
        token = request.path_params["token"]

        def work() -> dict[str, Any]:
            pid = self._participant(token)["id"]
            snap = self.store.latest_snapshot()
            fav = None if snap is None else snap["data"]["participants"].get(str(pid))
            return {
                "favourite": fav,
                "as_of_answers": None if snap is None else snap["answers"],
            }

        return JSONResponse(await run_in_threadpool(work))

    async def option(self, request: Request) -> Response:
        token = request.path_params["token"]
        qid, index = request.path_params["qid"], request.path_params["index"]

        def work() -> tuple[bytes, str]:
            pid = self._participant(token)["id"]
            rows = [q for q in self.store.questions_of(pid) if q["id"] == qid]
            if not rows or rows[0]["shown_at"] is None:
                raise HTTPException(404, "no such question for this participant.")
            if not 0 <= index < len(rows[0]["options"]):
                raise HTTPException(404, "no such option.")
            values = flow.option_values(self.config, rows[0]["options"])
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
            "participants": self.store.participants(),
            "answers": self.store.count_answers(),
            "snapshot": snap,
        }

    async def researcher_page(self, request: Request) -> Response:
        token = request.path_params["token"]
        self._researcher(token)
        status = await run_in_threadpool(self._status)
        answered = await run_in_threadpool(self.store.answered)
        times = [q["answered_at"] for q in answered]
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
    def app(self) -> Starlette:
        r"""The ASGI application."""

        async def http_error(request: Request, exc: Exception) -> Response:
            assert isinstance(exc, HTTPException)
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

        async def flow_error(request: Request, exc: Exception) -> Response:
            status = {flow.Conflict: 409, flow.NotFound: 404, flow.Invalid: 422}
            return JSONResponse({"error": str(exc)}, status_code=status[type(exc)])

        async def server_error(request: Request, exc: Exception) -> Response:
            log.exception("%s %s", request.method, request.url.path, exc_info=exc)
            return JSONResponse({"error": "internal server error."}, status_code=500)

        async def health(request: Request) -> Response:
            return JSONResponse({"ok": True})

        routes = [
            Route("/healthz", health),
            Route("/join/{code}", self.join_page),
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
        return Starlette(routes=routes, exception_handlers=handlers)
