"""Bearer-key authentication of the ``/v1`` routes: ``Reader`` and ``Writer`` parameters."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from qemem.errors import AuthError
from qemem.keys import ApiKey
from qemem.service.problems import Forbidden
from qemem.service.state import State

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


def _writer(key: Annotated[ApiKey, Depends(_caller)]) -> ApiKey:
    """The caller's key, which must allow writes (403 for a read-only key)."""
    if key.read_only:
        raise Forbidden("this API key is read-only: use a key made without --read-only")
    return key


Reader = Annotated[ApiKey, Depends(_caller)]
Writer = Annotated[ApiKey, Depends(_writer)]
