"""``GET /metrics``: Prometheus text format (``prometheus-client``), no auth, no tenant data.

- ``qemem_requests_total`` and ``qemem_request_seconds`` by method, route template (not the
  path, so conversation ids never become labels) and status;
- ``qemem_jobs`` by status (the store's jobs: the same figures from every server process);
- ``qemem_llm_calls_total``, ``qemem_llm_cached_calls_total``, ``qemem_llm_input_tokens_total``
  and ``qemem_llm_output_tokens_total`` of the server's LLM client.

One process: each app has its own registry. Several (``qemem serve --workers N``):
prometheus-client's multiprocess mode, which ``PROMETHEUS_MULTIPROC_DIR`` (set before the
process starts; ``serve`` makes a temporary one) turns on: each process writes its counters to
files there and a scrape of any process sums those of all of them. The LLM client's sums are
copied into counters at each scrape and, in multiprocess mode, every :data:`SYNC_S` seconds.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from qemem.errors import ConfigError, QememError
from qemem.llm import Tally

log = logging.getLogger(__name__)

UNMATCHED = "unmatched"
"""The route label of a request no route matched (a 404 for an unknown path)."""
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""The folder of prometheus-client's multiprocess mode (one set of files per process)."""
SYNC_S = 1.0
"""In multiprocess mode, how often a process copies its LLM client's sums into its counters."""
_LLM = (
    ("calls", "LLM calls made (cache hits included)"),
    ("cached_calls", "LLM calls answered from the cache"),
    ("input_tokens", "LLM input tokens"),
    ("output_tokens", "LLM output tokens"),
    ("cache_write_tokens", "LLM input tokens written to a provider's prompt cache"),
    ("cache_read_tokens", "LLM input tokens read from a provider's prompt cache"),
)


def multiprocess_dir() -> str | None:
    """The multiprocess folder of this process (``PROMETHEUS_MULTIPROC_DIR``), or None; a
    ConfigError when it was set after prometheus-client chose to count in memory."""
    folder = os.environ.get(MULTIPROC_ENV)
    if not folder:
        return None
    if values.ValueClass is values.MutexValue:
        raise ConfigError(
            f"{MULTIPROC_ENV} was set after prometheus_client was imported, so this process "
            "counts in memory only: set it in the environment before the process starts"
        )
    if not os.path.isdir(folder):
        raise ConfigError(f"{MULTIPROC_ENV} ({folder}) is no folder: create it (empty) first")
    return folder


class _Jobs(Collector):
    """Jobs by status, read from the store when scraped."""

    def __init__(self, jobs: Callable[[], Mapping[str, int]]) -> None:
        self.jobs = jobs

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("qemem_jobs", "Build jobs by status", labels=["status"])
        for status, count in sorted(self.jobs().items()):
            family.add_metric([status], count)
        yield family


class Metrics:
    """The service's metrics; ``middleware`` counts the requests. ``folder``: the
    multiprocess folder (see :func:`multiprocess_dir`), None for this process's own figures."""

    def __init__(
        self,
        jobs: Callable[[], Mapping[str, int]],
        llm: Callable[[], Tally | None],
        folder: str | None = None,
    ) -> None:
        self.folder = folder
        own = None if folder else CollectorRegistry()  # multiprocess: the files hold them
        labels = ["method", "route", "status"]
        self.requests = Counter("qemem_requests", "HTTP requests", labels, registry=own)
        self.seconds = Histogram(
            "qemem_request_seconds", "HTTP request latency", labels, registry=own
        )
        self.llm = llm
        self._llm = {name: Counter(f"qemem_llm_{name}", doc, registry=own) for name, doc in _LLM}
        self._copied = Tally()
        self._copy_lock = threading.Lock()
        self._jobs = _Jobs(jobs)
        self._stop = threading.Event()
        self._syncer: threading.Thread | None = None
        if own is not None:
            own.register(self._jobs)
        self.registry = own

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one finished request."""
        self.requests.labels(method, route, str(status)).inc()
        self.seconds.labels(method, route, str(status)).observe(seconds)

    def sync_llm(self) -> None:
        """Add what the LLM client counted since the last call to the LLM counters."""
        with self._copy_lock:
            try:
                tally = self.llm() or Tally()
            except QememError:  # no usable LLM client (the routes that need one say why)
                return
            for name, _ in _LLM:
                grown = getattr(tally, name) - getattr(self._copied, name)
                if grown > 0:
                    self._llm[name].inc(grown)
            self._copied = replace(tally)

    def start(self) -> None:
        """Multiprocess mode: copy the LLM sums every :data:`SYNC_S` seconds (a scrape reaches
        one process, which cannot copy another's)."""
        if self.folder is None or self._syncer is not None:
            return
        self._stop.clear()
        self._syncer = threading.Thread(target=self._sync_loop, daemon=True, name="qemem-metrics")
        self._syncer.start()

    def _sync_loop(self) -> None:
        while not self._stop.wait(SYNC_S):
            try:
                self.sync_llm()
            except Exception:  # the metrics must never stop the server
                log.exception("copying the LLM sums into the metrics failed")

    def close(self) -> None:
        """Copy the last LLM sums; in multiprocess mode, mark this process dead (its live
        gauges go; its counters stay in the sums)."""
        self._stop.set()
        if self._syncer is not None:
            self._syncer.join()
            self._syncer = None
        self.sync_llm()
        if self.folder is not None:
            multiprocess.mark_process_dead(os.getpid(), self.folder)  # type: ignore[no-untyped-call]

    def scrape(self) -> bytes:
        """The metrics in Prometheus text format (of all processes, in multiprocess mode)."""
        self.sync_llm()
        if self.registry is not None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, self.folder)  # type: ignore[no-untyped-call]
        registry.register(self._jobs)
        return generate_latest(registry)

    def endpoint(self, request: Request) -> Response:
        """The scrape response."""
        return Response(self.scrape(), media_type=CONTENT_TYPE_LATEST)


class CountRequests:
    """ASGI middleware timing every HTTP request into ``metrics`` (the route template is known
    after routing: the router writes it into the shared scope)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500
        matched = _matching_route(dict(scope))  # before routing rewrites the scope's paths

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            # the API route routing wrote into the scope, else the app's route matching the
            # path (/docs, /openapi.json, /metrics, the mount of the docs' assets)
            route = getattr(scope.get("route"), "path", None)
            label = route if isinstance(route, str) else matched
            self.metrics.observe(scope["method"], label, status, time.perf_counter() - started)


def _matching_route(scope: Scope) -> str:
    """The path template of the first route of the scope's app that matches the request
    (by path; a wrong method still names the route), else ``UNMATCHED``."""
    for route in getattr(scope.get("app"), "routes", ()):
        if isinstance(route, BaseRoute) and route.matches(scope)[0] != Match.NONE:
            return str(getattr(route, "path", UNMATCHED))
    return UNMATCHED
