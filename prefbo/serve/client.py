r"""A small Python client of ``prefbo serve``'s JSON endpoints, for
experiments that do not use the web page (PsychoPy, a robot, a lab script).
Standard library only.

Example:
    >>> client = StudyClient.join("http://127.0.0.1:8000", join_code)
    >>> q = client.ask()                 # {"options": [{...}, {...}], ...}
    >>> while not q["done"]:
    ...     q = client.tell(person_chooses(q["options"]))
    >>> client.best()
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class StudyServerError(Exception):
    r"""The server refused a request: ``status`` and its ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message = status, message


class StudyClient:
    r"""One participant of a served study.

    Args:
        base_url: The server, e.g. ``"http://127.0.0.1:8000"``.
        token: The participant's token (the last part of their link).
        timeout: Seconds to wait for a reply.
    """

    def __init__(self, base_url: str, token: str, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.question: dict[str, Any] | None = None

    @classmethod
    def join(
        cls, base_url: str, join_code: str, label: str | None = None, **kwargs: Any
    ) -> StudyClient:
        r"""A new participant, joined with the study's join code."""
        data = _request(
            base_url.rstrip("/") + "/api/join",
            {"join": join_code, "label": label},
            kwargs.get("timeout", 10.0),
        )
        return cls(base_url, data["token"], **kwargs)

    def _call(self, path: str, payload: dict[str, Any] | None = None) -> Any:
        url = f"{self.base_url}/api/p/{self.token}{path}"
        return _request(url, payload, self.timeout)

    def ask(self) -> dict[str, Any]:
        r"""The current question: ``options`` (dicts by variable name),
        ``question_id``, ``answered`` and ``total``; ``done`` at the end."""
        self.question = self._call("/question")
        return self.question

    def tell(self, choice: int | None, question_id: str | None = None) -> dict:
        r"""Answer the current question (``choice``: the option's index, or
        ``None`` for no preference where offered); returns the next one."""
        if question_id is None:
            if self.question is None or self.question.get("done"):
                self.ask()
            question_id = self.question["question_id"]
        self.question = self._call(
            "/answer", {"question_id": question_id, "choice": choice}
        )
        return self.question

    def undo(self) -> dict[str, Any]:
        r"""Withdraw the latest answer; returns its question, asked again.

        Raises:
            StudyServerError: No answer to withdraw (422: nothing answered).
        """
        if self.question is None:
            self.ask()
        previous = self.question.get("previous_id")
        self.question = self._call("/undo", {"question_id": previous})
        return self.question

    def best(self) -> dict[str, Any]:
        r"""This participant's favourite as of the workers' latest fit."""
        return self._call("/best")


def _request(url: str, payload: dict[str, Any] | None, timeout: float) -> Any:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method="GET" if payload is None else "POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read()).get("error", e.reason)
        except ValueError:
            message = str(e.reason)
        raise StudyServerError(e.code, message) from None
