"""The routes of the operation table: one endpoint per declared route, built from its
declaration (path parameters, body, query, headers, the key's scope), which calls the
``Memory`` method of the same name (or a tailored handler of :mod:`.handlers`) and answers
with its result.

Before the call, the default handler answers 404 for a conversation (or one of the
``conversations``) that does not exist, unless the operation ``creates`` it, then 503 when
the operation needs an LLM for these arguments and the server has none.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from qemem.errors import LLMError
from qemem.memory import Memory
from qemem.memory.searching import check_conversations
from qemem.operations import OPERATIONS, Operation, Route
from qemem.service.auth import Reader, Writer
from qemem.service.problems import error_responses
from qemem.service.state import ServiceState, State, existing_conversation


@dataclass(frozen=True)
class Invocation:
    """One call of an operation over HTTP: the caller's memory and the method's arguments
    (from the path, body, query and headers), with the app's state and the request and
    response (whose headers a handler may set)."""

    op: Operation
    memory: Memory
    args: dict[str, Any]
    state: ServiceState
    request: Request
    response: Response


Handler = Callable[[Invocation], Any]


def start_with_llm(example: str) -> str:
    """How to start the server with an LLM, as the service says it."""
    return f"start it with QEMEM_LLM set (e.g. {example}; fake for an offline trial)"


def require(call: Invocation) -> None:
    """404 for a conversation named that does not exist (unless the operation creates it),
    then 503 when the operation needs an LLM for these arguments and the server has none.
    A list of ``conversations`` is checked (and deduplicated) in place."""
    memory, args, op = call.memory, call.args, call.op
    if "conversation" in args and not op.creates:
        existing_conversation(memory, args["conversation"])
    if "conversations" in args:
        args["conversations"] = checked = check_conversations(args["conversations"])
        for conversation in checked:
            existing_conversation(memory, conversation)
    if op.llm is not None and memory.llm is None:
        refusal = op.llm.refusal(args, start_with_llm(op.llm.example))
        if refusal:
            raise LLMError(refusal)


def run(call: Invocation) -> Any:
    """The default handler: ``require``, then the ``Memory`` method of the operation."""
    require(call)
    return getattr(call.memory, call.op.name)(**call.args)


def _plain(value: Any) -> Any:
    """A body field as the library takes it: models as dicts (without unset optionals)."""
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_none=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _signature(op: Operation, route: Route) -> inspect.Signature:
    """The endpoint's parameters as FastAPI reads them."""

    def param(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> Any:
        keyword = inspect.Parameter.KEYWORD_ONLY
        return inspect.Parameter(name, keyword, default=default, annotation=annotation)

    params = [param(name, str) for name in route.params]
    if route.body is not None:
        params.append(param("body", route.body))
    if route.query is not None:
        params.append(param("query", Annotated[route.query, Query()]))
    for header in route.headers:
        alias = Header(alias=header.header, description=header.description)
        params.append(param(header.param, Annotated[str | None, alias], None))
    params += [
        param("key", Writer if op.scope == "write" else Reader),
        param("state", State),
        param("request", Request),
        param("response", Response),
    ]
    return inspect.Signature(params)


def endpoint(op: Operation, route: Route, handler: Handler) -> Callable[..., Any]:
    """The FastAPI endpoint of ``op``'s ``route``, answering with ``handler``'s result."""

    def answer(**received: Any) -> Any:
        args = {op.param(name): received[name] for name in route.params}
        for part in ("body", "query"):
            model: BaseModel | None = received.get(part)
            if model is not None:
                args |= {op.param(f): _plain(getattr(model, f)) for f in type(model).model_fields}
        args |= {h.param: received[h.param] for h in route.headers}
        state: ServiceState = received["state"]
        memory = state.memory(received["key"].namespace)
        call = Invocation(op, memory, args, state, received["request"], received["response"])
        result = handler(call)
        if isinstance(result, Response):
            return result
        return JSONResponse(op.encode(result)) if op.encode else result

    answer.__name__ = route.name
    answer.__signature__ = _signature(op, route)  # type: ignore[attr-defined]
    return answer


def register(app: FastAPI, handlers: dict[str, Handler]) -> None:
    """Add the route of every operation that has one to ``app`` (in table order), each
    answered by its handler in ``handlers`` or by ``run``."""
    for op in OPERATIONS:
        route = op.route
        if route is None:
            continue
        responses = error_responses(*route.errors)
        if route.response_headers:
            described = {h: {"description": d} for h, d in route.response_headers.items()}
            responses |= {route.status: {"headers": described}}
        app.add_api_route(
            route.path,
            endpoint(op, route, handlers.get(op.name, run)),
            methods=[route.method],
            name=route.name,
            description=route.description,
            tags=[route.tag],
            status_code=route.status,
            response_model=route.response,
            responses=responses,
        )
