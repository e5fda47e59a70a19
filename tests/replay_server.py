"""A loopback HTTP server that replays recorded provider exchanges.

Each fixture in ``tests/fixtures/exchanges/`` holds ``exchanges``: in order, the request a provider
adapter must send (method, path, headers, JSON body fields) and the response the provider returns
(status, headers, JSON body). The server answers the n-th request it receives with the n-th
response and records every request, so a test asserts on what was sent (:meth:`verify`) and on
what the adapter made of the answer. It is real HTTP on 127.0.0.1, so it serves every SDK's
own HTTP client alike (the anthropic and openai SDKs' ``httpx2`` fork, botocore's urllib3).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

EXCHANGES = Path(__file__).parent / "fixtures" / "exchanges"


def load_exchanges(name: str) -> list[dict[str, Any]]:
    """The exchanges of fixture ``name`` (``tests/fixtures/exchanges/<name>.json``)."""
    data = json.loads((EXCHANGES / f"{name}.json").read_text())
    exchanges: list[dict[str, Any]] = data["exchanges"]
    return exchanges


@dataclass(frozen=True)
class Received:
    """One request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The request body parsed as JSON."""
        return json.loads(self.body)


def mismatches(expected: dict[str, Any], got: Received) -> list[str]:
    """How ``got`` differs from the ``expected`` request of a fixture (empty when it matches)."""
    problems = []
    for key in ("method", "path"):
        if expected[key] != getattr(got, key):
            problems.append(f"{key}: expected {expected[key]!r}, got {getattr(got, key)!r}")
    for name, value in expected.get("headers", {}).items():
        if got.headers.get(name.lower()) != value:
            problems.append(f"header {name}: expected {value!r}, got {got.headers.get(name)!r}")
    for name, prefix in expected.get("header_prefixes", {}).items():
        if not got.headers.get(name.lower(), "").startswith(prefix):
            problems.append(f"header {name}: expected {prefix!r}..., got {got.headers.get(name)!r}")
    problems += [f"header {name}: missing" for name in expected.get("present", [])
                 if name.lower() not in got.headers]  # fmt: skip
    either = expected.get("any_header", {})
    if either and not any(got.headers.get(k.lower()) == v for k, v in either.items()):
        problems.append(f"none of the headers {either!r} was sent")
    body = got.json() if "json" in expected or "absent" in expected else {}
    for field, value in expected.get("json", {}).items():
        if body.get(field) != value:
            problems.append(f"body {field}: expected {value!r}, got {body.get(field)!r}")
    problems += [
        f"body {field}: must be absent" for field in expected.get("absent", []) if field in body
    ]
    return problems


class ReplayServer:
    """Serves ``exchanges`` in order on 127.0.0.1 (a free port) while used as a context."""

    def __init__(self, exchanges: list[dict[str, Any]]) -> None:
        self.exchanges = exchanges
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @classmethod
    def of(cls, name: str) -> ReplayServer:
        """A server for fixture ``name``."""
        return cls(load_exchanges(name))

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def reply(self, request: Received) -> tuple[int, dict[str, str], bytes]:
        """Record ``request`` and return the next recorded response (500 past the last)."""
        with self._lock:
            self.received.append(request)
            n = len(self.received)
        if n > len(self.exchanges):
            body = {"error": f"replay server: no exchange #{n} recorded"}
            return 500, {}, json.dumps(body).encode()
        response = self.exchanges[n - 1]["response"]
        return (
            response["status"],
            response.get("headers", {}),
            json.dumps(response["json"]).encode(),
        )

    def verify(self) -> None:
        """Assert that exactly the recorded requests arrived, each as recorded."""
        problems = [
            f"request #{i + 1}: {problem}"
            for i, (exchange, got) in enumerate(zip(self.exchanges, self.received, strict=False))
            for problem in mismatches(exchange["request"], got)
        ]
        if len(self.received) != len(self.exchanges):
            problems.append(
                f"{len(self.received)} requests arrived, {len(self.exchanges)} recorded"
            )
        assert not problems, "\n".join(problems)


def _handler(server: ReplayServer) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``server``."""

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            request = Received(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=self.rfile.read(length),
            )
            status, headers, body = server.reply(request)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test asserts on :attr:`ReplayServer.received` instead."""

    return Handler
