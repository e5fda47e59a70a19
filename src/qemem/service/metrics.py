"""``GET /metrics``: Prometheus text format (``prometheus-client``), no auth, no tenant data.

- ``qemem_requests_total`` and ``qemem_request_seconds`` by method, route template (not the
  path, so conversation ids never become labels) and status;
- ``qemem_jobs`` by status (the store's jobs: the same figures from every server process);
- ``qemem_llm_calls_total``, ``qemem_llm_cached_calls_total``, ``qemem_llm_input_tokens_total``
  and ``qemem_llm_output_tokens_total`` of the server's LLM client.

Each app has its own registry; with ``qemem serve --workers N`` each worker process answers with
its own figures (scrape each worker, or sum at the proxy), except ``qemem_jobs``, read from the
store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from qemem.llm import Tally

UNMATCHED = "unmatched"
"""The route label of a request no route matched (a 404 for an unknown path)."""


class _Gauges(Collector):
    """Jobs by status and the LLM client's sums, read when scraped."""

    def __init__(
        self, jobs: Callable[[], Mapping[str, int]], llm: Callable[[], Tally | None]
    ) -> None:
        self.jobs, self.llm = jobs, llm

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("qemem_jobs", "Build jobs by status", labels=["status"])
        for status, count in sorted(self.jobs().items()):
            jobs.add_metric([status], count)
        yield jobs
        tally = self.llm() or Tally()
        for name, value, doc in (
            ("calls", tally.calls, "LLM calls made (cache hits included)"),
            ("cached_calls", tally.cached_calls, "LLM calls answered from the cache"),
            ("input_tokens", tally.input_tokens, "LLM input tokens"),
            ("output_tokens", tally.output_tokens, "LLM output tokens"),
            (
                "cache_write_tokens",
                tally.cache_write_tokens,
                "LLM input tokens written to a provider's prompt cache",
            ),
            (
                "cache_read_tokens",
                tally.cache_read_tokens,
                "LLM input tokens read from a provider's prompt cache",
            ),
        ):
            yield CounterMetricFamily(f"qemem_llm_{name}", doc, value=value)


class Metrics:
    """A registry with the service's metrics; ``middleware`` counts the requests."""

    def __init__(
        self, jobs: Callable[[], Mapping[str, int]], llm: Callable[[], Tally | None]
    ) -> None:
        self.registry = CollectorRegistry()
        labels = ["method", "route", "status"]
        self.requests = Counter("qemem_requests", "HTTP requests", labels, registry=self.registry)
        self.seconds = Histogram(
            "qemem_request_seconds", "HTTP request latency", labels, registry=self.registry
        )
        self.registry.register(_Gauges(jobs, llm))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one finished request."""
        self.requests.labels(method, route, str(status)).inc()
        self.seconds.labels(method, route, str(status)).observe(seconds)

    def endpoint(self, request: Request) -> Response:
        """The scrape response."""
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


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

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", UNMATCHED)
            self.metrics.observe(scope["method"], route, status, time.perf_counter() - started)
