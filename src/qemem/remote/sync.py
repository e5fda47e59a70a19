"""``RemoteMemory``: the ``Memory`` API over a qemem server (``qemem serve``), on httpx.

Switching from embedded to served memory is one line::

    memory = Memory.open("memory.db")                       # embedded
    memory = RemoteMemory("http://127.0.0.1:8765", api_key)  # served

The methods return the same types as ``Memory`` and raise the same ``QememError`` subclasses
(from the server's problem details). The namespace is the API key's. The methods are written
from the operation table (:mod:`qemem.remote.sync_methods`); what they send and how the
answers are read is :mod:`qemem.remote.calls`, shared with ``AsyncRemoteMemory``.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from qemem.errors import QememError
from qemem.memory.api import MemoryAPI
from qemem.remote import calls
from qemem.remote.calls import Call, Steps, T
from qemem.remote.sync_methods import RemoteMethods


class RemoteMemory(RemoteMethods, MemoryAPI):
    """A qemem server seen through the ``Memory`` API (``poll_seconds``: the pause between
    polls of a build's job)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 120.0,
        client: httpx.Client | None = None,
        poll_seconds: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.Client(base_url=self.base_url, timeout=timeout)
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self.poll_seconds = poll_seconds

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, call: Call) -> Any:
        try:
            response = self._client.request(
                call.method, call.path, json=call.body, headers={**self._headers, **call.headers}
            )
        except httpx.TransportError as exc:
            raise calls.unreachable(self.base_url, exc) from exc
        return calls.result_of(response)

    def _run(self, steps: Steps[T]) -> T:
        """Drive an operation of :mod:`qemem.remote.calls` to its result."""
        try:
            step = next(steps)
            while True:
                if isinstance(step, calls.Wait):
                    time.sleep(self.poll_seconds)
                    step = steps.send(None)
                    continue
                try:
                    out = self._send(step)
                except QememError as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(out)
        except StopIteration as done:
            result: T = done.value
            return result
