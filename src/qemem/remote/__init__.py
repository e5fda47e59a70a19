"""Remote clients of a qemem server: ``RemoteMemory`` (blocking) and ``AsyncRemoteMemory``
(asyncio), both from one sans-IO protocol (:mod:`qemem.remote.calls`)."""

from qemem.remote.aio import AsyncRemoteMemory
from qemem.remote.sync import RemoteMemory

__all__ = ["AsyncRemoteMemory", "RemoteMemory"]
