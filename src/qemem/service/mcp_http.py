"""MCP over streamable HTTP inside the HTTP API: ``/mcp`` of ``qemem serve``, behind the same
bearer keys as ``/v1``.

Every request to ``/mcp`` is checked as a ``/v1`` request is (a 401 problem without a valid,
unrevoked key; the key's record is read from the key store on each request, so a revoked key is
refused from its next request on). The tools then act on the key's namespace, and those that
write are refused to a read-only key. The transport is stateless and answers with JSON: each
request is a POST that stands alone, so any worker of a multi-process server answers it, and no
session or stream outlives the request its key was checked for (GET, the optional stream of
server messages, and DELETE, which ends a session, are answered 405, as the protocol allows).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from qemem.keys import ApiKey
from qemem.service.auth import request_key
from qemem.service.mcp_server import Caller, tenant_mcp_server
from qemem.service.state import ServiceState

PATH = "/mcp"
KEY = "qemem.api_key"
"""Where the endpoint leaves the request's verified key in the ASGI scope for the tools."""


class MCPEndpoint:
    """The ASGI endpoint of ``/mcp``: the request's key is verified, then the MCP server's
    session manager answers it. ``host``: the interface the server listens on; on a loopback
    one, a request whose Host header names another host is refused (421: DNS rebinding)."""

    def __init__(self, state: ServiceState, host: str) -> None:
        self.state = state
        self.host = host
        self.server = tenant_mcp_server(self.caller, str(getattr(state.root.store, "path", "")))

    def caller(self, ctx: Context) -> Caller:
        """The ``Memory`` of the namespace of the key that sent the tool call, and whether
        the key is read-only."""
        request = ctx.request_context.request
        key = request.scope.get(KEY) if isinstance(request, Request) else None
        if not isinstance(key, ApiKey):  # every request reaching the server was checked
            raise ToolError("this call came without a verified API key")
        return Caller(self.state.memory(key.namespace), key.read_only)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The MCP session manager, running while the app does (a new one each time the app
        starts: a manager runs once)."""
        self.server.streamable_http_app(stateless_http=True, json_response=True, host=self.host)
        async with self.server.session_manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[KEY] = await request_key(Request(scope, receive), self.state)
        await self.server.session_manager.handle_request(scope, receive, send)


def mount_mcp(app: FastAPI, state: ServiceState, host: str) -> MCPEndpoint:
    """Serve MCP at ``/mcp`` of ``app`` (outside its OpenAPI schema); the app's lifespan must
    run the returned endpoint's ``running``."""
    endpoint = MCPEndpoint(state, host)
    app.router.routes.append(Route(PATH, endpoint=endpoint, methods=["POST"], name="mcp"))
    return endpoint
