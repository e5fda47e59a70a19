"""The SQL store both backends share: every query, loader and check, written once with ``?``
placeholders over the schema of :mod:`qemem.store.ddl`.

A backend subclass provides its :class:`~qemem.store.dialect.Dialect` and its connection
handling (``transaction``, ``close`` and four small hooks). Records and index rows are cached
per (scope, space) by the scope's version, so a write to one conversation, from this process
or another, reloads only that conversation.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar, cast

import numpy as np

from qemem.errors import EmbedderMismatchError, InputError
from qemem.models import Conversation, Episode, SemanticFact, Session, Space, Turn
from qemem.store import staged
from qemem.store.base import (
    IndexRows,
    Scope,
    Stored,
    VectorSpace,
    VersionedCache,
    ordering,
    record_order,
    select_records,
)
from qemem.store.dialect import Conflict, Dialect
from qemem.store.edits import ORPHANS, SQLEdits, drop_facts, searchable
from qemem.store.items import SQLItems
from qemem.store.jobs import JobTable
from qemem.store.lives import SQLLives, created_stamp
from qemem.store.passages import SQLPassages, turn_index
from qemem.store.rows import (
    EPISODE_COLUMNS,
    FACT_COLUMNS,
    FIRST_TURN,
    IN_CHUNK,
    LINK_COLUMNS,
    SESSION_COLUMNS,
    TABLES,
    TURN_COLUMNS,
    TURN_SELECT,
    episode_row,
    fact_row,
    link_rows,
    session_row,
    turn_of,
    turn_order,
    turn_row,
)

T = TypeVar("T")
_IDEMPOTENCY_COLUMNS = ("namespace", "key", "fingerprint", "response", "created", "conv")


class SQLStore(SQLEdits, SQLItems, SQLLives, SQLPassages, ABC):
    """A :class:`~qemem.store.base.MemoryStore` over SQL; subclasses connect it."""

    dialect: ClassVar[Dialect]
    path: str
    """Where the store is, for messages (a file path, or a URL without its password)."""

    def __init__(self) -> None:
        self._cache: VersionedCache[Any] = VersionedCache(size=256)
        self.jobs = JobTable(self.dialect, self.transaction, self._query, self._exec)
        """The store's background jobs (:mod:`qemem.store.jobs`)."""

    # ------------------------------------------------------------------ backend hooks
    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """All writes inside are committed together or not at all (nesting joins the outer)."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _in_transaction(self) -> bool:
        """Whether the calling thread is inside this store's write transaction."""

    @abstractmethod
    def _query(
        self, sql: str, params: Sequence[object] = (), *, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        """The rows of one statement (``binary``: vectors in the driver's binary format)."""

    @abstractmethod
    def _exec(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run one statement (inside a transaction); the number of rows it changed."""

    @abstractmethod
    def _write(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run one statement per row (inside a transaction)."""

    def _forgotten(self) -> None:
        """Told inside a transaction that deleted or overwrote user text: a backend whose files
        keep old copies of rows until some step (SQLite's write-ahead log) takes that step
        once the transaction commits. PostgreSQL keeps dead rows until VACUUM (see
        docs/reliability.md): nothing to do here."""

    # ------------------------------------------------------------------ scopes and versions
    def _insert(self, table: str, columns: Sequence[str], conflict: Conflict = "fail") -> str:
        return self.dialect.insert(table, columns, conflict)

    def _racing(self) -> Conflict:
        """How sessions and turns are inserted: see ``Dialect.serialised_writes``."""
        return "fail" if self.dialect.serialised_writes else "ignore"

    def _row(self, scope: Scope) -> tuple[int, int]:
        """(pk, version) of the scope's conversation (see :meth:`SQLLives._life`)."""
        pk, version, _ = self._life(scope)
        return pk, version

    def _pk(self, scope: Scope) -> int:
        return self._row(scope)[0]

    def lock_scope(self, scope: Scope) -> None:
        if self.dialect.lock is not None:
            self._exec(self.dialect.lock, (f"{scope.namespace}/{scope.conversation}",))

    def _locked_pk(self, scope: Scope) -> int:
        """The scope's pk, holding its write lock for the transaction (writers of one
        conversation take turns)."""
        self.lock_scope(scope)
        return self._pk(scope)

    def _bump(self, pk: int) -> None:
        """Give the conversation a new version (inside a transaction)."""
        for statement in self.dialect.bump:
            self._exec(statement, (pk,) if "?" in statement else ())

    def _writing(self, scope: Scope) -> int:
        """The scope's pk, locked and given a new version: the start of every record write."""
        pk = self._locked_pk(scope)
        self._bump(pk)
        return pk

    def version(self, scope: Scope) -> int | None:
        version = self._row(scope)[1]
        return None if self._in_transaction() else version

    def _load(self, scope: Scope, what: str, load: Callable[[int], T]) -> T:
        """``load(pk)``'s value for the scope, cached by the scope's version."""
        pk, version = self._row(scope)
        if self._in_transaction():
            return load(pk)
        return cast(T, self._cache.get((scope, what), version, lambda: load(pk)))

    def ping(self) -> None:
        self._query("SELECT 1 FROM conversations LIMIT 1")

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
        speakers, created = self._query(
            "SELECT speakers, created_at FROM conversations WHERE pk = ?", (pk,)
        )[0]
        sessions = tuple(
            Session(int(idx), datetime.fromisoformat(dt), key)
            for idx, dt, key in self._query(
                "SELECT idx, date_time, key FROM sessions WHERE conv = ? ORDER BY idx", (pk,)
            )
        )
        return Conversation(
            scope.conversation,
            tuple(json.loads(speakers)),
            sessions,
            scope.namespace,
            datetime.fromisoformat(created),
        )

    def put_conversation(self, scope: Scope, speakers: Sequence[str]) -> None:
        with self.transaction():
            columns = ("namespace", "id", "speakers", "created_at")
            created = self._exec(
                self._insert("conversations", columns, "ignore"),
                (scope.namespace, scope.conversation, json.dumps(list(speakers)), created_stamp()),
            )
            pk = self._locked_pk(scope)
            known = json.loads(
                self._query("SELECT speakers FROM conversations WHERE pk = ?", (pk,))[0][0]
            )
            merged = known + [s for s in speakers if s not in known]
            if merged != known:
                self._exec(
                    "UPDATE conversations SET speakers = ? WHERE pk = ?", (json.dumps(merged), pk)
                )
            if created or merged != known:
                self._bump(pk)

    def add_sessions(self, scope: Scope, sessions: Sequence[Session]) -> None:
        with self.transaction():
            pk = self._writing(scope)
            self._write(
                self._insert("sessions", SESSION_COLUMNS, self._racing()),
                [session_row(pk, s) for s in sessions],
            )

    def delete_conversation(self, scope: Scope) -> bool:
        """Delete the conversation (its rows cascade) and cancel its queued and running jobs,
        under the scope's write lock (a writer of the conversation finishes first, or finds it
        gone)."""
        with self.transaction():
            self.lock_scope(scope)
            self.jobs.cancel_conversation(scope.namespace, scope.conversation)
            self._forgotten()
            return (
                self._exec(
                    "DELETE FROM conversations WHERE namespace = ? AND id = ?",
                    (scope.namespace, scope.conversation),
                )
                > 0
            )

    # ------------------------------------------------------------------ embedder bookkeeping
    def embedder(self) -> tuple[str, int] | None:
        rows = self._query("SELECT value FROM meta WHERE key = 'embedder'")
        if not rows:
            return None
        info = json.loads(rows[0][0])
        return str(info["id"]), int(info["dim"])

    def _check_vectors(self, count: int, vectors: np.ndarray, embedder: str) -> None:
        """Refuse vectors that are not one row per record, or not of the store's embedder
        (the first vectors written name it)."""
        if vectors.ndim != 2 or vectors.shape[0] != count:
            raise InputError(f"expected {count} vectors, got an array of shape {vectors.shape}")
        dim = int(vectors.shape[1])
        self._exec(
            self._insert("meta", ("key", "value"), "ignore"),
            ("embedder", json.dumps({"id": embedder, "dim": dim})),
        )
        known = self.embedder()
        if known != (embedder, dim):
            name, size = known or (None, 0)
            raise EmbedderMismatchError(
                f"store {self.path} holds vectors of embedder {name!r} ({size}-d); "
                f"refusing to mix in {embedder!r} ({dim}-d). Open it with the same embedder "
                "(QEMEM_EMBEDDER) or ingest into a new store"
            )

    def _put_vectors(self, pk: int, space: str, ids: Sequence[str], vectors: np.ndarray) -> None:
        columns = ("conv", "space", "id", "vector")
        self._write(
            self._insert("vectors", columns, ("conv", "space", "id")),
            [(pk, space, rid, self.dialect.encode(v)) for rid, v in zip(ids, vectors, strict=True)],
        )

    @contextmanager
    def _records(
        self, scope: Scope, space: Space, ids: Sequence[str], vectors: np.ndarray, embedder: str
    ) -> Iterator[int]:
        """A write of records ``ids`` of ``space`` (the block writes their rows, given the
        scope's pk) with their vectors, in one transaction."""
        with self.transaction():
            pk = self._writing(scope)
            self._check_vectors(len(ids), vectors, embedder)
            yield pk
            self._put_vectors(pk, space, ids, vectors)

    # ------------------------------------------------------------------ records
    def add_turns(
        self, scope: Scope, turns: Sequence[Turn], vectors: np.ndarray, embedder: str
    ) -> None:
        with self._records(scope, "turn", [t.id for t in turns], vectors, embedder) as pk:
            self._raise_counters(pk, [t.id for t in turns])
            self._write(
                self._insert("turns", TURN_COLUMNS, self._racing()),
                [turn_row(pk, t) for t in turns],
            )

    def turns(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Turn]:
        return select_records(
            self._load(scope, "turns", lambda pk: self._load_turns(pk, scope)), ids
        )

    def _load_turns(self, pk: int, scope: Scope) -> Stored[Turn]:
        rows = self._query(f"{TURN_SELECT} WHERE conv = ? ORDER BY session, position", (pk,))
        return Stored(turn_of(scope.conversation, row) for row in rows)

    def turns_of(
        self, scope: Scope, *, sessions: Collection[int] = (), ids: Collection[str] = ()
    ) -> list[Turn]:
        pk, _ = self._row(scope)
        rows: dict[str, tuple[Any, ...]] = {}
        for column, values in (("session", sorted(set(sessions))), ("id", sorted(set(ids)))):
            for start in range(0, len(values), IN_CHUNK):
                chunk = values[start : start + IN_CHUNK]
                marks = ", ".join("?" * len(chunk))
                sql = f"{TURN_SELECT} WHERE conv = ? AND {column} IN ({marks})"
                rows.update((row[0], row) for row in self._query(sql, (pk, *chunk)))
        return sorted((turn_of(scope.conversation, row) for row in rows.values()), key=turn_order)

    def add_episodes(
        self, scope: Scope, episodes: Sequence[Episode], vectors: np.ndarray, embedder: str
    ) -> None:
        ids = [e.id for e in episodes]
        with self._records(scope, "episode", ids, vectors, embedder) as pk:
            self._raise_counters(pk, ids)
            self._write(
                self._insert("episodes", EPISODE_COLUMNS), [episode_row(pk, e) for e in episodes]
            )
            self._write(
                self._insert("episode_turns", LINK_COLUMNS["episode_turns"]),
                [row for e in episodes for row in link_rows(pk, e.id, e.turn_ids)],
            )

    def episodes(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Episode]:
        return select_records(
            self._load(scope, "episodes", lambda pk: self._load_episodes(pk, scope)), ids
        )

    def _links(self, table: str, pk: int) -> dict[str, tuple[str, ...]]:
        """Each owner's link targets in ``table``, in their order."""
        owner, target = LINK_COLUMNS[table][1:3]
        links: dict[str, list[str]] = {}
        for key, value in self._query(
            f"SELECT {owner}, {target} FROM {table} WHERE conv = ? ORDER BY {owner}, ord", (pk,)
        ):
            links.setdefault(key, []).append(value)
        return {key: tuple(values) for key, values in links.items()}

    def _load_episodes(self, pk: int, scope: Scope) -> Stored[Episode]:
        links = self._links("episode_turns", pk)
        rows = sorted(
            self._query(
                f"SELECT id, session, title, content, timestamp, {FIRST_TURN} FROM episodes r "
                "WHERE conv = ?",
                (pk,),
            ),
            key=lambda row: ordering("episode", row[0], row[1], row[5]),
        )
        return Stored(
            Episode(
                rid,
                scope.conversation,
                session,
                title,
                content,
                datetime.fromisoformat(ts),
                links.get(rid, ()),
            )
            for rid, session, title, content, ts, _ in rows
        )

    def put_facts(
        self, scope: Scope, facts: Sequence[SemanticFact], vectors: np.ndarray, embedder: str
    ) -> None:
        with self._records(scope, "fact", [f.id for f in facts], vectors, embedder) as pk:
            latest = {f.id: f for f in facts}  # a fact given twice: the last one holds
            self._raise_counters(pk, latest)
            for table in ("fact_episodes", "fact_turns"):
                self._write(
                    f"DELETE FROM {table} WHERE conv = ? AND fact = ?", [(pk, i) for i in latest]
                )
            self._write(
                self._insert("facts", FACT_COLUMNS, ("conv", "id")),
                [fact_row(pk, f) for f in facts],
            )
            for table, targets in (("fact_episodes", "episode_ids"), ("fact_turns", "turn_ids")):
                self._write(
                    self._insert(table, LINK_COLUMNS[table]),
                    [
                        row
                        for f in latest.values()
                        for row in link_rows(pk, f.id, dict.fromkeys(getattr(f, targets)))
                    ],
                )

    def delete_episodes(self, scope: Scope, ids: Sequence[str]) -> None:
        with self.transaction():
            pk = self._writing(scope)
            self._write("DELETE FROM episodes WHERE conv = ? AND id = ?", [(pk, i) for i in ids])
            self._write(
                "DELETE FROM vectors WHERE conv = ? AND space = 'episode' AND id = ?",
                [(pk, i) for i in ids],
            )
            drop_facts(self, pk, [r[0] for r in self._query(ORPHANS, (pk, pk))])

    def facts(self, scope: Scope, ids: Sequence[str] | None = None) -> list[SemanticFact]:
        return select_records(
            self._load(scope, "facts", lambda pk: self._load_facts(pk, scope)), ids
        )

    def _load_facts(self, pk: int, scope: Scope) -> Stored[SemanticFact]:
        links = self._links("fact_episodes", pk)
        read = self._links("fact_turns", pk)
        rows = sorted(
            self._query("SELECT id, content, session, kind FROM facts WHERE conv = ?", (pk,)),
            key=lambda row: record_order(row[0]),
        )
        return Stored(
            SemanticFact(
                rid,
                scope.conversation,
                content,
                session,
                links.get(rid, ()),
                kind=kind,
                turn_ids=read.get(rid, ()),
            )
            for rid, content, session, kind in rows
        )

    # ------------------------------------------------------------------ index rows
    def index_rows(self, scope: Scope, space: Space) -> IndexRows:
        return self._load(scope, f"{space} rows", lambda pk: self._load_rows(pk, space))

    def _load_rows(self, pk: int, space: Space) -> IndexRows:
        """The index rows of ``space`` search finds; the turn space's are its turns without
        passages and the passages of the others (:mod:`qemem.store.passages`), in text order."""
        if space == "turn":
            rows = self._query(turn_index(searchable(space)), (pk, pk), binary=True)
            rows.sort(key=lambda row: (row[3], row[4], row[5]))
        else:
            position = FIRST_TURN if space == "episode" else "0"
            rows = self._query(
                f"SELECT r.id, r.tokens, v.vector, r.session, {position} FROM {TABLES[space]} r "
                "JOIN vectors v ON v.conv = r.conv AND v.space = ? AND v.id = r.id "
                "WHERE r.conv = ?" + searchable(space),
                (space, pk),
                binary=True,
            )
            rows.sort(key=lambda row: ordering(space, row[0], row[3], row[4]))
        if rows:
            matrix = np.vstack([self.dialect.decode(row[2]) for row in rows])
        else:
            known = self.embedder()
            matrix = np.zeros((0, known[1] if known else 0), dtype=np.float32)
        ids, tokens = [r[0] for r in rows], [r[1].split() for r in rows]
        return IndexRows(ids, tokens, matrix.astype(np.float32, copy=False))

    def vectors(self, scope: Scope, space: Space) -> tuple[list[str], np.ndarray]:
        rows = self.index_rows(scope, space)
        return list(rows.ids), rows.matrix

    # ------------------------------------------------------------------ re-embedding
    def reembed_target(self) -> tuple[str, int] | None:
        return staged.target(self)

    def begin_reembed(self, embedder: str, dim: int) -> bool:
        return staged.begin(self, embedder, dim)

    def unstaged(self, scope: Scope, space: VectorSpace) -> list[str]:
        return staged.missing(self, scope, space)

    def stage_vectors(
        self, scope: Scope, space: VectorSpace, ids: Sequence[str], vectors: np.ndarray
    ) -> None:
        staged.stage(self, scope, space, ids, vectors)

    def swap_staged(self) -> None:
        staged.swap(self)

    # ------------------------------------------------------------------ state
    def get_state(self, scope: Scope, key: str) -> str | None:
        rows = self._query(
            "SELECT value FROM state WHERE conv = ? AND key = ?", (self._pk(scope), key)
        )
        return str(rows[0][0]) if rows else None

    def set_state(self, scope: Scope, key: str, value: str) -> None:
        with self.transaction():
            self._exec(
                self._insert("state", ("conv", "key", "value"), ("conv", "key")),
                (self._pk(scope), key, value),
            )

    # ------------------------------------------------------------------ idempotency keys
    def recorded_response(
        self, namespace: str, key: str, retention: timedelta
    ) -> tuple[str, str] | None:
        """(request fingerprint, response JSON) recorded under ``key`` in ``namespace`` less
        than ``retention`` ago, else None. Inside a transaction the key stays held until the
        transaction ends, so a concurrent request with the same key waits, then reads this
        one's response (SQLite: the write transaction excludes other writers; PostgreSQL: the
        key's advisory lock)."""
        if self.dialect.lock is not None and self._in_transaction():
            self._exec(self.dialect.lock, (f"idempotency:{namespace}/{key}",))
        rows = self._query(
            "SELECT fingerprint, response FROM idempotency "
            "WHERE namespace = ? AND key = ? AND created >= ?",
            (namespace, key, _stamp(datetime.now(UTC) - retention)),
        )
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def record_response(
        self, scope: Scope, key: str, fingerprint: str, response: str, retention: timedelta
    ) -> None:
        """Record the response of a request sent with ``key`` that appended to ``scope``
        (join the transaction that made it, so both are committed together; the record is
        deleted with the conversation); records older than ``retention`` are purged."""
        with self.transaction():
            now = datetime.now(UTC)
            self._exec("DELETE FROM idempotency WHERE created < ?", (_stamp(now - retention),))
            self._exec(
                self._insert("idempotency", _IDEMPOTENCY_COLUMNS),
                (scope.namespace, key, fingerprint, response, _stamp(now), self._pk(scope)),
            )


def _stamp(moment: datetime) -> str:
    """A UTC instant as fixed-width ISO 8601 text (such stamps sort as they compare)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")
