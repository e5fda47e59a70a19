"""Versioned schema migrations of the SQLite store (``PRAGMA user_version`` is the version).

A new file gets the current schema (:func:`qemem.store.ddl.create`) in one step; a file of an
older version takes each numbered step after its own, in order (foreign keys are not enforced
while a step runs, so a step may rebuild a table others refer to; they are checked before it
commits).
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
    agent_memory,
    conversations,
    corrections,
    create,
    fact_episodes,
    fill_corrections,
    id_counters,
    idempotency_conversation,
    items,
    passages,
    supersessions,
)
from qemem.store.dialect import SQLITE
from qemem.store.slashed import SLASHED_IDS, warn_slashed

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
    # 9: conversation lives. ``conversations`` is rebuilt with AUTOINCREMENT (a re-created
    # conversation never gets a deleted one's pk), ``created_at`` (the migration's time for
    # the conversations it finds) and ``removals``; the id counters start at the highest
    # number each id prefix has among the records the store holds
    9: conversations(SQLITE, "conversations_9")
    + """
    INSERT INTO conversations_9 (pk, namespace, id, speakers, version, created_at)
        SELECT pk, namespace, id, speakers, version,
            strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now') FROM conversations;
    DROP TABLE conversations;
    ALTER TABLE conversations_9 RENAME TO conversations;
    """
    + id_counters(SQLITE)
    + """
    INSERT INTO id_counters (conv, prefix, value)
        SELECT conv, prefix, max(CAST(number AS INTEGER)) FROM (
            SELECT conv,
                CASE WHEN id GLOB 'D*' THEN substr(id, 1, instr(id, ':'))
                    ELSE substr(id, 1, 1) END AS prefix,
                CASE WHEN id GLOB 'D*' THEN substr(id, instr(id, ':') + 1)
                    ELSE substr(id, 2) END AS number
            FROM (SELECT conv, id FROM turns UNION ALL SELECT conv, id FROM episodes
                UNION ALL SELECT conv, id FROM facts)
        )
        WHERE (prefix IN ('E', 'S') OR (prefix GLOB 'D[0-9]*:'
                AND substr(prefix, 2, length(prefix) - 2) NOT GLOB '*[^0-9]*'
                AND (prefix = 'D0:' OR prefix NOT GLOB 'D0*')))
            AND number GLOB '[1-9]*' AND number NOT GLOB '*[^0-9]*' AND length(number) <= 15
        GROUP BY conv, prefix;
    """,
    # 10: each recorded Idempotency-Key response names its conversation and goes with it
    10: idempotency_conversation(SQLITE),
    # 11: the provenance of facts corrected by hand (a correction outlives the fact it
    # corrected); filled from the manual supersessions and the facts without an episode
    11: corrections(SQLITE)
    + fill_corrections("json_group_array(turn)", "strftime('%Y-%m-%dT%H:%M:%S+00:00', 'now')"),
    # 13: memory for an assistant: the role of a message, the kind of a fact (instruction,
    # preference) and the messages a fact was read from directly
    13: agent_memory(SQLITE),
    # 14: the history items of agent frameworks (an Agents SDK session), per conversation
    14: items(SQLITE),
    # 15: the passages of long turns (searched one by one; built by ingest and qemem reindex)
    15: passages(SQLITE),
}
SLASH_RULE = 10
"""The first version of the rule that ids hold no ``/``: migrating a store from before it
lists the ids that break it (:mod:`qemem.store.slashed`)."""
SCHEMA_VERSION = max(UPGRADES)


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, where: str = "") -> int:
    """Bring the database to :data:`SCHEMA_VERSION`, one step per write transaction (so
    processes opening one file at once apply each step once); return the version. Crossing
    :data:`SLASH_RULE` logs the stored ids that break it (``where`` names the store).

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
    before = version
    enforced = int(conn.execute("PRAGMA foreign_keys").fetchone()[0])
    conn.execute("PRAGMA foreign_keys = OFF")  # (a no-op inside a transaction)
    try:
        while version < SCHEMA_VERSION:
            # the next numbered step: numbers are handed out ahead, so one may not exist yet
            target = SCHEMA_VERSION if version == 0 else min(v for v in UPGRADES if v > version)
            _step(conn, version, target)
            version = _version(conn)
    finally:
        conn.execute(f"PRAGMA foreign_keys = {enforced}")
    if 0 < before < SLASH_RULE:
        warn_slashed(conn.execute(SLASHED_IDS).fetchall(), where)
    return SCHEMA_VERSION


def _step(conn: sqlite3.Connection, version: int, target: int) -> None:
    """Apply the step from ``version`` to ``target`` in one write transaction, unless another
    process applied it meanwhile; a step that leaves a foreign key broken is rolled back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if _version(conn) == version:
            for statement in (create(SQLITE) if version == 0 else UPGRADES[target]).split(";"):
                if statement.strip():
                    conn.execute(statement)
            broken = conn.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise StoreError(
                    f"schema migration {target} would break references between tables "
                    f"({len(broken)} rows, e.g. in table {broken[0][0]}): the store was left "
                    "unchanged; report this with the store's schema version"
                )
            conn.execute(f"PRAGMA user_version = {target}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
