"""PostgreSQL + pgvector store: the shared SQL store, for several processes.

psycopg 3, psycopg_pool and pgvector come with the ``postgres`` extra and are imported only
when a ``postgresql://`` store is opened. Each write method is one transaction (joining an
outer :meth:`PostgresStore.transaction`); writes to one conversation take that conversation's
advisory lock, inserts are idempotent (``ON CONFLICT``), so processes ingesting, building and
searching at once neither lose nor duplicate records. Dense top-k may come from a pgvector
HNSW index (:meth:`PostgresStore.nearest`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import numpy as np

from qemem.errors import ConfigError, StoreError
from qemem.models import Space
from qemem.store import redact
from qemem.store.base import Scope, ordering
from qemem.store.dialect import POSTGRES
from qemem.store.edits import NOT_SUPERSEDED, searchable
from qemem.store.postgres_schema import migrate
from qemem.store.rows import FIRST_TURN, TABLES
from qemem.store.sql import SQLStore

POOL_TIMEOUT_S = 5.0
"""How long a call waits for a pooled connection (``QEMEM_PG_TIMEOUT``) before it fails with
a StoreError: while the database is down, every call fails within this time."""
RECONNECT_S = 5.0
"""How long the pool retries (with backoff) to open a lost connection before it gives up; the
next call starts a fresh attempt, so a database back after an outage is used again within
seconds."""


def unreachable() -> tuple[type[Exception], ...]:
    """The errors of psycopg and its pool that mean the database cannot be reached now (it is
    down, restarting, or its connections were broken)."""
    import psycopg
    from psycopg_pool import PoolTimeout

    return (psycopg.OperationalError, PoolTimeout)


def checked_pool(
    url: str,
    size: int,
    timeout: float | None = None,
    configure: Callable[[Any], None] | None = None,
) -> Any:
    """An open ``psycopg_pool.ConnectionPool`` of at most ``size`` autocommit connections to
    ``url``, each checked before it is handed out (a connection a restart of the database
    broke is replaced, never used); a caller waits at most ``timeout`` seconds (default
    ``POOL_TIMEOUT_S``) for one."""
    from psycopg_pool import ConnectionPool

    return ConnectionPool(
        url,
        min_size=1,
        max_size=max(1, size),
        kwargs={"autocommit": True},
        configure=configure,
        check=ConnectionPool.check_connection,
        timeout=POOL_TIMEOUT_S if timeout is None else timeout,
        reconnect_timeout=RECONNECT_S,
        open=True,
    )


# vectors_hnsw_<dim>_<conversation pk>_<space>, as PostgresStore._ensure_hnsw names them
_HNSW_NAME = re.compile(r"vectors_hnsw_(?P<dim>\d+)_(?P<pk>\d+)_(?P<space>\w+)")


class PostgresStore(SQLStore):
    """A :class:`~qemem.store.base.MemoryStore` in a PostgreSQL database with pgvector.

    ``pool_size`` bounds the connections this process holds; ``timeout``: how long a call
    waits for a connection (default ``POOL_TIMEOUT_S``) before it fails. ``hnsw_min_rows``:
    serve dense top-k of scopes with at least this many vectors from a pgvector HNSW index
    (approximate); None (the default) keeps every search exact.
    """

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 8,
        hnsw_min_rows: int | None = None,
        timeout: float | None = None,
    ) -> None:
        try:
            import psycopg
            import psycopg_pool  # noqa: F401  (the pool's extra, checked here)
            from pgvector.psycopg import register_vector
        except ImportError as exc:
            raise ConfigError(
                f"the PostgreSQL store needs psycopg, psycopg_pool and pgvector ({exc.name} is "
                "missing): pip install 'qemem[postgres]'"
            ) from exc
        super().__init__()
        self.path = redact(url)
        self.hnsw_min_rows = hnsw_min_rows
        self._integrity = psycopg.IntegrityError
        self._unreachable = unreachable()
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                self._create_extension(conn)
                migrate(conn, self.path)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {exc}") from exc

        self._pool = checked_pool(url, pool_size, timeout, register_vector)
        self._local = threading.local()
        self._hnsw_indexes: set[tuple[int, int, str]] = set()

    @staticmethod
    def _create_extension(conn: Any) -> None:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            return
        import psycopg

        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise StoreError(
                f"pgvector is not enabled in this database and this user cannot enable it "
                f"({exc}): install pgvector >= 0.5 and run, as a superuser, "
                "CREATE EXTENSION vector;"
            ) from exc

    # ------------------------------------------------------------------ connections
    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self._in_transaction():
            yield
            return
        try:
            with self._pool.connection() as conn, conn.transaction():
                self._local.conn = conn
                try:
                    yield
                finally:
                    self._local.conn = None
        except self._integrity as exc:
            raise StoreError(f"write refused by store {self.path}: {exc}") from exc
        except self._unreachable as exc:
            raise StoreError(f"store {self.path} is unreachable: {exc}") from exc

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """This thread's transaction's connection, else one from the pool."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        try:
            with self._pool.connection() as conn:
                yield conn
        except self._unreachable as exc:
            raise StoreError(f"store {self.path} is unreachable: {exc}") from exc

    def close(self) -> None:
        self._pool.close()

    def _in_transaction(self) -> bool:
        return getattr(self._local, "conn", None) is not None

    def _query(
        self, sql: str, params: Sequence[object] = (), *, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        with self._connection() as conn:
            cursor = conn.execute(self.dialect.sql(sql), params, binary=binary)
            return cast(list[tuple[Any, ...]], cursor.fetchall())

    def _exec(self, sql: str, params: Sequence[object] = ()) -> int:
        with self._connection() as conn:
            return int(conn.execute(self.dialect.sql(sql), params).rowcount)

    def _write(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        if rows:
            with self._connection() as conn, conn.cursor() as cursor:
                cursor.executemany(self.dialect.sql(sql), rows)

    # ------------------------------------------------------------------ HNSW top-k
    def nearest(
        self, scope: Scope, space: Space, queries: np.ndarray, k: int
    ) -> list[list[str]] | None:
        """Dense top-k from a pgvector HNSW index (cosine) when the scope holds at least
        ``hnsw_min_rows`` vectors of ``space`` (and, for turns, no passages: the index holds
        whole turns, so a conversation with passages is searched by the exact scan); None
        otherwise (search stays exact). The candidates are re-ranked by their exact float32
        cosine, ties in record order, as the exact search orders them.

        Each such conversation and space gets an index of its own (a partial index): pgvector
        0.6 filters an index scan's ``hnsw.ef_search`` candidates after the scan, so one index
        shared by many conversations returned a few of a conversation's rows instead of k.
        When the index still yields fewer than k (or every) current rows, the search is exact.
        """
        if self.hnsw_min_rows is None:
            return None
        pk = self._pk(scope)
        if space == "turn" and self._query("SELECT 1 FROM passages WHERE conv = ? LIMIT 1", (pk,)):
            return None
        live = NOT_SUPERSEDED.format(table="v") if space == "fact" else ""
        found = self._query(
            f"SELECT count(*) FROM vectors v WHERE v.conv = ? AND v.space = ?{live}", (pk, space)
        )
        rows_in_scope = int(found[0][0])
        if rows_in_scope == 0 or rows_in_scope < self.hnsw_min_rows:
            return None
        dim = int(queries.shape[1])
        self._ensure_hnsw(dim, pk, space)
        position = {"turn": "r.position", "episode": FIRST_TURN}.get(space, "0")
        # the conversation and space as literals (pk is an int, space one of three names), so
        # the planner matches the partial index whatever plan it caches
        sql = (
            f"SELECT v.id, v.vector, r.session, {position} FROM vectors v "
            f"JOIN {TABLES[space]} r ON r.conv = v.conv AND r.id = v.id "
            f"WHERE v.conv = {pk:d} AND v.space = '{space}'"
            + searchable(space)
            + f" ORDER BY v.vector::vector({dim}) <=> %s::vector({dim}) LIMIT %s"
        )
        out: list[list[str]] = []
        with self._connection() as conn, conn.transaction():
            # ef_search 40 (pgvector's default) gave recall@10 0.86 on 1,250 BEAM-shaped
            # messages, 200 gave 0.985 at the same latency (docs/scale.md)
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(200, min(1000, 4 * k))}")
            for query in queries.astype(np.float32):
                rows = conn.execute(sql, (query, k), binary=True, prepare=False).fetchall()
                if len(rows) < min(k, rows_in_scope):
                    return None
                sims = np.vstack([row[1].to_numpy() for row in rows]) @ query
                order = sorted(
                    range(len(rows)),
                    key=lambda i: (-sims[i], ordering(space, rows[i][0], rows[i][2], rows[i][3])),
                )
                out.append([rows[i][0] for i in order])
        return out

    def _ensure_hnsw(self, dim: int, pk: int, space: Space) -> None:
        """The HNSW index of one conversation's vectors of one space (created once)."""
        if (dim, pk, space) not in self._hnsw_indexes:
            self._exec(
                f"CREATE INDEX IF NOT EXISTS vectors_hnsw_{dim}_{pk:d}_{space} ON vectors "
                f"USING hnsw ((vector::vector({dim})) vector_cosine_ops) "
                f"WHERE conv = {pk:d} AND space = '{space}'"
            )
            self._hnsw_indexes.add((dim, pk, space))

    def delete_conversation(self, scope: Scope) -> bool:
        """Delete the conversation as :meth:`SQLStore.delete_conversation` does, and drop its
        HNSW indexes: its pk is never given again, so they would only cost every later write
        of vectors an index predicate to test."""
        with self.transaction():
            self.lock_scope(scope)
            pks = self._query(
                "SELECT pk FROM conversations WHERE namespace = ? AND id = ?",
                (scope.namespace, scope.conversation),
            )
            deleted = super().delete_conversation(scope)
            for (pk,) in pks:
                self._drop_hnsw(int(pk))
        return deleted

    def _drop_hnsw(self, pk: int) -> None:
        """Drop the HNSW indexes of the conversation with primary key ``pk`` (every space and
        dimension; inside the caller's transaction)."""
        names = self._query(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = 'vectors' AND starts_with(indexname, 'vectors_hnsw_')",
            (),
        )
        for (name,) in names:
            found = _HNSW_NAME.fullmatch(str(name))
            if found and int(found["pk"]) == pk:
                self._exec(f'DROP INDEX IF EXISTS "{name}"')
        self._hnsw_indexes = {key for key in self._hnsw_indexes if key[1] != pk}
