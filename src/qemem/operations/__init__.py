"""The operation table: every public operation of a memory (each ``MemoryAPI`` method but
``close``) declared once, with its HTTP route, request and response bodies, scope, MCP tool
and CLI command.

The HTTP routes (:mod:`qemem.service.routes`), the remote clients (:mod:`qemem.remote`), the
MCP tools (:mod:`qemem.service.mcp_server`) and the entry-point tests are driven from it. An
operation added to ``Memory`` and ``MemoryAPI`` is declared in one of the modules below
(:mod:`~qemem.operations.records`, :mod:`~qemem.operations.query`,
:mod:`~qemem.operations.jobs`); then ``python -m qemem.remote.generate`` writes its remote
methods and ``python -m qemem.service.openapi > docs/openapi.json`` documents its route.
"""

from __future__ import annotations

from dataclasses import dataclass

from qemem.operations.jobs import JOBS
from qemem.operations.query import ANSWERS, SEARCH
from qemem.operations.records import CONVERSATIONS, ITEMS, RECORDS
from qemem.operations.spec import HeaderParam, LLMNeed, Operation, Route, Scope

OPERATIONS: tuple[Operation, ...] = (
    *CONVERSATIONS,
    *RECORDS,
    *ITEMS,
    *SEARCH,
    *ANSWERS,
    *JOBS,
)
_BY_NAME = {op.name: op for op in OPERATIONS}


def operation(name: str) -> Operation:
    """The operation ``name`` (KeyError when none is declared)."""
    return _BY_NAME[name]


def route_of(op: Operation) -> Route | None:
    """The route ``op`` travels by: its own, or that of the operation it goes ``via``."""
    return operation(op.via).route if op.via else op.route


@dataclass(frozen=True)
class Tool:
    """An MCP tool: its name, description, the operations it exposes and its scope (write
    when any of them writes)."""

    name: str
    description: str
    operations: tuple[Operation, ...]

    @property
    def scope(self) -> Scope:
        return "write" if any(op.scope == "write" for op in self.operations) else "read"


def tools() -> dict[str, Tool]:
    """The MCP tools of the table, in the order of their first operation."""
    named: dict[str, list[Operation]] = {}
    for op in OPERATIONS:
        if op.tool:
            named.setdefault(op.tool, []).append(op)
    return {
        name: Tool(name, next((op.tool_doc for op in ops if op.tool_doc), ""), tuple(ops))
        for name, ops in named.items()
    }


__all__ = [
    "OPERATIONS",
    "HeaderParam",
    "LLMNeed",
    "Operation",
    "Route",
    "Scope",
    "Tool",
    "operation",
    "route_of",
    "tools",
]
