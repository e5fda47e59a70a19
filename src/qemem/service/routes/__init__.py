"""The routes of the HTTP API, one module per resource; ``register`` adds them all to an app."""

from fastapi import FastAPI

from qemem.service.routes import build, conversations, health, query, records


def register(app: FastAPI) -> None:
    """Add every route to ``app``: health, conversations, records, query, build (in that
    order)."""
    for resource in (health, conversations, records, query, build):
        resource.register(app)


__all__ = ["register"]
