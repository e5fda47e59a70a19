"""Versioned schema migrations of the SQLite store (``PRAGMA user_version`` is the version)."""

from __future__ import annotations

import sqlite3

from qemem.errors import StoreError

MIGRATIONS: tuple[str, ...] = (
    # 1: the three spaces, provenance links, vectors and per-scope state
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE conversations (
        pk INTEGER PRIMARY KEY,
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        speakers TEXT NOT NULL,
        UNIQUE (namespace, id)
    );
    CREATE TABLE sessions (
        conv INTEGER NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        key TEXT NOT NULL,
        date_time TEXT NOT NULL,
        PRIMARY KEY (conv, idx),
        UNIQUE (conv, key)
    );
    CREATE TABLE turns (
        conv INTEGER NOT NULL,
        id TEXT NOT NULL,
        session INTEGER NOT NULL,
        position INTEGER NOT NULL,
        speaker TEXT NOT NULL,
        text TEXT NOT NULL,
        timestamp TEXT NOT NULL,
        tokens TEXT NOT NULL,
        PRIMARY KEY (conv, id),
        UNIQUE (conv, session, position),
        FOREIGN KEY (conv, session) REFERENCES sessions(conv, idx) ON DELETE CASCADE
    );
    CREATE TABLE episodes (
        conv INTEGER NOT NULL,
        id TEXT NOT NULL,
        session INTEGER NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        timestamp TEXT NOT NULL,
        tokens TEXT NOT NULL,
        PRIMARY KEY (conv, id),
        FOREIGN KEY (conv, session) REFERENCES sessions(conv, idx) ON DELETE CASCADE
    );
    CREATE TABLE episode_turns (
        conv INTEGER NOT NULL,
        episode TEXT NOT NULL,
        turn TEXT NOT NULL,
        ord INTEGER NOT NULL,
        PRIMARY KEY (conv, episode, ord),
        FOREIGN KEY (conv, episode) REFERENCES episodes(conv, id) ON DELETE CASCADE,
        FOREIGN KEY (conv, turn) REFERENCES turns(conv, id) ON DELETE CASCADE
    );
    CREATE INDEX episode_turns_by_turn ON episode_turns (conv, turn);
    CREATE TABLE facts (
        conv INTEGER NOT NULL,
        id TEXT NOT NULL,
        content TEXT NOT NULL,
        session INTEGER NOT NULL,
        tokens TEXT NOT NULL,
        PRIMARY KEY (conv, id),
        FOREIGN KEY (conv, session) REFERENCES sessions(conv, idx) ON DELETE CASCADE
    );
    CREATE TABLE fact_episodes (
        conv INTEGER NOT NULL,
        fact TEXT NOT NULL,
        episode TEXT NOT NULL,
        PRIMARY KEY (conv, fact, episode),
        FOREIGN KEY (conv, fact) REFERENCES facts(conv, id) ON DELETE CASCADE,
        FOREIGN KEY (conv, episode) REFERENCES episodes(conv, id) ON DELETE CASCADE
    );
    CREATE INDEX fact_episodes_by_episode ON fact_episodes (conv, episode);
    CREATE TABLE vectors (
        conv INTEGER NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
        space TEXT NOT NULL,
        id TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (conv, space, id)
    );
    CREATE TABLE state (
        conv INTEGER NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
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
    # 2: per-scope versions (search indexes are cached per scope, by version), drawn from a
    # store-wide counter so that a version is never reused, not even by a re-created scope
    """
    ALTER TABLE conversations ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE version_counter (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        value INTEGER NOT NULL
    );
    INSERT INTO version_counter (id, value) VALUES (1, 0);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than the database's version; return the final version.

    A database written by a newer qemem (a higher version than this code knows) is refused.
    """
    conn.execute("BEGIN")  # one snapshot: another process may be creating the store now
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
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
    for number in range(version, SCHEMA_VERSION):
        try:
            conn.executescript(
                f"BEGIN IMMEDIATE; {MIGRATIONS[number]} PRAGMA user_version = {number + 1}; COMMIT;"
            )
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) > number:
                continue  # another process applied this migration meanwhile
            raise
    return SCHEMA_VERSION
