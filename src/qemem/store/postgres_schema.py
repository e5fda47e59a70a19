"""Versioned schema migrations of the PostgreSQL store (table ``schema_version`` holds the
version). The concepts and names follow the SQLite schema (:mod:`qemem.store.schema`); vectors
are pgvector ``vector`` values. Migrations run under an advisory lock, so several processes
opening a new database at once apply each migration once."""

from __future__ import annotations

from typing import Any

from qemem.errors import StoreError

MIGRATION_LOCK = 7_175_646_101  # advisory lock key of schema migrations
MIGRATIONS: tuple[str, ...] = (
    # 1: the three spaces, provenance links, vectors, per-scope state and versions
    """
    CREATE SEQUENCE scope_versions;
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE conversations (
        pk BIGSERIAL PRIMARY KEY,
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        speakers TEXT NOT NULL,
        version BIGINT NOT NULL DEFAULT nextval('scope_versions'),
        UNIQUE (namespace, id)
    );
    CREATE TABLE sessions (
        conv BIGINT NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        key TEXT NOT NULL,
        date_time TEXT NOT NULL,
        PRIMARY KEY (conv, idx),
        UNIQUE (conv, key)
    );
    CREATE TABLE turns (
        conv BIGINT NOT NULL,
        id TEXT NOT NULL,
        session INTEGER NOT NULL,
        pos INTEGER NOT NULL,
        speaker TEXT NOT NULL,
        text TEXT NOT NULL,
        ts TEXT NOT NULL,
        tokens TEXT NOT NULL,
        PRIMARY KEY (conv, id),
        UNIQUE (conv, session, pos),
        FOREIGN KEY (conv, session) REFERENCES sessions(conv, idx) ON DELETE CASCADE
    );
    CREATE TABLE episodes (
        conv BIGINT NOT NULL,
        id TEXT NOT NULL,
        session INTEGER NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        ts TEXT NOT NULL,
        tokens TEXT NOT NULL,
        PRIMARY KEY (conv, id),
        FOREIGN KEY (conv, session) REFERENCES sessions(conv, idx) ON DELETE CASCADE
    );
    CREATE TABLE episode_turns (
        conv BIGINT NOT NULL,
        episode TEXT NOT NULL,
        turn TEXT NOT NULL,
        ord INTEGER NOT NULL,
        PRIMARY KEY (conv, episode, ord),
        FOREIGN KEY (conv, episode) REFERENCES episodes(conv, id) ON DELETE CASCADE,
        FOREIGN KEY (conv, turn) REFERENCES turns(conv, id) ON DELETE CASCADE
    );
    CREATE INDEX episode_turns_by_turn ON episode_turns (conv, turn);
    CREATE TABLE facts (
        conv BIGINT NOT NULL,
        id TEXT NOT NULL,
        content TEXT NOT NULL,
        session INTEGER NOT NULL,
        tokens TEXT NOT NULL,
        PRIMARY KEY (conv, id),
        FOREIGN KEY (conv, session) REFERENCES sessions(conv, idx) ON DELETE CASCADE
    );
    CREATE TABLE fact_episodes (
        conv BIGINT NOT NULL,
        fact TEXT NOT NULL,
        episode TEXT NOT NULL,
        ord INTEGER NOT NULL,
        PRIMARY KEY (conv, fact, episode),
        FOREIGN KEY (conv, fact) REFERENCES facts(conv, id) ON DELETE CASCADE,
        FOREIGN KEY (conv, episode) REFERENCES episodes(conv, id) ON DELETE CASCADE
    );
    CREATE INDEX fact_episodes_by_episode ON fact_episodes (conv, episode);
    CREATE TABLE vectors (
        conv BIGINT NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
        space TEXT NOT NULL,
        id TEXT NOT NULL,
        vector vector NOT NULL,
        PRIMARY KEY (conv, space, id)
    );
    CREATE TABLE state (
        conv BIGINT NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (conv, key)
    );
    """,
    # 2: API keys of the HTTP service (qemem.keys): a salted hash per key, never the key
    """
    CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        label TEXT NOT NULL,
        read_only INTEGER NOT NULL,
        salt TEXT NOT NULL,
        hash TEXT NOT NULL,
        created TEXT NOT NULL,
        revoked TEXT
    );
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


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
        for number in range(version, SCHEMA_VERSION):
            conn.execute(MIGRATIONS[number])
            conn.execute("UPDATE schema_version SET version = %s", (number + 1,))
    return SCHEMA_VERSION
