"""Versioned schema migrations of the SQLite store (``PRAGMA user_version`` is the version).

A new file gets the current schema (:func:`qemem.store.ddl.create`) in one step; a file of an
older version takes each numbered step after its own, in order.
"""

from __future__ import annotations

import sqlite3

from qemem.errors import StoreError
from qemem.store.ddl import (
    API_KEYS,
    FACT_EPISODES_INDEX,
    IDEMPOTENCY,
    JOBS,
    JOBS_NOT_BEFORE,
    create,
    fact_episodes,
    passages,
    supersessions,
)
from qemem.store.dialect import SQLITE

UPGRADES: dict[int, str] = {
    # 1 (the three spaces, provenance links, vectors and per-scope state) is part of create()
    2: API_KEYS,
    # 3: per-scope versions (search indexes are cached per scope, by version), drawn from a
    # store-wide counter so that a version is never reused, not even by a re-created scope
    3: "ALTER TABLE conversations ADD COLUMN version INTEGER NOT NULL DEFAULT 0;"
    + SQLITE.versions_ddl,
    # 4: the schema of both backends: a fact's episodes keep their order in ``ord`` (it was
    # the rowid order); the table is rebuilt so that it equals a new store's
    4: fact_episodes(SQLITE, "fact_episodes_4")
    + """
    INSERT INTO fact_episodes_4 (conv, fact, episode, ord)
        SELECT conv, fact, episode, (SELECT count(*) FROM fact_episodes o WHERE o.conv = l.conv
            AND o.fact = l.fact AND o.rowid < l.rowid)
        FROM fact_episodes l ORDER BY rowid;
    DROP TABLE fact_episodes;
    ALTER TABLE fact_episodes_4 RENAME TO fact_episodes;
    """
    + FACT_EPISODES_INDEX,
    # 5: responses of appends sent with an Idempotency-Key (retried id-less batches)
    5: IDEMPOTENCY,
    # 6: durable background jobs (qemem.store.jobs), visible to every process of the store
    6: JOBS,
    # 7: when a job may start (automatic builds wait for their conversation to be quiet)
    7: JOBS_NOT_BEFORE,
    # 8: supersessions of facts (a fact updated by a later episode, or corrected by hand)
    8: supersessions(SQLITE),
    # 9 to 11: reserved for steps of other branches (issue 30); nothing to do here
    9: "SELECT 1",
    10: "SELECT 1",
    11: "SELECT 1",
    # 12: the passages of long turns (searched one by one; built by ingest and qemem reindex)
    12: passages(SQLITE),
}
SCHEMA_VERSION = max(UPGRADES)


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to :data:`SCHEMA_VERSION`, one step per write transaction (so
    processes opening one file at once apply each step once); return the version.

    A database written by a newer qemem (a higher version than this code knows), or one that
    holds tables of its own, is refused.
    """
    conn.execute("BEGIN")  # one snapshot: another process may be creating the store now
    version = _version(conn)
    tables = int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    conn.execute("COMMIT")
    if version == 0 and tables:
        raise StoreError(
            "this SQLite database is not a qemem store (it already holds other tables): "
            "give qemem a new file"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"this store has schema version {version}, newer than this qemem supports "
            f"({SCHEMA_VERSION}): upgrade qemem"
        )
    while version < SCHEMA_VERSION:
        target = SCHEMA_VERSION if version == 0 else version + 1
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _version(conn) == version:  # else another process applied this step meanwhile
                for statement in (create(SQLITE) if version == 0 else UPGRADES[target]).split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {target}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        version = _version(conn)
    return SCHEMA_VERSION
