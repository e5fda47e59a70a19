"""The service's own bodies: errors (problem details) and the health probes' answer. The
operations' bodies are in :mod:`qemem.operations.schemas`."""

from __future__ import annotations

from pydantic import BaseModel


class Problem(BaseModel):
    """An error (RFC 9457 problem details)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    instance: str = ""


class Health(BaseModel):
    status: str
