"""The embedded default store: one SQLite file (WAL, foreign keys) holding all three spaces.

Vectors are float32 blobs, BM25 tokens a space-separated column. Records and index rows are
cached per (scope, space) by the scope's version, so a write to one conversation, from this
connection or another, reloads only that conversation.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from qemem.errors import EmbedderMismatchError, InputError, NotFoundError, StoreError
from qemem.models import (
    Conversation,
    Episode,
    SemanticFact,
    Session,
    Space,
    Turn,
)
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
from qemem.store.guard import open_read_only, write_error
from qemem.store.schema import migrate

_TABLES: dict[Space, str] = {"turn": "turns", "episode": "episodes", "fact": "facts"}
T = TypeVar("T")


class SQLiteStore:
    """A :class:`~qemem.store.base.MemoryStore` in one SQLite file, or in memory (``":memory:"``).

    Safe to share between threads: writes (and reads inside a write transaction) go through one
    connection behind a lock; for a file, other threads read through a second connection, so
    reads see the last commit without waiting for a write transaction to end (WAL). Several
    processes may open the same file (WAL, busy timeout).
    """

    def __init__(self, path: str | Path = ":memory:", *, read_only: bool = False) -> None:
        self.path = str(path)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._depth = 0
        self._owner: int | None = None  # the thread inside the write transaction
        self._reader: sqlite3.Connection | None = None
        self._read_lock = threading.Lock()
        self._cache: VersionedCache[Any] = VersionedCache(size=256)
        if read_only:
            self._conn = open_read_only(self.path)
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute("PRAGMA busy_timeout = 30000")
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = NORMAL")
            migrate(self._conn)
            if self.path != ":memory:":
                self._reader = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=30
                )
                self._reader.execute("PRAGMA busy_timeout = 30000")
                self._reader.execute("PRAGMA query_only = ON")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open store {self.path!r}: {exc}") from exc

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            outer = self._depth == 0
            if outer:
                if self.read_only:
                    raise StoreError(f"store {self.path} was opened read-only: cannot write")
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    raise write_error(self.path, exc) or exc from None
                self._owner = threading.get_ident()
            self._depth += 1
            try:
                yield
            except BaseException as exc:
                self._depth -= 1
                if outer:
                    self._owner = None
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
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.OperationalError as exc:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise write_error(self.path, exc) or exc from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()

    def _in_transaction(self) -> bool:
        """Whether the calling thread is inside this store's write transaction."""
        return self._owner == threading.get_ident()

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if self._reader is not None and not self._in_transaction():
            with self._read_lock:
                return self._reader.execute(sql, params).fetchall()
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _row(self, scope: Scope) -> tuple[int, int]:
        """(pk, version) of the scope's conversation; NotFoundError when absent."""
        rows = self._query(
            "SELECT pk, version FROM conversations WHERE namespace = ? AND id = ?",
            (scope.namespace, scope.conversation),
        )
        if not rows:
            raise NotFoundError(
                f"no conversation {scope!s} in store {self.path}: ingest it first "
                "(qemem ingest FILE --store PATH) or list them (qemem conversations)"
            )
        return int(rows[0][0]), int(rows[0][1])

    def _pk(self, scope: Scope) -> int:
        return self._row(scope)[0]

    def version(self, scope: Scope) -> int | None:
        version = self._row(scope)[1]
        return None if self._in_transaction() else version

    def _bump(self, pk: int) -> None:
        """Give the scope a new version from the store-wide counter (inside a transaction)."""
        self._conn.execute("UPDATE version_counter SET value = value + 1 WHERE id = 1")
        self._conn.execute(
            "UPDATE conversations SET version = (SELECT value FROM version_counter WHERE id = 1)"
            " WHERE pk = ?",
            (pk,),
        )

    def _load(self, scope: Scope, what: str, load: Callable[[int], T]) -> T:
        """``load(pk)``'s value for the scope, cached by the scope's version."""
        pk, version = self._row(scope)
        if self._in_transaction():
            return load(pk)
        return cast(T, self._cache.get((scope, what), version, lambda: load(pk)))

    # ------------------------------------------------------------------ conversations
    def conversations(self, namespace: str | None = None) -> list[Conversation]:
        sql = "SELECT namespace, id FROM conversations"
        params: tuple[str, ...] = ()
        if namespace is not None:
            sql += " WHERE namespace = ?"
            params = (namespace,)
        rows = self._query(sql + " ORDER BY namespace, id", params)
        return [self.get_conversation(Scope(cid, ns)) for ns, cid in rows]

    def get_conversation(self, scope: Scope) -> Conversation:
        return self._load(scope, "conversation", lambda pk: self._load_conversation(pk, scope))

    def _load_conversation(self, pk: int, scope: Scope) -> Conversation:
        speakers = self._query("SELECT speakers FROM conversations WHERE pk = ?", (pk,))[0][0]
        sessions = tuple(
            Session(int(idx), datetime.fromisoformat(dt), key)
            for idx, dt, key in self._query(
                "SELECT idx, date_time, key FROM sessions WHERE conv = ? ORDER BY idx", (pk,)
            )
        )
        return Conversation(
            scope.conversation, tuple(json.loads(speakers)), sessions, scope.namespace
        )

    def put_conversation(self, scope: Scope, speakers: Sequence[str]) -> None:
        with self.transaction():
            rows = self._query(
                "SELECT pk, speakers FROM conversations WHERE namespace = ? AND id = ?",
                (scope.namespace, scope.conversation),
            )
            if not rows:
                cursor = self._conn.execute(
                    "INSERT INTO conversations (namespace, id, speakers) VALUES (?, ?, ?)",
                    (scope.namespace, scope.conversation, json.dumps(list(speakers))),
                )
                self._bump(int(cursor.lastrowid or 0))
                return
            known = json.loads(rows[0][1])
            merged = known + [s for s in speakers if s not in known]
            if merged != known:
                self._conn.execute(
                    "UPDATE conversations SET speakers = ? WHERE pk = ?",
                    (json.dumps(merged), rows[0][0]),
                )
                self._bump(rows[0][0])

    def add_sessions(self, scope: Scope, sessions: Sequence[Session]) -> None:
        with self.transaction():
            pk = self._pk(scope)
            self._conn.executemany(
                "INSERT INTO sessions (conv, idx, key, date_time) VALUES (?, ?, ?, ?)",
                [session_row(pk, s) for s in sessions],
            )
            self._bump(pk)

    def delete_conversation(self, scope: Scope) -> bool:
        with self.transaction():
            try:
                pk = self._pk(scope)
            except NotFoundError:
                return False
            self._conn.execute("DELETE FROM conversations WHERE pk = ?", (pk,))
        return True

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
        known = self.embedder()
        if known is None:
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES ('embedder', ?)",
                (json.dumps({"id": embedder, "dim": dim}),),
            )
        elif known != (embedder, dim):
            raise EmbedderMismatchError(
                f"store {self.path} holds vectors of embedder {known[0]!r} ({known[1]}-d); "
                f"refusing to mix in {embedder!r} ({dim}-d). Open it with the same embedder "
                f"(QEMEM_EMBEDDER) or ingest into a new store"
            )

    def _put_vectors(self, pk: int, space: Space, ids: Sequence[str], vectors: np.ndarray) -> None:
        self._bump(pk)
        self._conn.executemany(
            "INSERT OR REPLACE INTO vectors (conv, space, id, vector) VALUES (?, ?, ?, ?)",
            [
                (pk, space, rid, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for rid, v in zip(ids, vectors, strict=True)
            ],
        )

    # ------------------------------------------------------------------ records
    def add_turns(
        self, scope: Scope, turns: Sequence[Turn], vectors: np.ndarray, embedder: str
    ) -> None:
        with self.transaction():
            pk = self._pk(scope)
            self._check_vectors(len(turns), vectors, embedder)
            self._conn.executemany(
                "INSERT INTO turns (conv, id, session, position, speaker, text, timestamp, tokens)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [turn_row(pk, t) for t in turns],
            )
            self._put_vectors(pk, "turn", [t.id for t in turns], vectors)

    def turns(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Turn]:
        return select_records(
            self._load(scope, "turns", lambda pk: self._load_turns(pk, scope)), ids
        )

    def _load_turns(self, pk: int, scope: Scope) -> list[Turn]:
        rows = self._query(
            "SELECT id, session, position, speaker, text, timestamp FROM turns WHERE conv = ? "
            "ORDER BY session, position",
            (pk,),
        )
        turns = [
            Turn(
                rid,
                scope.conversation,
                session,
                position,
                speaker,
                text,
                datetime.fromisoformat(ts),
            )
            for rid, session, position, speaker, text, ts in rows
        ]
        return turns

    def add_episodes(
        self, scope: Scope, episodes: Sequence[Episode], vectors: np.ndarray, embedder: str
    ) -> None:
        with self.transaction():
            pk = self._pk(scope)
            self._check_vectors(len(episodes), vectors, embedder)
            self._conn.executemany(
                "INSERT INTO episodes (conv, id, session, title, content, timestamp, tokens)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [episode_row(pk, e) for e in episodes],
            )
            self._conn.executemany(
                "INSERT INTO episode_turns (conv, episode, turn, ord) VALUES (?, ?, ?, ?)",
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
            "SELECT episode, turn FROM episode_turns WHERE conv = ? ORDER BY episode, ord", (pk,)
        ):
            links.setdefault(episode, []).append(turn)
        rows = sorted(
            self._query(
                "SELECT id, session, title, content, timestamp FROM episodes WHERE conv = ?", (pk,)
            ),
            key=lambda row: record_order(row[0], row[1]),
        )
        episodes = [
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
        return episodes

    def put_facts(
        self, scope: Scope, facts: Sequence[SemanticFact], vectors: np.ndarray, embedder: str
    ) -> None:
        with self.transaction():
            pk = self._pk(scope)
            self._check_vectors(len(facts), vectors, embedder)
            for fact in facts:
                self._conn.execute(
                    "DELETE FROM fact_episodes WHERE conv = ? AND fact = ?", (pk, fact.id)
                )
                self._conn.execute(
                    "INSERT OR REPLACE INTO facts (conv, id, content, session, tokens)"
                    " VALUES (?, ?, ?, ?, ?)",
                    fact_row(pk, fact),
                )
                self._conn.executemany(
                    "INSERT INTO fact_episodes (conv, fact, episode) VALUES (?, ?, ?)",
                    [(pk, fact.id, eid) for eid in dict.fromkeys(fact.episode_ids)],
                )
            self._put_vectors(pk, "fact", [f.id for f in facts], vectors)

    def delete_episodes(self, scope: Scope, ids: Sequence[str]) -> None:
        with self.transaction():
            pk = self._pk(scope)
            for eid in ids:
                self._conn.execute("DELETE FROM episodes WHERE conv = ? AND id = ?", (pk, eid))
                self._conn.execute(
                    "DELETE FROM vectors WHERE conv = ? AND space = 'episode' AND id = ?", (pk, eid)
                )
            orphans = "SELECT id FROM facts f WHERE conv = ? AND NOT EXISTS (SELECT 1 FROM "
            orphans += "fact_episodes l WHERE l.conv = f.conv AND l.fact = f.id)"
            self._conn.execute(
                f"DELETE FROM vectors WHERE conv = ? AND space = 'fact' AND id IN ({orphans})",
                (pk, pk),
            )
            self._conn.execute(f"DELETE FROM facts WHERE conv = ? AND id IN ({orphans})", (pk, pk))
            self._bump(pk)

    def facts(self, scope: Scope, ids: Sequence[str] | None = None) -> list[SemanticFact]:
        return select_records(
            self._load(scope, "facts", lambda pk: self._load_facts(pk, scope)), ids
        )

    def _load_facts(self, pk: int, scope: Scope) -> list[SemanticFact]:
        links: dict[str, list[str]] = {}
        for fact, episode in self._query(
            "SELECT fact, episode FROM fact_episodes WHERE conv = ? ORDER BY rowid", (pk,)
        ):
            links.setdefault(fact, []).append(episode)
        rows = sorted(
            self._query("SELECT id, content, session FROM facts WHERE conv = ?", (pk,)),
            key=lambda row: record_order(row[0]),
        )
        facts = [
            SemanticFact(rid, scope.conversation, content, session, tuple(links.get(rid, ())))
            for rid, content, session in rows
        ]
        return facts

    # ------------------------------------------------------------------ index rows
    def index_rows(self, scope: Scope, space: Space) -> IndexRows:
        return self._load(scope, f"{space} rows", lambda pk: self._load_rows(pk, space))

    def _load_rows(self, pk: int, space: Space) -> IndexRows:
        position = "r.position" if space == "turn" else "0"
        rows = self._query(
            f"SELECT r.id, r.tokens, v.vector, r.session, {position} FROM {_TABLES[space]} r "
            "JOIN vectors v ON v.conv = r.conv AND v.space = ? AND v.id = r.id WHERE r.conv = ?",
            (space, pk),
        )
        rows.sort(key=lambda row: ordering(space, row[0], row[3], row[4]))
        known = self.embedder()
        matrix = (
            np.vstack([np.frombuffer(row[2], dtype=np.float32) for row in rows])
            if rows
            else np.zeros((0, known[1] if known else 0), dtype=np.float32)
        )
        return IndexRows([r[0] for r in rows], [r[1].split() for r in rows], matrix)

    def vectors(self, scope: Scope, space: Space) -> tuple[list[str], np.ndarray]:
        rows = self.index_rows(scope, space)
        return list(rows.ids), rows.matrix

    # ------------------------------------------------------------------ state
    def get_state(self, scope: Scope, key: str) -> str | None:
        rows = self._query(
            "SELECT value FROM state WHERE conv = ? AND key = ?", (self._pk(scope), key)
        )
        return str(rows[0][0]) if rows else None

    def set_state(self, scope: Scope, key: str, value: str) -> None:
        with self.transaction():
            pk = self._pk(scope)
            self._conn.execute(
                "INSERT OR REPLACE INTO state (conv, key, value) VALUES (?, ?, ?)", (pk, key, value)
            )
