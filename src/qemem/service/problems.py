"""RFC 9457 problem details: every error of the service is ``application/problem+json``.

qemem's exceptions map to statuses here, with their messages (the same as the CLI prints) as
``detail``; request-body size is capped by ``BodyLimit``.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote_to_bytes

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from qemem.errors import (
    AuthError,
    ConflictError,
    EmbedderMismatchError,
    InputError,
    LLMError,
    NotFoundError,
    QememError,
    StoreError,
    without_paths,
)
from qemem.models import ID_RULE
from qemem.service.schemas import Problem

MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("qemem.service")


def problem(status: int, detail: str, instance: str = "", **extra: Any) -> JSONResponse:
    """A problem+json response with ``about:blank`` type (the title is the status phrase)."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body | extra, status_code=status, media_type=MEDIA_TYPE, headers=headers)


class Forbidden(AuthError):
    """The key is valid but may not do this (a read-only key asked to write)."""


def status_of(exc: QememError) -> int:
    """The HTTP status of a qemem error."""
    for kind, status in (
        (Forbidden, 403),
        (AuthError, 401),
        (NotFoundError, 404),
        (ConflictError, 409),
        (EmbedderMismatchError, 409),
        (InputError, 422),
        (LLMError, 503),
        (StoreError, 503),
    ):
        if isinstance(exc, kind):
            return status
    return 400


NOT_FOUND = {
    "conversation": "no conversation {name!r}: appending messages to it creates it",
    "message": "no message {name!r} in conversation {conversation!r}: a message's id is in the "
    "response of its append and in search results",
    "episode": "no episode {name!r} in conversation {conversation!r}: list them with GET "
    "/v1/conversations/{{conversation}}/episodes",
    "fact": "no fact {name!r} in conversation {conversation!r}: list them with GET "
    "/v1/conversations/{{conversation}}/facts",
    "job": "no job {name!r}: list the jobs with GET /v1/jobs",
}
"""What a 404 says, by what was not found: the advice of the HTTP API."""


def detail_of(exc: QememError, paths: list[str]) -> str:
    """The ``detail`` of a qemem error: its message without server paths (``paths``: the
    store's and the key store's), in the HTTP API's words when it is a known kind of 404."""
    if isinstance(exc, NotFoundError) and exc.kind in NOT_FOUND:
        advice = NOT_FOUND[exc.kind].format(name=exc.name, conversation=exc.conversation)
        return without_paths(advice, paths)
    return without_paths(str(exc), paths)


def _server_paths(request: Request) -> list[str]:
    """The store's and the key store's paths (or URLs) of the app serving ``request``."""
    state = getattr(request.app.state, "service", None)
    if state is None:
        return []
    return [str(getattr(state.root.store, "path", "")), str(getattr(state.keys, "path", ""))]


def install(app: FastAPI) -> None:
    """Route every error through ``problem``; the log keeps what a body leaves out (server
    paths) of every 5xx."""

    @app.exception_handler(QememError)
    async def qemem_error(request: Request, exc: QememError) -> JSONResponse:
        status = status_of(exc)
        if status >= 500:
            log.warning("%s %s: %d %s", request.method, request.url.path, status, exc)
        return problem(status, detail_of(exc, _server_paths(request)), request.url.path)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()
        ]
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors)
        return problem(422, f"invalid request: {where}", request.url.path, errors=errors)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return problem(exc.status_code, str(exc.detail), request.url.path)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return problem(500, "internal error: see the server log", request.url.path)


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error responses a ``/v1`` route declares: 401 and 422, and ``codes``."""
    return {code: {"model": Problem} for code in (401, 422, *codes)}


def use_problem_media_type(app: FastAPI) -> None:
    """Declare the error bodies of ``app``'s OpenAPI schema as application/problem+json."""
    schema = app.openapi

    def openapi() -> dict[str, Any]:
        document = schema()
        for operations in document["paths"].values():
            for operation in operations.values():
                for code, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if code >= "400" and "application/json" in content:
                        content[MEDIA_TYPE] = content.pop("application/json")
        return document

    app.openapi = openapi  # type: ignore[method-assign]


class SlashedIds:
    """ASGI middleware answering 422 when a path segment of a ``/v1`` request decodes to text
    holding ``/`` (``%2F``): Starlette routes on the decoded path, where such an id would read
    as two segments (a 404, or another route), and no id may contain ``/``
    (:data:`~qemem.models.ID_RULE`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        segments = raw.split(b"/") if isinstance(raw, bytes) and raw.startswith(b"/v1/") else []
        slashed = [unquote_to_bytes(s).decode("utf-8", "replace") for s in segments]
        slashed = [s for s in slashed if "/" in s]
        if not slashed:
            await self.app(scope, receive, send)
            return
        detail = (
            f"the path names the id {slashed[0]!r}, which contains '/': {ID_RULE}, so no "
            "conversation, message or fact has such an id (one stored before the rule can be "
            "deleted with the qemem CLI)"
        )
        response = problem(422, detail, str(scope.get("path", "")))
        await response(scope, receive, send)


class BodyLimit:
    """ASGI middleware answering 413 when a request body exceeds ``max_bytes``: a declared
    Content-Length is checked first, a chunked body is read (at most ``max_bytes``) before the
    app sees it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(scope, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                first: Message = message  # a disconnect: hand it to the app as it is
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._reject(scope, send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                first = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, send: Send) -> None:
        detail = (
            f"request body larger than {self.max_bytes} bytes: send fewer messages per request "
            "(or raise the server's --max-body)"
        )
        response = problem(413, detail, str(scope.get("path", "")))
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": response.raw_headers,
            }
        )
        await send({"type": "http.response.body", "body": response.body})
