"""Bearer-key authentication of the ``/v1`` routes (``Reader`` and ``Writer`` parameters) and of
the ``/mcp`` endpoint (``request_key``): one check for both."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from qemem.errors import AuthError
from qemem.keys import ApiKey
from qemem.service.problems import Forbidden
from qemem.service.state import ServiceState, State

log = logging.getLogger("qemem.service")

_bearer = HTTPBearer(auto_error=False)


def _caller(
    request: Request,
    state: State,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> ApiKey:
    """The caller's key (401 when missing, unknown or revoked; logged without the key)."""
    client = request.client.host if request.client else "?"
    try:
        if credentials is None:
            raise AuthError(
                "missing 'Authorization: Bearer <key>' header: create a key with "
                "`qemem keys create`"
            )
        return state.verify(credentials.credentials)
    except AuthError as exc:
        log.warning("refused %s %s from %s: %s", request.method, request.url.path, client, exc)
        raise


async def request_key(request: Request, state: ServiceState) -> ApiKey:
    """The key of a request that no route's parameters check (``/mcp``), as ``Reader`` checks
    it: an AuthError (401) when it is missing, unknown or revoked."""
    credentials = await _bearer(request)
    return await run_in_threadpool(_caller, request, state, credentials)


def _writer(key: Annotated[ApiKey, Depends(_caller)]) -> ApiKey:
    """The caller's key, which must allow writes (403 for a read-only key)."""
    if key.read_only:
        raise Forbidden("this API key is read-only: use a key made without --read-only")
    return key


Reader = Annotated[ApiKey, Depends(_caller)]
Writer = Annotated[ApiKey, Depends(_writer)]
