"""The HTTP API: a FastAPI app over ``Memory`` (and nothing below it), one namespace per key.

``create_app`` builds it for any ASGI server; ``qemem serve`` runs it with uvicorn. The routes
are in ``qemem.service.routes``, what they share in ``qemem.service.state``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from qemem import __version__
from qemem.embed.base import Embedder
from qemem.errors import ConfigError
from qemem.keys import KeyStore, open_key_store
from qemem.llm import LLMClient
from qemem.memory import IDEMPOTENCY_HOURS, Memory
from qemem.memory.worker import DEFAULT_LEASE_S
from qemem.service import problems, routes
from qemem.service.metrics import CountRequests, Metrics, multiprocess_dir
from qemem.service.state import ServiceState
from qemem.store import MemoryStore, open_store

if TYPE_CHECKING:
    from qemem.service.mcp_http import MCPEndpoint

DEFAULT_MAX_BODY = 1_000_000
"""Default request-body limit in bytes (413 above it)."""

DOCS_ASSETS = "/docs-assets"
"""Where the scripts and styles of ``/docs`` (Swagger UI) are served from (``fastapi-offline``,
a dependency of the ``server`` extra): the page loads nothing from elsewhere."""
DESCRIPTION = (
    "Long-term conversational memory: append messages, search, and ask "
    "questions answered with cited, verified evidence. Every /v1 route needs "
    "`Authorization: Bearer <key>` (`qemem keys create`); the key decides the namespace."
)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: ServiceState = app.state.service
    metrics: Metrics | None = app.state.metrics
    mcp: MCPEndpoint = app.state.mcp
    state.start()
    if metrics is not None:
        metrics.start()
    async with mcp.running():
        yield
    if metrics is not None:
        metrics.close()
    state.close()


def create_app(
    store: MemoryStore | str | Path,
    *,
    keys: KeyStore | None = None,
    embedder: Embedder | str | None = None,
    llm: LLMClient | str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    idempotency_hours: float = IDEMPOTENCY_HOURS,
    job_lease: float = DEFAULT_LEASE_S,
    job_attempts: int = 3,
    auto_build: float | None = None,
    metrics: bool = True,
    host: str = "127.0.0.1",
) -> FastAPI:
    """The qemem HTTP API over ``store`` (an open store, or a SQLite file path whose API keys
    are used when ``keys`` is None). ``embedder``/``llm``/``idempotency_hours`` as for
    ``Memory``. The app runs the store's background jobs, each under a lease of ``job_lease``
    seconds, started at most ``job_attempts`` times (a job whose worker died is started
    again). ``auto_build``: seconds of quiet after an append before a conversation gets a
    build job (needs an LLM; see ``Memory``). ``metrics``: serve ``GET /metrics``
    (Prometheus, see ``service.metrics``; the figures of every process writing to
    ``PROMETHEUS_MULTIPROC_DIR`` when it is set). MCP is served at ``/mcp`` behind the same
    keys (``service.mcp_http``); ``host``: the interface the server listens on (on a loopback
    one, ``/mcp`` refuses a request whose Host header names another host: 421)."""
    if keys is None:
        if not isinstance(store, str | Path):
            raise ConfigError("pass keys= (a KeyStore) along with an open store")
        keys = open_key_store(store)
    opened = isinstance(store, str | Path)
    root = Memory(
        open_store(str(store)) if isinstance(store, str | Path) else store,
        embedder,
        llm=llm,
        idempotency_hours=idempotency_hours,
        auto_build=auto_build,
    )
    _ = root.embedder  # load the model once, before the first request
    app = FastAPIOffline(  # /docs from assets of the server extra: no CDN
        title="qemem",
        version=__version__,
        description=DESCRIPTION,
        lifespan=_lifespan,
        static_url=DOCS_ASSETS,
        redoc_url=None,  # its bundle fetches a logo from a CDN: /docs is the one viewer
    )
    state = ServiceState(root, keys, owned=opened, job_lease=job_lease, job_attempts=job_attempts)
    app.state.service = state
    app.add_middleware(problems.BodyLimit, max_bytes=max_body)
    app.add_middleware(problems.SlashedIds)
    app.state.metrics = None
    if metrics:
        counted = Metrics(
            state.job_counts,
            lambda: root.llm.ledger.total() if root.llm else None,
            multiprocess_dir(),
        )
        app.state.metrics = counted
        app.add_middleware(CountRequests, metrics=counted)
        app.add_api_route("/metrics", counted.endpoint, methods=["GET"], include_in_schema=False)
    problems.install(app)
    routes.register(app)
    # The MCP SDK, the heaviest import, is imported here rather than with this module: each
    # process of `--workers` imports this package before it can answer uvicorn's health check
    # (within 5 s, or the process is killed and started again).
    from qemem.service.mcp_http import mount_mcp

    app.state.mcp = mount_mcp(app, state, host)
    problems.use_problem_media_type(app)
    return app


def app_from_env() -> FastAPI:
    """The app of ``qemem serve`` (uvicorn factory): store from ``QEMEM_STORE``, body limit
    from ``QEMEM_MAX_BODY``, idempotency-key retention from ``QEMEM_IDEMPOTENCY_HOURS``, job
    lease and attempts from ``QEMEM_JOB_LEASE`` and ``QEMEM_JOB_ATTEMPTS``, automatic builds
    from ``QEMEM_AUTO_BUILD`` (seconds); embedder and LLM from ``QEMEM_EMBEDDER`` and
    ``QEMEM_LLM``; the interface listened on from ``QEMEM_HOST`` (default 127.0.0.1)."""
    store = os.environ.get("QEMEM_STORE")
    if not store:
        raise ConfigError("set QEMEM_STORE (or pass --store) to the store to serve")
    try:
        hours = float(os.environ.get("QEMEM_IDEMPOTENCY_HOURS") or IDEMPOTENCY_HOURS)
    except ValueError as exc:
        raise ConfigError(f"QEMEM_IDEMPOTENCY_HOURS must be a number of hours ({exc})") from exc
    try:
        lease = float(os.environ.get("QEMEM_JOB_LEASE") or DEFAULT_LEASE_S)
        attempts = int(os.environ.get("QEMEM_JOB_ATTEMPTS") or 3)
        quiet = os.environ.get("QEMEM_AUTO_BUILD")
        auto_build = float(quiet) if quiet else None
    except ValueError as exc:
        raise ConfigError(
            f"QEMEM_JOB_LEASE and QEMEM_AUTO_BUILD (seconds) and QEMEM_JOB_ATTEMPTS (a count) "
            f"must be numbers ({exc})"
        ) from exc
    return create_app(
        store,
        max_body=int(os.environ.get("QEMEM_MAX_BODY", DEFAULT_MAX_BODY)),
        idempotency_hours=hours,
        job_lease=lease,
        job_attempts=attempts,
        auto_build=auto_build,
        metrics=os.environ.get("QEMEM_METRICS", "1") != "0",
        host=os.environ.get("QEMEM_HOST") or "127.0.0.1",
    )
