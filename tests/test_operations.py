"""The operation table (``qemem.operations``) declares every public operation once, and every
channel offers exactly what it declares: ``Memory``, the HTTP routes, ``RemoteMemory`` and
``AsyncRemoteMemory`` (whose methods are generated from it), the MCP tools and the CLI."""

from __future__ import annotations

import inspect
from typing import Any

import anyio
import pytest
from fastapi.routing import APIRoute
from typer.main import get_command

from qemem import AsyncRemoteMemory, RemoteMemory
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.memory import Memory, MemoryAPI
from qemem.operations import OPERATIONS, operation, route_of, tools
from qemem.remote import calls, generate
from qemem.service.mcp_server import Guard, create_mcp_server, tailored_tools
from qemem.service.routes.handlers import HANDLERS
from service_helpers import served

PUBLIC = {n for n, _ in inspect.getmembers(MemoryAPI, inspect.isfunction) if not n.startswith("_")}


def test_every_memory_api_method_but_close_is_declared_once() -> None:
    names = [op.name for op in OPERATIONS]
    assert len(names) == len(set(names))
    assert set(names) == PUBLIC - {"close"}
    assert all(callable(getattr(Memory, name, None)) for name in names)


@pytest.mark.parametrize("client", [RemoteMemory, AsyncRemoteMemory])
def test_the_remote_clients_have_each_operation_with_its_signature(client: type) -> None:
    for op in OPERATIONS:
        method = getattr(client, op.name)
        assert inspect.signature(method) == inspect.signature(getattr(MemoryAPI, op.name))
        assert inspect.iscoroutinefunction(method) == (client is AsyncRemoteMemory), op.name


def test_the_generated_client_methods_are_current() -> None:
    """Run ``python -m qemem.remote.generate`` after declaring an operation."""
    for path, text in generate.sources().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale"


def test_the_app_serves_the_declared_routes_and_no_other_v1_route() -> None:
    with served() as s:
        served_routes = {
            (method, route.path, route.name)
            for route in s.app.routes
            if isinstance(route, APIRoute) and route.path.startswith("/v1/")
            for method in route.methods
        }
    declared = {(op.route.method, op.route.path, op.route.name) for op in OPERATIONS if op.route}
    assert served_routes == declared
    assert set(HANDLERS) <= {op.name for op in OPERATIONS if op.route}


def test_each_operation_travels_by_a_route_or_is_composed_by_the_clients() -> None:
    for op in OPERATIONS:
        assert (route_of(op) is None) == (op.name in calls.COMPOSED and op.route is None), op.name
        if op.via:
            assert op.route is None and operation(op.via).route is not None
        if op.llm is not None and op.route is not None:
            assert 503 in op.route.errors, op.name


def _arguments(name: str) -> dict[str, Any]:
    """A call's arguments: each parameter its default, or a string."""
    params = inspect.signature(getattr(MemoryAPI, name)).parameters.values()
    return {
        p.name: "x" if p.default is inspect.Parameter.empty else p.default
        for p in params
        if p.name != "self"
    }


def test_every_argument_of_a_sent_operation_has_a_place_on_the_wire() -> None:
    for op in OPERATIONS:
        if op.name in calls.COMPOSED:
            continue
        route = route_of(op)
        assert route is not None
        call = calls.call_of(op, _arguments(op.name))  # TypeError when one has none
        assert call.method == route.method
        if op.route and op.name not in HANDLERS:  # the default handler passes wire fields on
            for model in (route.body, route.query):
                for field in model.model_fields if model else ():
                    assert op.param(field) in _arguments(op.name), (op.name, field)


def test_path_segments_are_encoded_whole() -> None:
    delete = operation("delete_fact")
    call = calls.call_of(delete, {"conversation": "proj#old", "fact": "a/b?c=1 %"})
    assert call.path == "/v1/conversations/proj%23old/facts/a%2Fb%3Fc%3D1%20%25"
    assert calls.call_of(operation("delete"), {"conversation": ".."}).path.endswith("/%2E%2E")
    jobs = calls.call_of(operation("jobs"), {"status": None, "limit": 5, "before": "j#1"})
    assert jobs.path == "/v1/jobs?limit=5&cursor=j%231"


def test_the_mcp_server_offers_the_declared_tools() -> None:
    declared = tools()
    assert all(t.description for t in declared.values())
    with Memory.open(None, embedder=HashEmbedder()) as memory:
        listed = anyio.run(create_mcp_server(memory).list_tools)
        assert [(t.name, t.description) for t in listed] == [
            (t.name, t.description) for t in declared.values()
        ]
        tailored = tailored_tools(Guard())
    assert set(tailored) <= set(declared)
    assert all(len(declared[name].operations) == 1 for name in set(declared) - set(tailored))


def test_the_declared_cli_commands_exist() -> None:
    def walk(command: Any, path: tuple[str, ...]) -> set[str]:
        if not hasattr(command, "commands"):
            return {" ".join(path)}
        return {n for name, sub in command.commands.items() for n in walk(sub, (*path, name))}

    commands = walk(get_command(app), ())
    assert {op.cli for op in OPERATIONS if op.cli} <= commands
