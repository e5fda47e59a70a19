"""A per-conversation writer lock kept in the store, so two builds never duplicate paid work.

The owner (process id, host, start time) is written to the conversation's state in one
transaction before any LLM call; a second builder of the same conversation is refused with a
message naming the owner. A lock whose process is gone (killed, crashed) is taken over: on
the same host when the process no longer exists, from another host after ``STALE_S``.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from qemem.errors import StoreError
from qemem.store.base import MemoryStore, Scope

STALE_S = 6 * 3600.0
"""A lock held from another host is considered abandoned after this many seconds."""

_HELD: set[tuple[int, Scope, str]] = set()
_HELD_LOCK = threading.Lock()


def _alive(owner: dict[str, Any], key: tuple[int, Scope, str]) -> bool:
    if not owner.get("pid"):
        return False
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
def writer_lock(store: MemoryStore, scope: Scope, what: str) -> Iterator[None]:
    """Hold the ``what`` lock of ``scope`` (e.g. ``build``) for the duration of the block.

    Raises StoreError when a live process holds it.
    """
    state_key = f"lock.{what}"
    key = (id(store), scope, what)
    with store.transaction():
        raw = store.get_state(scope, state_key)
        owner = json.loads(raw) if raw else {}
        if _alive(owner, key):
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(owner["since"])))
            raise StoreError(
                f"another {what} of conversation {scope} is running (process {owner['pid']} on "
                f"{owner['host']}, since {started}): wait for it to finish, then run this again "
                "(it does only what is still missing)"
            )
        mine = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        store.set_state(scope, state_key, json.dumps(mine))
    with _HELD_LOCK:
        _HELD.add(key)
    try:
        yield
    finally:
        with _HELD_LOCK:
            _HELD.discard(key)
        store.set_state(scope, state_key, "{}")
