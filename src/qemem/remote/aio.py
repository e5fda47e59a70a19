"""``AsyncRemoteMemory``: ``RemoteMemory`` for asyncio, on ``httpx.AsyncClient``.

The same methods as ``RemoteMemory`` (coroutines here, written from the operation table in
:mod:`qemem.remote.aio_methods`), the same return types and the same ``QememError``
subclasses, from the same protocol code (:mod:`qemem.remote.calls`)::

    async with AsyncRemoteMemory("http://127.0.0.1:8765", api_key) as memory:
        answer = await memory.ask("conv-26", "When did Caroline go to the support group?")
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from qemem.errors import QememError
from qemem.remote import calls
from qemem.remote.aio_methods import AsyncRemoteMethods
from qemem.remote.calls import Call, Steps, T


class AsyncRemoteMemory(AsyncRemoteMethods):
    """A qemem server seen through the ``Memory`` API, for asyncio callers
    (``poll_seconds``: the pause between polls of a build's job)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 120.0,
        client: httpx.AsyncClient | None = None,
        poll_seconds: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.AsyncClient(base_url=self.base_url, timeout=timeout)
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self.poll_seconds = poll_seconds

    async def close(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> AsyncRemoteMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _send(self, call: Call) -> Any:
        try:
            response = await self._client.request(
                call.method, call.path, json=call.body, headers={**self._headers, **call.headers}
            )
        except httpx.TransportError as exc:
            raise calls.unreachable(self.base_url, exc) from exc
        return calls.result_of(response)

    async def _run(self, steps: Steps[T]) -> T:
        """Drive an operation of :mod:`qemem.remote.calls` to its result."""
        try:
            step = next(steps)
            while True:
                if isinstance(step, calls.Wait):
                    await asyncio.sleep(self.poll_seconds)
                    step = steps.send(None)
                    continue
                try:
                    out = await self._send(step)
                except QememError as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(out)
        except StopIteration as done:
            result: T = done.value
            return result
