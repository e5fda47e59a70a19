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
    agent_memory,
    corrections,
    create,
    fill_corrections,
    id_counters,
    idempotency_conversation,
    items,
    passages,
    supersessions,
)
from qemem.store.dialect import POSTGRES
from qemem.store.slashed import SLASHED_IDS, warn_slashed

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
    # 8: conversation lives (``pk`` is a sequence's, never reused already): ``created_at``
    # (the migration's time for the conversations it finds) and ``removals``; the id
    # counters start at the highest number each id prefix has among the records stored
    8: """
    ALTER TABLE conversations ADD COLUMN created_at TEXT;
    UPDATE conversations SET created_at =
        to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"');
    ALTER TABLE conversations ALTER COLUMN created_at SET NOT NULL;
    ALTER TABLE conversations ADD COLUMN removals INTEGER NOT NULL DEFAULT 0;
    """
    + id_counters(POSTGRES)
    + """
    INSERT INTO id_counters (conv, prefix, value)
        SELECT conv, substring(id from '^(E|S|D(?:0|[1-9][0-9]*):)'),
            max(substring(id from '([0-9]+)$')::bigint)
        FROM (SELECT conv, id FROM turns UNION ALL SELECT conv, id FROM episodes
            UNION ALL SELECT conv, id FROM facts) records
        WHERE id ~ '^(E|S|D(0|[1-9][0-9]*):)[1-9][0-9]{0,14}$'
        GROUP BY 1, 2;
    """,
    # 9: each recorded Idempotency-Key response names its conversation and goes with it
    9: idempotency_conversation(POSTGRES),
    # 10: the provenance of facts corrected by hand (a correction outlives the fact it
    # corrected); filled from the manual supersessions and the facts without an episode
    10: corrections(POSTGRES)
    + fill_corrections(
        "json_agg(turn ORDER BY session, position)::text",
        "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS+00:00')",
    ),
    # 12: memory for an assistant: the role of a message, the kind of a fact (instruction,
    # preference) and the messages a fact was read from directly
    12: agent_memory(POSTGRES),
    # 13: the history items of agent frameworks (an Agents SDK session), per conversation
    13: items(POSTGRES),
    # 14: the passages of long turns (searched one by one; built by ingest and qemem reindex)
    14: passages(POSTGRES),
}
SLASH_RULE = 9
"""The first version of the rule that ids hold no ``/``: migrating a store from before it
lists the ids that break it (:mod:`qemem.store.slashed`)."""
SCHEMA_VERSION = max(UPGRADES)


def migrate(conn: Any, where: str = "") -> int:
    """Apply every migration newer than the database's version on ``conn`` (a psycopg
    connection in autocommit mode); return the final version. A database written by a newer
    qemem is refused. Crossing :data:`SLASH_RULE` logs the stored ids that break it
    (``where`` names the store)."""
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
        for number in sorted(n for n in UPGRADES if n > version):
            conn.execute(UPGRADES[number])
        conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION,))
        slashed = conn.execute(SLASHED_IDS).fetchall() if 0 < version < SLASH_RULE else []
    warn_slashed(slashed, where)
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
