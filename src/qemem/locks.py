"""A per-conversation writer lock kept in the store, so two builds never duplicate paid work.

The owner (process id, host, start time) is written to the conversation's state in one
transaction before any LLM call; a second builder of the same conversation is refused with a
message naming the owner. A lock whose process is gone (killed, crashed) is taken over: on
the same host when the process no longer exists, from another host after ``STALE_S``. A lock
taken by a background job (:mod:`qemem.store.jobs`) records the job's lease and lives exactly
as long as it: once the lease has expired (the job's worker died, and the job may be retried by
another worker) the lock is abandoned at once, whatever the host.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from qemem.errors import BusyError, NotFoundError
from qemem.store.base import MemoryStore, Scope
from qemem.store.jobs import JobTable, Lease

STALE_S = 6 * 3600.0
"""A lock held from another host is considered abandoned after this many seconds."""

_HELD: set[tuple[int, Scope, str]] = set()
_HELD_LOCK = threading.Lock()


def _leased(store: MemoryStore, owner: dict[str, Any]) -> bool:
    """Whether the job lease a lock owner recorded is still held (not expired)."""
    table = getattr(store, "jobs", None)
    row = table.get(str(owner["job"])) if isinstance(table, JobTable) else None
    return row is not None and row.leased(str(owner.get("lease", "")))


def _alive(store: MemoryStore, owner: dict[str, Any], key: tuple[int, Scope, str]) -> bool:
    if not owner.get("pid"):
        return False
    if owner.get("job"):
        return _leased(store, owner)
    if owner.get("host") != socket.gethostname():
        return time.time() - float(owner.get("since", 0)) < STALE_S
    pid = int(owner["pid"])
    if pid == os.getpid():
        with _HELD_LOCK:
            return key in _HELD
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def writer_lock(
    store: MemoryStore, scope: Scope, what: str, *, lease: Lease | None = None
) -> Iterator[Scope]:
    """Hold the ``what`` lock of ``scope`` (e.g. ``build``) for the duration of the block,
    which gets the scope pinned to the life of the conversation the lock was taken in (see
    :class:`~qemem.store.base.Scope`); ``lease``: that of the job doing it (the lock lasts no
    longer than the lease).

    Raises BusyError when a live process (or a job under an unexpired lease) holds it.
    """
    state_key = f"lock.{what}"
    key = (id(store), scope, what)
    with store.transaction():
        pinned = store.pin(scope)
        raw = store.get_state(pinned, state_key)
        owner = json.loads(raw) if raw else {}
        if _alive(store, owner, key):
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(owner["since"])))
            raise BusyError(
                f"another {what} of conversation {scope} is running (process {owner['pid']} on "
                f"{owner['host']}, since {started}): wait for it to finish, then run this again "
                "(it does only what is still missing)"
            )
        mine: dict[str, Any] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.time(),
        }
        if lease is not None:
            mine |= {"job": lease.job, "lease": lease.owner}
        store.set_state(pinned, state_key, json.dumps(mine))
    with _HELD_LOCK:
        _HELD.add(key)
    try:
        yield pinned
    finally:
        with _HELD_LOCK:
            _HELD.discard(key)
        _release(store, Scope(scope.conversation, scope.namespace), state_key, mine)


def _release(store: MemoryStore, scope: Scope, state_key: str, mine: dict[str, Any]) -> None:
    """Clear the lock if it is still ``mine``: one taken over meanwhile (lease expired) is
    not, and one of a conversation deleted meanwhile went with it."""
    with suppress(NotFoundError), store.transaction():
        raw = store.get_state(scope, state_key)
        if raw and json.loads(raw) == mine:
            store.set_state(scope, state_key, "{}")
