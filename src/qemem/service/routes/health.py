"""Liveness and readiness probes (no auth)."""

from __future__ import annotations

from fastapi import FastAPI

from qemem.service.schemas import Health, Problem
from qemem.service.state import State


def healthz() -> Health:
    """Liveness: the process answers (no auth)."""
    return Health(status="ok")


def readyz(state: State) -> Health:
    """Readiness: the store and the key store answer a query within 1 s (no auth); 503
    otherwise."""
    state.readiness.check()
    return Health(status="ready")


def register(app: FastAPI) -> None:
    """Add these routes to ``app``."""
    app.add_api_route("/healthz", healthz, methods=["GET"], tags=["health"])
    app.add_api_route(
        "/readyz", readyz, methods=["GET"], tags=["health"], responses={503: {"model": Problem}}
    )
