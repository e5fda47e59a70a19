"""Failure handling of the SQLite store: read-only opening and clear write errors.

A read-only open never creates or migrates anything: the file must exist and be a qemem store
of a schema this code knows. Write failures (a read-only file, a writer holding the lock past
the busy timeout, a concurrent writer's conflicting rows) become ``StoreError`` messages that
say what to do instead of ``sqlite3`` tracebacks.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from qemem.errors import StoreError
from qemem.store.schema import SCHEMA_VERSION

BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another writer's lock before giving up with a clear error."""


def open_read_only(path: str) -> sqlite3.Connection:
    """A read-only connection to the existing qemem store at ``path``.

    Tries ``mode=ro`` first; when the WAL side files cannot be created (a directory or file
    owned by another user), falls back to ``immutable=1``, which reads the file as it is. A
    file left in WAL mode without a ``-wal`` file (a writer that did not close) holds all its
    data and has no writer: it is read as it is too, so no ``-wal``/``-shm`` files are left.
    """
    if path == ":memory:":
        raise StoreError("an in-memory store cannot be opened read-only")
    if not Path(path).is_file():
        raise StoreError(
            f"no qemem store at {path}: check the path (--store / QEMEM_STORE), "
            "or create one with qemem ingest FILE --store PATH"
        )
    uri = f"file:{quote(str(Path(path).resolve()))}"
    last: sqlite3.Error | None = None
    tries = ("mode=ro&immutable=1",) if _idle_wal(path) else ("mode=ro", "mode=ro&immutable=1")
    for flags in tries:
        try:
            conn = sqlite3.connect(
                f"{uri}?{flags}", uri=True, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _check_schema(conn, path)
            return conn
        except sqlite3.OperationalError as exc:
            last = exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open store {path!r}: {exc}") from None
    raise StoreError(f"cannot open store {path!r} for reading: {last}")


def _idle_wal(path: str) -> bool:
    """Whether the SQLite file ``path`` is in WAL mode (header bytes 18-19) with no ``-wal``
    file beside it: every write is in the file, and no writer has it open."""
    try:
        with open(path, "rb") as file:
            header = file.read(20)
    except OSError:
        return False
    return header[18:20] == b"\x02\x02" and not Path(f"{path}-wal").exists()


def _check_schema(conn: sqlite3.Connection, path: str) -> None:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version == 0:
        conn.close()
        raise StoreError(f"{path} is not a qemem store (no qemem schema): check the path")
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(
            f"this store has schema version {version}, newer than this qemem supports "
            f"({SCHEMA_VERSION}): upgrade qemem"
        )
    if version < SCHEMA_VERSION:
        conn.close()
        raise StoreError(
            f"store {path} has schema version {version} and needs an upgrade to "
            f"{SCHEMA_VERSION}: run a writing command (e.g. qemem ingest) once to migrate it"
        )
    conn.execute("SELECT count(*) FROM conversations").fetchone()


def write_error(path: str, exc: sqlite3.Error) -> StoreError | None:
    """The user-facing error for a failed write to the store at ``path``; None for a failure
    that is a bug of the caller (a foreign key violation, say), left to propagate as is."""
    text = str(exc)
    if "readonly" in text or "read-only" in text:
        return StoreError(
            f"store {path} is read-only (file or directory permissions, or a read-only disk): "
            "writing commands need write access; copy the store somewhere writable"
        )
    if "locked" in text or "busy" in text:
        return StoreError(
            f"store {path} stayed locked by another writer (another qemem ingest or build?) "
            f"for {BUSY_TIMEOUT_MS // 1000} s: wait for it to finish and run this again"
        )
    if isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in text:
        return StoreError(
            f"another writer changed store {path} at the same time ({text}): run the command "
            "again; it adds only what is still missing"
        )
    if isinstance(exc, sqlite3.OperationalError):
        return StoreError(f"writing to store {path} failed: {text}")
    return None
