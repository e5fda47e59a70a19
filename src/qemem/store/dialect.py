"""What really differs between the SQL backends, as data: parameter placeholders, column types,
upsert syntax, where scope versions come from, write locks and the vector encoding.

The shared queries (:mod:`qemem.store.sql`) and the shared schema (:mod:`qemem.store.ddl`) are
written once, with ``?`` placeholders, and rendered through a :class:`Dialect`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Conflict = Literal["fail", "ignore"] | tuple[str, ...]
"""On a unique-key conflict: raise (``"fail"``), keep the stored row (``"ignore"``), or
replace the row whose key is these columns."""


@dataclass(frozen=True)
class Dialect:
    """One SQL backend's syntax and types."""

    name: str
    placeholder: str
    key_type: str
    """``conversations.pk``: an auto-numbered 64-bit key, never reused (not after the
    conversation with the highest key is deleted either)."""
    ref_type: str
    """Columns that refer to ``conversations.pk``."""
    vector_type: str
    version_column: str
    """``conversations.version``: a scope's version, drawn from a store-wide source."""
    versions_ddl: str
    """Creates that store-wide source of versions (never reused, not even after a delete)."""
    bump: tuple[str, ...]
    """Statements that give a conversation a new version (``?``, where present, is its pk)."""
    lock: str | None
    """Takes the write lock named ``?`` (a scope's ``namespace/conversation``, or an
    idempotency key's) for the transaction; None where a write transaction already excludes
    every other writer."""
    serialised_writes: bool
    """Whether a write transaction excludes all other writers from its start (SQLite). Where
    it does not (PostgreSQL: writers plan before they take the scope's lock), inserts of
    sessions and turns skip rows a racing writer stored first."""
    store_arg: str
    """What ``--store`` takes, for messages (``PATH`` or ``URL``)."""
    encode: Callable[[np.ndarray], object]
    """One float32 vector as the driver writes it into a ``vector_type`` column."""
    decode: Callable[[Any], np.ndarray]
    """A ``vector_type`` value read back, as a float32 vector."""

    def sql(self, text: str) -> str:
        """``text`` (written with ``?`` placeholders) in this dialect's placeholders."""
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    def insert(self, table: str, columns: Sequence[str], conflict: Conflict = "fail") -> str:
        """An INSERT of one row of ``columns`` (``?`` placeholders), with ``conflict``
        handling (see ``Conflict``)."""
        values = ", ".join("?" * len(columns))
        head = f"INTO {table} ({', '.join(columns)}) VALUES ({values})"
        if conflict == "fail":
            return f"INSERT {head}"
        if self.name == "sqlite":
            return f"INSERT OR {'IGNORE' if conflict == 'ignore' else 'REPLACE'} {head}"
        if conflict == "ignore":
            return f"INSERT {head} ON CONFLICT DO NOTHING"
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in conflict)
        return f"INSERT {head} ON CONFLICT ({', '.join(conflict)}) DO UPDATE SET {updates}"


def _float32(vector: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(vector, dtype=np.float32)


SQLITE = Dialect(
    name="sqlite",
    placeholder="?",
    key_type="INTEGER PRIMARY KEY AUTOINCREMENT",
    ref_type="INTEGER",
    vector_type="BLOB",
    version_column="INTEGER NOT NULL DEFAULT 0",
    versions_ddl="""
    CREATE TABLE version_counter (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        value INTEGER NOT NULL
    );
    INSERT INTO version_counter (id, value) VALUES (1, 0);
    """,
    bump=(
        "UPDATE version_counter SET value = value + 1 WHERE id = 1",
        "UPDATE conversations SET version = (SELECT value FROM version_counter WHERE id = 1)"
        " WHERE pk = ?",
    ),
    lock=None,
    serialised_writes=True,
    store_arg="PATH",
    encode=lambda v: _float32(v).tobytes(),
    decode=lambda blob: np.frombuffer(blob, dtype=np.float32),
)

POSTGRES = Dialect(
    name="postgresql",
    placeholder="%s",
    key_type="BIGSERIAL PRIMARY KEY",
    ref_type="BIGINT",
    vector_type="vector",
    version_column="BIGINT NOT NULL DEFAULT nextval('scope_versions')",
    versions_ddl="CREATE SEQUENCE scope_versions;",
    bump=("UPDATE conversations SET version = nextval('scope_versions') WHERE pk = ?",),
    lock="SELECT pg_advisory_xact_lock(hashtext(?))",
    serialised_writes=False,
    store_arg="URL",
    encode=_float32,  # pgvector's psycopg adapter writes numpy arrays
    decode=lambda value: value.to_numpy(),
)
