"""The shape of an operation's declaration: ``Operation`` (a ``MemoryAPI`` method and how
each channel offers it), ``Route`` (its HTTP request and response), ``HeaderParam`` and
``LLMNeed``. The declarations themselves are in the table (:mod:`qemem.operations`)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

Method = Literal["GET", "POST", "DELETE"]
Scope = Literal["read", "write"]
"""``write``: refused to read-only keys (HTTP 403) and read-only MCP sessions."""

LLM_EXAMPLE = "anthropic:claude-haiku-4-5"


@dataclass(frozen=True)
class HeaderParam:
    """A method parameter that travels as a request header (left out when None)."""

    param: str
    header: str
    description: str
    check: Callable[[str], str] = str
    """Validates the value before it is sent (its error is the caller's)."""


@dataclass(frozen=True)
class Route:
    """How an operation travels over HTTP. Path parameters, the fields of ``body`` and
    ``query`` and the ``headers`` carry the method's parameters of the same name (or of the
    operation's ``rename``); ``response`` documents the answer and, unless the operation
    has an ``encode``, serialises it. ``name`` and ``doc`` are the route's name (its OpenAPI
    operationId and summary) and description."""

    method: Method
    path: str
    name: str
    doc: str
    tag: str
    errors: tuple[int, ...] = ()
    """Problem statuses it may answer besides 401 and 422."""
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    headers: tuple[HeaderParam, ...] = ()
    response: Any = None
    status: int = 200
    response_headers: Mapping[str, str] = field(default_factory=dict)
    """Headers of a successful answer, with their descriptions."""

    @property
    def description(self) -> str:
        """``doc`` without its indentation (as a docstring's)."""
        return inspect.cleandoc(self.doc)

    @property
    def params(self) -> tuple[str, ...]:
        """The path's parameters, in order."""
        return tuple(re.findall(r"\{(\w+)\}", self.path))


@dataclass(frozen=True)
class LLMNeed:
    """When an operation needs an LLM: ``what`` names what needs it ("checking a
    statement"), or says it from the call's arguments (None when these need none);
    ``otherwise``: what the caller can do without one."""

    what: str | Callable[[Mapping[str, Any]], str | None]
    example: str = LLM_EXAMPLE
    """A provider spec to suggest (HTTP)."""
    otherwise: str = ""

    def refusal(self, args: Mapping[str, Any], start: str) -> str | None:
        """What to say to a caller of a server without an LLM (None when these arguments
        need none); ``start``: how to start the server with one, in the channel's words."""
        what = self.what(args) if callable(self.what) else self.what
        if what is None:
            return None
        alternative = f", or {self.otherwise}" if self.otherwise else ""
        return f"{what} needs an LLM and this server has none: {start}{alternative}"


@dataclass(frozen=True)
class Operation:
    """One public operation: the ``MemoryAPI`` method ``name`` and every channel's offer of
    it. ``route`` None: the remote clients compose it of other operations (``ingest``,
    ``build``); ``via``: it travels by another operation's route, with ``fixed`` body fields.
    ``tool``: the MCP tool exposing it (several operations may share one; one of them
    carries ``tool_doc``, its description); ``cli``: its ``qemem`` command. ``creates``: it
    may name a conversation that does not exist yet (else the service answers 404 first).
    ``encode`` turns the result into the response's JSON (default: by the route's response
    model); ``decode`` turns that JSON back into the result (default: validated as the
    method's return type)."""

    name: str
    scope: Scope
    route: Route | None = None
    via: str | None = None
    fixed: Mapping[str, Any] = field(default_factory=dict)
    rename: Mapping[str, str] = field(default_factory=dict)
    """Method parameter → its name on the wire."""
    tool: str | None = None
    tool_doc: str = ""
    cli: str | None = None
    llm: LLMNeed | None = None
    creates: bool = False
    encode: Callable[[Any], Any] | None = None
    decode: Callable[[Any], Any] | None = None

    def wire(self, param: str) -> str:
        """The name ``param`` has on the wire."""
        return self.rename.get(param, param)

    def param(self, wire: str) -> str:
        """The method parameter a wire name carries."""
        return next((p for p, w in self.rename.items() if w == wire), wire)
