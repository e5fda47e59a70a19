"""A store as qemem wrote it before the two backends shared one schema (SQLite schema 3,
PostgreSQL schema 2): those migrations verbatim, and a few rows of every table written as that
code wrote them. The migration tests open such a store with the current code."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import numpy as np

SQLITE_MIGRATIONS: tuple[str, ...] = (
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

POSTGRES_MIGRATIONS: tuple[str, ...] = (
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

DIM = 4
EMBEDDER = {"id": "hash-4", "dim": DIM}
CONVERSATIONS = [("default", "legacy-1", ["Ana", "Ben"]), ("team", "legacy-2", ["Cy"])]
SESSIONS = [(1, "s1", "2024-05-01T10:00:00"), (2, "2", "2024-05-08T09:30:00+02:00")]
TURNS = [  # id, session, position, speaker, text, timestamp, tokens
    ("D1:1", 1, 0, "Ana", "I adopted a cat named Miso.", "2024-05-01T10:00:00", "adopt cat miso"),
    ("D1:2", 1, 1, "Ben", "Lovely! How old is Miso?", "2024-05-01T10:01:00", "love old miso"),
    ("D2:1", 2, 0, "Ana", "Miso broke a vase.", "2024-05-08T09:30:00+02:00", "miso broke vase"),
]
EPISODES = [  # id, session, title, content, timestamp, tokens, turn ids in order
    ("E10", 2, "Vase", "Miso broke a vase.", "2024-05-08T09:30:00+02:00", "vase miso", ["D2:1"]),
    ("E2", 1, "Cat", "Ana adopted Miso.", "2024-05-01T10:00:00", "cat ana miso", ["D1:2", "D1:1"]),
]
FACTS = [  # id, content, session, tokens, episode ids in order
    ("S2", "Miso is clumsy.", 2, "miso clumsy", ["E10"]),
    ("S1", "Ana has a cat, Miso.", 1, "ana cat miso", ["E10", "E2"]),
]
STATE = ("build.progress", "3")
API_KEY = ("k1", "team", "ci", 1, "00" * 16, "ab" * 32, "2024-05-01T00:00:00", None)


def vector(n: int) -> np.ndarray:
    """The ``n``-th stored vector (exact in float32)."""
    return np.array([n / 8, 1 - n / 8, 0.5, -0.25], dtype=np.float32)


def vector_rows() -> list[tuple[str, str, np.ndarray]]:
    """(space, id, vector) of every record of ``legacy-1``."""
    ids = [("turn", t[0]) for t in TURNS] + [("episode", e[0]) for e in EPISODES]
    ids += [("fact", f[0]) for f in FACTS]
    return [(space, rid, vector(n)) for n, (space, rid) in enumerate(ids)]


def create_sqlite(path: str, version: int = len(SQLITE_MIGRATIONS)) -> None:
    """An empty SQLite store at schema ``version``, migrated as that code did."""
    conn = sqlite3.connect(path, isolation_level=None)
    for number, script in enumerate(SQLITE_MIGRATIONS[:version], 1):
        conn.executescript(f"BEGIN IMMEDIATE; {script} PRAGMA user_version = {number}; COMMIT;")
    conn.close()


def fill_sqlite(path: str) -> None:
    """The rows of this module in a SQLite store of schema 3, as that code wrote them."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("INSERT INTO meta VALUES ('embedder', ?)", (json.dumps(EMBEDDER),))
    for pk, (ns, cid, speakers) in enumerate(CONVERSATIONS, 1):
        conn.execute(
            "INSERT INTO conversations (pk, namespace, id, speakers, version) "
            "VALUES (?, ?, ?, ?, ?)",
            (pk, ns, cid, json.dumps(speakers), 4 + pk),
        )
    conn.execute("UPDATE version_counter SET value = 7")
    conn.executemany("INSERT INTO sessions VALUES (1, ?, ?, ?)", SESSIONS)
    conn.executemany(
        "INSERT INTO turns (conv, id, session, position, speaker, text, timestamp, tokens) "
        "VALUES (1, ?, ?, ?, ?, ?, ?, ?)",
        TURNS,
    )
    for rid, session, title, content, ts, tokens, turns in EPISODES:
        conn.execute(
            "INSERT INTO episodes VALUES (1, ?, ?, ?, ?, ?, ?)",
            (rid, session, title, content, ts, tokens),
        )
        conn.executemany(
            "INSERT INTO episode_turns VALUES (1, ?, ?, ?)",
            [(rid, turn, n) for n, turn in enumerate(turns)],
        )
    for rid, content, session, tokens, episodes in FACTS:
        conn.execute("INSERT INTO facts VALUES (1, ?, ?, ?, ?)", (rid, content, session, tokens))
        conn.executemany(
            "INSERT INTO fact_episodes (conv, fact, episode) VALUES (1, ?, ?)",
            [(rid, episode) for episode in episodes],
        )
    conn.executemany(
        "INSERT INTO vectors VALUES (1, ?, ?, ?)",
        [(space, rid, v.tobytes()) for space, rid, v in vector_rows()],
    )
    conn.execute("INSERT INTO state VALUES (1, ?, ?)", STATE)
    conn.execute("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)", API_KEY)
    conn.close()


def create_postgres(url: str, version: int = len(POSTGRES_MIGRATIONS)) -> None:
    """An empty PostgreSQL store at schema ``version``, migrated as that code did."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        for script in POSTGRES_MIGRATIONS[:version]:
            conn.execute(script)


def fill_postgres(url: str) -> None:
    """The rows of this module in a PostgreSQL store of schema 2, as that code wrote them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        run: Any = conn.execute
        run("INSERT INTO meta VALUES ('embedder', %s)", (json.dumps(EMBEDDER),))
        for ns, cid, speakers in CONVERSATIONS:
            run(
                "INSERT INTO conversations (namespace, id, speakers) VALUES (%s, %s, %s)",
                (ns, cid, json.dumps(speakers)),
            )
        pk = run("SELECT pk FROM conversations WHERE id = 'legacy-1'").fetchone()[0]
        cur = conn.cursor()
        cur.executemany(
            "INSERT INTO sessions VALUES (%s, %s, %s, %s)", [(pk, *s) for s in SESSIONS]
        )
        cur.executemany(
            "INSERT INTO turns (conv, id, session, pos, speaker, text, ts, tokens) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [(pk, *t) for t in TURNS],
        )
        for rid, session, title, content, ts, tokens, turns in EPISODES:
            run(
                "INSERT INTO episodes VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (pk, rid, session, title, content, ts, tokens),
            )
            cur.executemany(
                "INSERT INTO episode_turns VALUES (%s, %s, %s, %s)",
                [(pk, rid, turn, n) for n, turn in enumerate(turns)],
            )
        for rid, content, session, tokens, episodes in FACTS:
            run(
                "INSERT INTO facts VALUES (%s, %s, %s, %s, %s)", (pk, rid, content, session, tokens)
            )
            cur.executemany(
                "INSERT INTO fact_episodes VALUES (%s, %s, %s, %s)",
                [(pk, rid, episode, n) for n, episode in enumerate(episodes)],
            )
        cur.executemany(
            "INSERT INTO vectors VALUES (%s, %s, %s, %s::vector)",
            [(pk, space, rid, str(v.tolist())) for space, rid, v in vector_rows()],
        )
        run("INSERT INTO state VALUES (%s, %s, %s)", (pk, *STATE))
        run("INSERT INTO api_keys VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", API_KEY)
