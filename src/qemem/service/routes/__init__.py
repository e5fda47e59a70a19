"""The routes of the HTTP API: the health probes, then the route of every operation of the
table (:mod:`qemem.operations`); ``register`` adds them all to an app."""

from fastapi import FastAPI

from qemem.service.routes import health, operations
from qemem.service.routes.handlers import HANDLERS


def register(app: FastAPI) -> None:
    """Add every route to ``app``: health, then the operations' (in table order)."""
    health.register(app)
    operations.register(app, HANDLERS)


__all__ = ["register"]
