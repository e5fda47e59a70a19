"""Versioned schema migrations of the PostgreSQL store (table ``schema_version`` holds the
version). A new database gets the current schema of both backends (:func:`qemem.store.ddl.create`,
vectors as pgvector ``vector`` values) in one step; an older one takes each numbered step after
its own. Migrations run under an advisory lock, so several processes opening a new database at
once apply each step once."""

from __future__ import annotations

from typing import Any

from qemem.errors import StoreError
from qemem.store.ddl import (
    API_KEYS,
    IDEMPOTENCY,
    JOBS,
    JOBS_NOT_BEFORE,
    create,
    passages,
    supersessions,
)
from qemem.store.dialect import POSTGRES

MIGRATION_LOCK = 7_175_646_101  # advisory lock key of schema migrations
UPGRADES: dict[int, str] = {
    # 1 (the three spaces, provenance links, vectors, per-scope state and versions) is part
    # of create()
    2: API_KEYS,
    # 3: the column names of both backends (SQLite's, which are the records' field names)
    3: """
    ALTER TABLE turns RENAME COLUMN pos TO position;
    ALTER TABLE turns RENAME COLUMN ts TO timestamp;
    ALTER TABLE turns RENAME CONSTRAINT turns_conv_session_pos_key
        TO turns_conv_session_position_key;
    ALTER TABLE episodes RENAME COLUMN ts TO timestamp;
    """,
    # 4: responses of appends sent with an Idempotency-Key (retried id-less batches)
    4: IDEMPOTENCY,
    # 5: durable background jobs (qemem.store.jobs), visible to every process of the store
    5: JOBS,
    # 6: when a job may start (automatic builds wait for their conversation to be quiet)
    6: JOBS_NOT_BEFORE,
    # 7: supersessions of facts (a fact updated by a later episode, or corrected by hand)
    7: supersessions(POSTGRES),
    # 8 to 10: reserved for steps of other branches (issue 30); nothing to do here
    8: "SELECT 1",
    9: "SELECT 1",
    10: "SELECT 1",
    # 11: the passages of long turns (searched one by one; built by ingest and qemem reindex)
    11: passages(POSTGRES),
}
SCHEMA_VERSION = max(UPGRADES)


def migrate(conn: Any) -> int:
    """Apply every migration newer than the database's version on ``conn`` (a psycopg
    connection in autocommit mode); return the final version. A database written by a newer
    qemem is refused."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        if row is None:
            conn.execute("INSERT INTO schema_version (version) VALUES (0)")
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"this store has schema version {version}, newer than this qemem supports "
                f"({SCHEMA_VERSION}): upgrade qemem"
            )
        if version == 0:
            conn.execute(create(POSTGRES))
            version = SCHEMA_VERSION
        for number in range(version + 1, SCHEMA_VERSION + 1):
            conn.execute(UPGRADES[number])
        conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION,))
    return SCHEMA_VERSION


def has_schema(url: str, shown: str) -> bool:
    """Whether the PostgreSQL database at ``url`` holds a qemem store (its ``schema_version``
    table); reading only. ``shown`` is the URL as messages show it (password masked)."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    except psycopg.Error as exc:
        raise StoreError(f"cannot open store {shown}: {exc}") from None
    return bool(row and row[0])
