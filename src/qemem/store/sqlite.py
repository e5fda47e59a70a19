"""The embedded default store: one SQLite file (WAL, foreign keys, ``secure_delete``: what a
delete removes is overwritten in the file, see docs/reliability.md) holding all three spaces.

The queries are the shared ones of :class:`~qemem.store.sql.SQLStore`; this module connects
them: one writer connection behind a lock, a second connection for other threads' reads, and
``BEGIN IMMEDIATE`` transactions, which exclude every other writer from their start.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from qemem.errors import StoreError
from qemem.store.dialect import SQLITE
from qemem.store.guard import BUSY_TIMEOUT_MS, open_read_only, write_error
from qemem.store.schema import migrate
from qemem.store.sql import SQLStore


class SQLiteStore(SQLStore):
    """A :class:`~qemem.store.base.MemoryStore` in one SQLite file, or in memory (``":memory:"``).

    Safe to share between threads: writes (and reads inside a write transaction) go through one
    connection behind a lock; for a file, other threads read through a second connection, so
    reads see the last commit without waiting for a write transaction to end (WAL). Several
    processes may open the same file (WAL, busy timeout).
    """

    dialect = SQLITE

    def __init__(self, path: str | Path = ":memory:", *, read_only: bool = False) -> None:
        super().__init__()
        self.path = str(path)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._depth = 0
        self._owner: int | None = None  # the thread inside the write transaction
        self._reader: sqlite3.Connection | None = None
        self._read_lock = threading.Lock()
        self._scrub = False  # a committed transaction forgot user text: checkpoint the log
        if read_only:
            self._conn = open_read_only(self.path)
            return
        folder = Path(self.path).parent
        if self.path != ":memory:" and not folder.is_dir():
            raise StoreError(
                f"cannot create store {self.path!r}: the folder {str(folder)!r} does not exist "
                "(check the path, or create the folder first)"
            )
        try:
            self._conn = self._connect()
            self._conn.execute("PRAGMA foreign_keys = ON")
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = NORMAL")
            migrate(self._conn, self.path)
            if self.path != ":memory:":
                self._reader = self._connect()
                self._reader.execute("PRAGMA query_only = ON")
        except sqlite3.DatabaseError as exc:
            readonly = write_error(self.path, exc) if "readonly" in str(exc) else None
            raise readonly or StoreError(f"cannot open store {self.path!r}: {exc}") from exc

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA secure_delete = ON")  # deleted rows are overwritten with zeros
        return conn

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._begin()
            self._depth += 1
            try:
                yield
            except BaseException as exc:
                self._depth -= 1
                if outer:
                    self._owner = None
                    self._scrub = False
                if outer and self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    error = write_error(self.path, exc)
                    if error is None and isinstance(exc, sqlite3.IntegrityError):
                        error = StoreError(f"write refused by store {self.path}: {exc}")
                    if error is not None:
                        raise error from exc
                raise
            self._depth -= 1
            if outer:
                self._owner = None
                self._commit()
                if self._scrub:
                    self._checkpoint()

    def _begin(self) -> None:
        if self.read_only:
            raise StoreError(f"store {self.path} was opened read-only: cannot write")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise write_error(self.path, exc) or exc from None
        self._owner = threading.get_ident()

    def _commit(self) -> None:
        try:
            self._conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise write_error(self.path, exc) or exc from None

    def _forgotten(self) -> None:
        self._scrub = True

    def _checkpoint(self) -> None:
        """Copy the write-ahead log into the file and truncate it, so that the old copies of
        rows a transaction deleted leave the ``-wal`` file too (``secure_delete`` overwrote
        them in the database pages). A reader still on an older snapshot can keep the log
        from being truncated: then the next checkpoint does it."""
        self._scrub = False
        if self.path != ":memory:":
            with contextlib.suppress(sqlite3.OperationalError):  # the write is committed
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Close the connections. A writer that is the last one out leaves the file in
        rollback-journal mode (the next writer turns WAL on again), so read-only commands
        that follow open it without leaving ``-wal``/``-shm`` files they cannot remove."""
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
        with self._lock:
            if not self.read_only and self.path != ":memory:":
                try:  # never wait: another connection keeps WAL mode, and that is right
                    self._conn.execute("PRAGMA busy_timeout = 0")
                    self._conn.execute("PRAGMA journal_mode = DELETE")
                except sqlite3.Error:
                    pass
            self._conn.close()

    def _in_transaction(self) -> bool:
        return self._owner == threading.get_ident()

    def _query(
        self, sql: str, params: Sequence[object] = (), *, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        if self._reader is not None and not self._in_transaction():
            with self._read_lock:
                return self._reader.execute(sql, params).fetchall()
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _exec(self, sql: str, params: Sequence[object] = ()) -> int:
        return int(self._conn.execute(sql, params).rowcount)

    def _write(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        self._conn.executemany(sql, rows)
