"""PostgreSQL + pgvector store: the same concepts as the SQLite store, for several processes.

psycopg 3, psycopg_pool and pgvector come with the ``postgres`` extra and are imported only
when a ``postgresql://`` store is opened. Each write method is one transaction (joining an
outer :meth:`PostgresStore.transaction`); writes to one conversation take that conversation's
advisory lock, inserts are idempotent (``ON CONFLICT``), so processes ingesting, building and
searching at once neither lose nor duplicate records. Records and index rows are cached per
scope by the scope's version (a sequence value, never reused).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar, cast

import numpy as np

from qemem.errors import ConfigError, EmbedderMismatchError, InputError, NotFoundError, StoreError
from qemem.models import Conversation, Episode, SemanticFact, Session, Space, Turn
from qemem.store.base import (
    IndexRows,
    Scope,
    VersionedCache,
    episode_row,
    fact_row,
    ordering,
    record_order,
    select_records,
    session_row,
    turn_row,
)
from qemem.store.postgres_schema import migrate

_TABLES: dict[Space, str] = {"turn": "turns", "episode": "episodes", "fact": "facts"}
T = TypeVar("T")


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    head, at, tail = url.rpartition("@")
    if not at or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, auth = head.partition("//")
    return f"{scheme}//{auth.split(':', 1)[0]}:***@{tail}"


class PostgresStore:
    """A :class:`~qemem.store.base.MemoryStore` in a PostgreSQL database with pgvector.

    ``pool_size`` bounds the connections this process holds. ``hnsw_min_rows``: serve dense
    top-k of scopes with at least this many vectors from a pgvector HNSW index (approximate);
    None (the default) keeps every search exact.
    """

    def __init__(self, url: str, *, pool_size: int = 8, hnsw_min_rows: int | None = None) -> None:
        try:
            import psycopg
            from pgvector.psycopg import register_vector
            from psycopg_pool import ConnectionPool, PoolTimeout
        except ImportError as exc:
            raise ConfigError(
                f"the PostgreSQL store needs psycopg, psycopg_pool and pgvector ({exc.name} is "
                "missing): pip install 'qemem[postgres]'"
            ) from exc
        self.path = redact(url)
        self.hnsw_min_rows = hnsw_min_rows
        self._integrity = psycopg.IntegrityError
        self._unreachable = (psycopg.OperationalError, PoolTimeout)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                self._create_extension(conn)
                migrate(conn)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {exc}") from exc

        def configure(conn: Any) -> None:
            register_vector(conn)

        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True},
            configure=configure,
            open=True,
        )
        self._local = threading.local()
        self._cache: VersionedCache[Any] = VersionedCache(size=256)
        self._hnsw_dims: set[int] = set()

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

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def transaction(self) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:
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

    def _query(self, sql: str, params: Sequence[object] = (), **kw: Any) -> list[tuple[Any, ...]]:
        with self._connection() as conn:
            return cast(list[tuple[Any, ...]], conn.execute(sql, params, **kw).fetchall())

    def _exec(self, sql: str, params: Sequence[object] = ()) -> None:
        with self._connection() as conn:
            conn.execute(sql, params)

    def _write(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        if rows:
            with self._connection() as conn, conn.cursor() as cursor:
                cursor.executemany(sql, rows)

    def _row(self, scope: Scope) -> tuple[int, int]:
        rows = self._query(
            "SELECT pk, version FROM conversations WHERE namespace = %s AND id = %s",
            (scope.namespace, scope.conversation),
        )
        if not rows:
            raise self._missing(scope)
        return int(rows[0][0]), int(rows[0][1])

    def _missing(self, scope: Scope) -> NotFoundError:
        return NotFoundError(
            f"no conversation {scope!s} in store {self.path}: ingest it first "
            "(qemem ingest FILE --store URL) or list them (qemem conversations)"
        )

    def _pk(self, scope: Scope) -> int:
        return self._row(scope)[0]

    def _locked_pk(self, scope: Scope) -> int:
        """The scope's pk, holding its advisory lock and bumping its version (in a
        transaction): writers of one conversation take turns."""
        self._exec(
            "SELECT pg_advisory_xact_lock(hashtext(%s))",
            (f"{scope.namespace}/{scope.conversation}",),
        )
        pk = self._pk(scope)
        self._exec(
            "UPDATE conversations SET version = nextval('scope_versions') WHERE pk = %s", (pk,)
        )
        return pk

    def version(self, scope: Scope) -> int | None:
        version = self._row(scope)[1]
        return None if getattr(self._local, "conn", None) is not None else version

    def _load(self, scope: Scope, what: str, load: Callable[[int], T]) -> T:
        pk, version = self._row(scope)
        if getattr(self._local, "conn", None) is not None:
            return load(pk)
        return cast(T, self._cache.get((scope, what), version, lambda: load(pk)))

    # ------------------------------------------------------------------ conversations
    def conversations(self, namespace: str | None = None) -> list[Conversation]:
        sql = "SELECT namespace, id FROM conversations"
        params: tuple[str, ...] = ()
        if namespace is not None:
            sql += " WHERE namespace = %s"
            params = (namespace,)
        rows = self._query(sql + " ORDER BY namespace, id", params)
        return [self.get_conversation(Scope(cid, ns)) for ns, cid in rows]

    def get_conversation(self, scope: Scope) -> Conversation:
        rows = self._query(
            "SELECT pk, speakers FROM conversations WHERE namespace = %s AND id = %s",
            (scope.namespace, scope.conversation),
        )
        if not rows:
            raise self._missing(scope)
        pk, speakers = rows[0]
        sessions = tuple(
            Session(int(idx), datetime.fromisoformat(dt), key)
            for idx, dt, key in self._query(
                "SELECT idx, date_time, key FROM sessions WHERE conv = %s ORDER BY idx", (pk,)
            )
        )
        return Conversation(
            scope.conversation, tuple(json.loads(speakers)), sessions, scope.namespace
        )

    def put_conversation(self, scope: Scope, speakers: Sequence[str]) -> None:
        with self.transaction():
            self._exec(
                "INSERT INTO conversations (namespace, id, speakers) VALUES (%s, %s, %s) "
                "ON CONFLICT (namespace, id) DO NOTHING",
                (scope.namespace, scope.conversation, json.dumps(list(speakers))),
            )
            pk = self._locked_pk(scope)
            known = json.loads(
                self._query("SELECT speakers FROM conversations WHERE pk = %s", (pk,))[0][0]
            )
            merged = known + [s for s in speakers if s not in known]
            if merged != known:
                self._exec(
                    "UPDATE conversations SET speakers = %s WHERE pk = %s",
                    (json.dumps(merged), pk),
                )

    def add_sessions(self, scope: Scope, sessions: Sequence[Session]) -> None:
        with self.transaction():
            pk = self._locked_pk(scope)
            self._write(
                "INSERT INTO sessions (conv, idx, key, date_time) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                [session_row(pk, s) for s in sessions],
            )

    def delete_conversation(self, scope: Scope) -> bool:
        with self.transaction():
            rows = self._query(
                "DELETE FROM conversations WHERE namespace = %s AND id = %s RETURNING pk",
                (scope.namespace, scope.conversation),
            )
        return bool(rows)

    # ------------------------------------------------------------------ embedder bookkeeping
    def embedder(self) -> tuple[str, int] | None:
        rows = self._query("SELECT value FROM meta WHERE key = 'embedder'")
        if not rows:
            return None
        info = json.loads(rows[0][0])
        return str(info["id"]), int(info["dim"])

    def _check_vectors(self, count: int, vectors: np.ndarray, embedder: str) -> None:
        if vectors.ndim != 2 or vectors.shape[0] != count:
            raise InputError(f"expected {count} vectors, got an array of shape {vectors.shape}")
        dim = int(vectors.shape[1])
        self._exec(
            "INSERT INTO meta (key, value) VALUES ('embedder', %s) ON CONFLICT DO NOTHING",
            (json.dumps({"id": embedder, "dim": dim}),),
        )
        known = self.embedder()
        if known != (embedder, dim):
            raise EmbedderMismatchError(
                f"store {self.path} holds vectors of embedder {known[0] if known else None!r} "
                f"({known[1] if known else 0}-d); refusing to mix in {embedder!r} ({dim}-d). "
                "Open it with the same embedder (QEMEM_EMBEDDER) or ingest into a new store"
            )

    def _put_vectors(self, pk: int, space: Space, ids: Sequence[str], vectors: np.ndarray) -> None:
        self._write(
            "INSERT INTO vectors (conv, space, id, vector) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (conv, space, id) DO UPDATE SET vector = EXCLUDED.vector",
            [
                (pk, space, rid, np.ascontiguousarray(v, dtype=np.float32))
                for rid, v in zip(ids, vectors, strict=True)
            ],
        )

    # ------------------------------------------------------------------ records
    def add_turns(
        self, scope: Scope, turns: Sequence[Turn], vectors: np.ndarray, embedder: str
    ) -> None:
        with self.transaction():
            pk = self._locked_pk(scope)
            self._check_vectors(len(turns), vectors, embedder)
            self._write(
                "INSERT INTO turns (conv, id, session, pos, speaker, text, ts, tokens)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [turn_row(pk, t) for t in turns],
            )
            self._put_vectors(pk, "turn", [t.id for t in turns], vectors)

    def turns(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Turn]:
        return select_records(
            self._load(scope, "turns", lambda pk: self._load_turns(pk, scope)), ids
        )

    def _load_turns(self, pk: int, scope: Scope) -> list[Turn]:
        rows = self._query(
            "SELECT id, session, pos, speaker, text, ts FROM turns WHERE conv = %s "
            "ORDER BY session, pos",
            (pk,),
        )
        return [
            Turn(rid, scope.conversation, session, pos, speaker, text, datetime.fromisoformat(ts))
            for rid, session, pos, speaker, text, ts in rows
        ]

    def add_episodes(
        self, scope: Scope, episodes: Sequence[Episode], vectors: np.ndarray, embedder: str
    ) -> None:
        with self.transaction():
            pk = self._locked_pk(scope)
            self._check_vectors(len(episodes), vectors, embedder)
            self._write(
                "INSERT INTO episodes (conv, id, session, title, content, ts, tokens)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [episode_row(pk, e) for e in episodes],
            )
            self._write(
                "INSERT INTO episode_turns (conv, episode, turn, ord) VALUES (%s, %s, %s, %s)",
                [(pk, e.id, tid, n) for e in episodes for n, tid in enumerate(e.turn_ids)],
            )
            self._put_vectors(pk, "episode", [e.id for e in episodes], vectors)

    def episodes(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Episode]:
        return select_records(
            self._load(scope, "episodes", lambda pk: self._load_episodes(pk, scope)), ids
        )

    def _load_episodes(self, pk: int, scope: Scope) -> list[Episode]:
        links: dict[str, list[str]] = {}
        for episode, turn in self._query(
            "SELECT episode, turn FROM episode_turns WHERE conv = %s ORDER BY episode, ord", (pk,)
        ):
            links.setdefault(episode, []).append(turn)
        rows = sorted(
            self._query(
                "SELECT id, session, title, content, ts FROM episodes WHERE conv = %s", (pk,)
            ),
            key=lambda row: record_order(row[0], row[1]),
        )
        return [
            Episode(
                rid,
                scope.conversation,
                session,
                title,
                content,
                datetime.fromisoformat(ts),
                tuple(links.get(rid, ())),
            )
            for rid, session, title, content, ts in rows
        ]

    def put_facts(
        self, scope: Scope, facts: Sequence[SemanticFact], vectors: np.ndarray, embedder: str
    ) -> None:
        with self.transaction():
            pk = self._locked_pk(scope)
            self._check_vectors(len(facts), vectors, embedder)
            self._write(
                "DELETE FROM fact_episodes WHERE conv = %s AND fact = %s",
                [(pk, f.id) for f in facts],
            )
            self._write(
                "INSERT INTO facts (conv, id, content, session, tokens)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (conv, id) DO UPDATE SET"
                " content = EXCLUDED.content, session = EXCLUDED.session,"
                " tokens = EXCLUDED.tokens",
                [fact_row(pk, f) for f in facts],
            )
            self._write(
                "INSERT INTO fact_episodes (conv, fact, episode, ord) VALUES (%s, %s, %s, %s)",
                [
                    (pk, f.id, eid, n)
                    for f in facts
                    for n, eid in enumerate(dict.fromkeys(f.episode_ids))
                ],
            )
            self._put_vectors(pk, "fact", [f.id for f in facts], vectors)

    def delete_episodes(self, scope: Scope, ids: Sequence[str]) -> None:
        with self.transaction():
            pk = self._locked_pk(scope)
            self._exec("DELETE FROM episodes WHERE conv = %s AND id = ANY(%s)", (pk, list(ids)))
            self._exec(
                "DELETE FROM vectors WHERE conv = %s AND space = 'episode' AND id = ANY(%s)",
                (pk, list(ids)),
            )
            orphans = (
                "SELECT id FROM facts f WHERE conv = %s AND NOT EXISTS (SELECT 1 FROM "
                "fact_episodes l WHERE l.conv = f.conv AND l.fact = f.id)"
            )
            self._exec(
                f"DELETE FROM vectors WHERE conv = %s AND space = 'fact' AND id IN ({orphans})",
                (pk, pk),
            )
            self._exec(f"DELETE FROM facts WHERE conv = %s AND id IN ({orphans})", (pk, pk))

    def facts(self, scope: Scope, ids: Sequence[str] | None = None) -> list[SemanticFact]:
        return select_records(
            self._load(scope, "facts", lambda pk: self._load_facts(pk, scope)), ids
        )

    def _load_facts(self, pk: int, scope: Scope) -> list[SemanticFact]:
        links: dict[str, list[str]] = {}
        for fact, episode in self._query(
            "SELECT fact, episode FROM fact_episodes WHERE conv = %s ORDER BY fact, ord", (pk,)
        ):
            links.setdefault(fact, []).append(episode)
        rows = sorted(
            self._query("SELECT id, content, session FROM facts WHERE conv = %s", (pk,)),
            key=lambda row: record_order(row[0]),
        )
        return [
            SemanticFact(rid, scope.conversation, content, session, tuple(links.get(rid, ())))
            for rid, content, session in rows
        ]

    # ------------------------------------------------------------------ index rows
    def index_rows(self, scope: Scope, space: Space) -> IndexRows:
        return self._load(scope, f"{space} rows", lambda pk: self._load_rows(pk, space))

    def _load_rows(self, pk: int, space: Space) -> IndexRows:
        position = "r.pos" if space == "turn" else "0"
        rows = self._query(
            f"SELECT r.id, r.tokens, v.vector, r.session, {position} FROM {_TABLES[space]} r "
            "JOIN vectors v ON v.conv = r.conv AND v.space = %s AND v.id = r.id "
            "WHERE r.conv = %s",
            (space, pk),
            binary=True,
        )
        rows.sort(key=lambda row: ordering(space, row[0], row[3], row[4]))
        known = self.embedder()
        matrix = (
            np.vstack([row[2].to_numpy() for row in rows]).astype(np.float32)
            if rows
            else np.zeros((0, known[1] if known else 0), dtype=np.float32)
        )
        return IndexRows([r[0] for r in rows], [r[1].split() for r in rows], matrix)

    def vectors(self, scope: Scope, space: Space) -> tuple[list[str], np.ndarray]:
        rows = self.index_rows(scope, space)
        return list(rows.ids), rows.matrix

    def nearest(
        self, scope: Scope, space: Space, queries: np.ndarray, k: int
    ) -> list[list[str]] | None:
        """Dense top-k from the pgvector HNSW index (cosine) when the scope holds at least
        ``hnsw_min_rows`` vectors of ``space``; None otherwise (search stays exact). The
        candidates are re-ranked by their exact float32 cosine, ties in record order, as the
        exact search orders them."""
        if self.hnsw_min_rows is None:
            return None
        pk = self._pk(scope)
        found = self._query(
            "SELECT count(*) FROM vectors WHERE conv = %s AND space = %s", (pk, space)
        )[0][0]
        if found == 0 or found < self.hnsw_min_rows:
            return None
        dim = int(queries.shape[1])
        self._ensure_hnsw(dim)
        position = "r.pos" if space == "turn" else "0"
        sql = (
            f"SELECT v.id, v.vector, r.session, {position} FROM vectors v "
            f"JOIN {_TABLES[space]} r ON r.conv = v.conv AND r.id = v.id "
            "WHERE v.conv = %s AND v.space = %s "
            f"ORDER BY v.vector::vector({dim}) <=> %s::vector({dim}) LIMIT %s"
        )
        out: list[list[str]] = []
        with self._connection() as conn, conn.transaction():
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(1000, 2 * k))}")
            for query in queries.astype(np.float32):
                rows = conn.execute(sql, (pk, space, query, k), binary=True).fetchall()
                sims = np.vstack([row[1].to_numpy() for row in rows]) @ query if rows else []
                order = sorted(
                    range(len(rows)),
                    key=lambda i: (-sims[i], ordering(space, rows[i][0], rows[i][2], rows[i][3])),
                )
                out.append([rows[i][0] for i in order])
        return out

    def _ensure_hnsw(self, dim: int) -> None:
        if dim not in self._hnsw_dims:
            self._exec(
                f"CREATE INDEX IF NOT EXISTS vectors_hnsw_{dim} ON vectors "
                f"USING hnsw ((vector::vector({dim})) vector_cosine_ops)"
            )
            self._hnsw_dims.add(dim)

    # ------------------------------------------------------------------ state
    def get_state(self, scope: Scope, key: str) -> str | None:
        rows = self._query(
            "SELECT value FROM state WHERE conv = %s AND key = %s", (self._pk(scope), key)
        )
        return str(rows[0][0]) if rows else None

    def set_state(self, scope: Scope, key: str, value: str) -> None:
        with self.transaction():
            self._exec(
                "INSERT INTO state (conv, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (conv, key) DO UPDATE SET value = EXCLUDED.value",
                (self._pk(scope), key, value),
            )
