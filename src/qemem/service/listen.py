"""Running the app under uvicorn, with a listening socket that keeps ``TCP_NODELAY`` on.

With ``--workers N`` uvicorn binds the listening socket itself and hands it to the worker
processes; it creates it with ``proto`` 0, the accepted connections inherit that, and asyncio
enables ``TCP_NODELAY`` only on sockets that report ``IPPROTO_TCP``. Nagle's algorithm then
holds every response body on a keep-alive connection until the client's delayed ACK: measured
here, 44 ms per request with 2 workers against 1.5 ms with one (uvicorn issue #3149). The
listener made here is the same socket with ``proto`` set.
"""

from __future__ import annotations

import contextlib
import inspect
import socket
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess


def tcp_listener(sock: socket.socket) -> socket.socket:
    """``sock`` as a socket that reports ``IPPROTO_TCP`` when it is a TCP socket with
    ``proto`` 0 (so the connections it accepts get ``TCP_NODELAY`` from asyncio); any other
    socket as it is."""
    is_tcp = sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
    if not is_tcp or sock.proto == socket.IPPROTO_TCP:
        return sock
    listener = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
    listener.set_inheritable(True)
    return listener


WORKER_HEALTHCHECK_S = 30
"""How long uvicorn waits for a worker's answer to its health check before it kills and
replaces the worker (uvicorn's default, 5 s, killed workers that were only starting, or busy,
on a loaded machine: measured in ``benchmarks/chaos.py``)."""


class _Config(uvicorn.Config):
    def bind_socket(self) -> socket.socket:
        return tcp_listener(super().bind_socket())


def serve_app(app: str, *, host: str, port: int, workers: int) -> None:
    """Serve the app factory ``app`` (an import string) on ``host``:``port`` with ``workers``
    processes, as ``uvicorn.run(app, factory=True, ...)`` does, but with :func:`tcp_listener`'s
    socket when there are several workers."""
    if workers < 2:  # asyncio makes the listener itself: TCP_NODELAY holds
        uvicorn.run(app, factory=True, host=host, port=port)
        return
    patience: dict[str, Any] = {}
    if "timeout_worker_healthcheck" in inspect.signature(uvicorn.Config).parameters:
        patience["timeout_worker_healthcheck"] = WORKER_HEALTHCHECK_S
    config = _Config(app, factory=True, host=host, port=port, workers=workers, **patience)
    sock = config.bind_socket()
    options: dict[str, Any] = {"sockets": [sock]}
    if "target" in inspect.signature(Multiprocess).parameters:  # older uvicorn
        options["target"] = uvicorn.Server(config).run
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run
        Multiprocess(config, **options).run()
