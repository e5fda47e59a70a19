"""Stores written before both backends shared one schema (SQLite schema 3, PostgreSQL schema 2,
and every older landed version) open with the current code, migrate in place, read back
exactly what was written, keep working, and end at the schema a new store gets."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from legacy_store import (
    API_KEY,
    EPISODES,
    FACTS,
    POSTGRES_MIGRATIONS,
    SESSIONS,
    SQLITE_MIGRATIONS,
    STATE,
    TURNS,
    create_postgres,
    create_sqlite,
    fill_postgres,
    fill_sqlite,
    vector,
    vector_rows,
)
from qemem.errors import StoreError
from qemem.keys import open_key_store
from qemem.models import Conversation, Correction, Episode, SemanticFact, Session, Space, Turn
from qemem.store import Scope, open_store, parse_store_url, postgres_schema, schema

SCOPE = Scope("legacy-1")


def legacy(url: str, version: int | None = None, *, rows: bool = False) -> None:
    """Make the store at ``url`` (empty) one of schema ``version`` (default: the last
    before the shared schema), with the legacy rows if ``rows``."""
    backend, target = parse_store_url(url)
    if backend == "sqlite":
        create_sqlite(target, version or len(SQLITE_MIGRATIONS))
        if rows:
            fill_sqlite(target)
    else:
        create_postgres(target, version or len(POSTGRES_MIGRATIONS))
        if rows:
            fill_postgres(target)


@pytest.fixture
def legacy_url(store_url: str) -> str:
    """A store of each backend as today's main leaves it, holding the legacy rows."""
    legacy(store_url, rows=True)
    return store_url


def test_legacy_store_reads_back_identically(legacy_url: str) -> None:
    migrated = datetime.now(UTC)
    with closing(open_store(legacy_url)) as store:
        sessions = tuple(Session(i, datetime.fromisoformat(dt), key) for i, key, dt in SESSIONS)
        conv = store.get_conversation(SCOPE)
        assert conv == Conversation(
            "legacy-1", ("Ana", "Ben"), sessions, created_at=conv.created_at
        )
        assert conv.created_at is not None and conv.created_at >= migrated.replace(microsecond=0)
        assert [(c.namespace, c.id) for c in store.conversations()] == [
            ("default", "legacy-1"),
            ("team", "legacy-2"),
        ]
        assert store.turns(SCOPE) == [
            Turn(rid, "legacy-1", session, pos, who, text, datetime.fromisoformat(ts))
            for rid, session, pos, who, text, ts, _ in TURNS
        ]
        assert store.episodes(SCOPE) == [
            Episode(rid, "legacy-1", s, title, content, datetime.fromisoformat(ts), tuple(turns))
            for rid, s, title, content, ts, _, turns in reversed(EPISODES)  # E2 before E10
        ]
        assert store.facts(SCOPE) == [
            SemanticFact(rid, "legacy-1", content, session, tuple(episodes))
            for rid, content, session, _, episodes in reversed(FACTS)  # S1 before S2
        ]
        assert store.embedder() == ("hash-4", 4)
        assert store.get_state(SCOPE, STATE[0]) == STATE[1]
        tokens = {r[0]: r[6].split() for r in TURNS}
        tokens |= {r[0]: r[5].split() for r in EPISODES} | {r[0]: r[3].split() for r in FACTS}
        stored = {(space, rid): v for space, rid, v in vector_rows()}
        order: dict[Space, list[str]] = {
            "turn": [t[0] for t in TURNS],
            "episode": ["E2", "E10"],
            "fact": ["S1", "S2"],
        }
        for space, ids in order.items():
            rows = store.index_rows(SCOPE, space)
            assert rows.ids == ids
            assert rows.tokens == [tokens[rid] for rid in rows.ids]
            assert rows.matrix.dtype == np.float32
            assert np.array_equal(rows.matrix, np.vstack([stored[space, i] for i in rows.ids]))
    with closing(open_key_store(legacy_url)) as keys:  # type: ignore[type-var]
        key = keys.get(API_KEY[0])
        assert key is not None and (key.key.namespace, key.key.read_only) == ("team", True)
        assert key.hash == bytes.fromhex(API_KEY[5])


def test_legacy_store_takes_new_writes(legacy_url: str) -> None:
    with closing(open_store(legacy_url)) as store:
        before = store.version(SCOPE)
        other = store.version(Scope("legacy-2", "team"))
        fact = SemanticFact("S3", "legacy-1", "Miso is a cat.", 1, ("E2", "E10"))
        store.put_facts(SCOPE, [fact], vector(9)[None], "hash-4")
        assert store.facts(SCOPE, ["S3", "S1"]) == [fact, store.facts(SCOPE)[0]]
        after = store.version(SCOPE)
        assert after is not None and before is not None and other is not None
        assert after > max(before, other)  # versions are never reused
        store.delete_episodes(SCOPE, ["E10"])
        assert [(f.id, f.episode_ids) for f in store.facts(SCOPE)] == [
            ("S1", ("E2",)),
            ("S3", ("E2",)),
        ]
        assert store.vectors(SCOPE, "fact")[0] == ["S1", "S3"]


def test_read_only_open_of_a_legacy_sqlite_store_asks_for_the_upgrade(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    legacy(path, rows=True)
    with pytest.raises(StoreError, match=f"needs an upgrade to {schema.SCHEMA_VERSION}"):
        open_store(path, read_only=True)


def sqlite_schema(path: str) -> dict[str, object]:
    """Each table's columns, foreign keys and indexes (not the text that created them)."""
    with closing(sqlite3.connect(path)) as conn:

        def run(sql: str) -> list[tuple[object, ...]]:
            return conn.execute(sql).fetchall()

        tables = [r[0] for r in run("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            str(t): (
                sorted(r[1:] for r in run(f"PRAGMA table_info({t})")),
                sorted(r[1:] for r in run(f"PRAGMA foreign_key_list({t})")),
                sorted(
                    (r[1:], [c[2] for c in run(f"PRAGMA index_info({r[1]})")])
                    for r in run(f"PRAGMA index_list({t})")
                ),
            )
            for t in tables
        }


def postgres_schema_of(url: str) -> list[list[tuple[object, ...]]]:
    """The public schema's columns, constraints, indexes and sequences."""
    import psycopg

    queries = (
        "SELECT table_name, column_name, data_type, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2",
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
        "ORDER BY 1, 2",
        "SELECT sequence_name FROM information_schema.sequences ORDER BY 1",
    )
    with psycopg.connect(url) as conn:
        return [conn.execute(sql).fetchall() for sql in queries]


def test_every_landed_schema_migrates_to_the_new_one(store_url: str, tmp_path: Path) -> None:
    backend, target = parse_store_url(store_url)
    open_store(store_url).close()
    if backend == "sqlite":
        fresh = sqlite_schema(target)
        for version in range(1, len(SQLITE_MIGRATIONS) + 1):
            path = str(tmp_path / f"v{version}.db")
            legacy(path, version)
            open_store(path).close()
            with closing(sqlite3.connect(path)) as conn:
                assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
            assert sqlite_schema(path) == fresh, version
        return
    import psycopg

    fresh_pg = postgres_schema_of(target)
    for version in range(1, len(POSTGRES_MIGRATIONS) + 1):
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        legacy(target, version)
        open_store(target).close()
        assert postgres_schema_of(target) == fresh_pg, version
        with psycopg.connect(target) as conn:
            [(number,)] = conn.execute("SELECT version FROM schema_version").fetchall()
        assert number == postgres_schema.SCHEMA_VERSION


def previous(url: str) -> None:
    """Bring the legacy store at ``url`` to the schema before idempotency keys (SQLite 4,
    PostgreSQL 3), the last that main had before them, with the steps that made it."""
    backend, target = parse_store_url(url)
    if backend == "sqlite":
        with closing(sqlite3.connect(target, isolation_level=None)) as conn:
            conn.executescript(
                f"BEGIN IMMEDIATE; {schema.UPGRADES[4]} PRAGMA user_version = 4; COMMIT;"
            )
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn, conn.transaction():
        conn.execute(postgres_schema.UPGRADES[3])
        conn.execute("UPDATE schema_version SET version = 3")


def test_the_schema_before_idempotency_keys_gains_their_table(legacy_url: str) -> None:
    previous(legacy_url)
    retention = timedelta(hours=1)
    with closing(open_store(legacy_url)) as store:
        assert [t.id for t in store.turns(SCOPE)] == [t[0] for t in TURNS]
        assert store.recorded_response("default", "k", retention) is None
        with store.transaction():
            store.record_response(SCOPE, "k", "f" * 64, '{"ids": []}', retention)
    with closing(open_store(legacy_url)) as store:
        assert store.recorded_response("default", "k", retention) == ("f" * 64, '{"ids": []}')
        assert store.recorded_response("team", "k", retention) is None
    backend, target = parse_store_url(legacy_url)
    if backend == "sqlite":
        with closing(sqlite3.connect(target)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        return
    import psycopg

    with psycopg.connect(target) as conn:
        [(number,)] = conn.execute("SELECT version FROM schema_version").fetchall()
    assert number == postgres_schema.SCHEMA_VERSION


def _before_jobs(url: str) -> None:
    """Bring the legacy store at ``url`` to the schema before jobs (SQLite 5, PostgreSQL 4)."""
    previous(url)
    backend, target = parse_store_url(url)
    if backend == "sqlite":
        with closing(sqlite3.connect(target, isolation_level=None)) as conn:
            conn.executescript(
                f"BEGIN IMMEDIATE; {schema.UPGRADES[5]} PRAGMA user_version = 5; COMMIT;"
            )
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn, conn.transaction():
        conn.execute(postgres_schema.UPGRADES[4])
        conn.execute("UPDATE schema_version SET version = 4")


def test_the_schema_before_jobs_gains_their_table(legacy_url: str) -> None:
    _before_jobs(legacy_url)
    with closing(open_store(legacy_url)) as store:
        assert [t.id for t in store.turns(SCOPE)] == [t[0] for t in TURNS]
        job = store.jobs.enqueue("default", "build", SCOPE.conversation)  # type: ignore[attr-defined]
    with closing(open_store(legacy_url)) as store:
        assert store.jobs.get(job.id).status == "queued"  # type: ignore[attr-defined]
    backend, target = parse_store_url(legacy_url)
    if backend == "sqlite":
        with closing(sqlite3.connect(target)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        return
    import psycopg

    with psycopg.connect(target) as conn:
        [(number,)] = conn.execute("SELECT version FROM schema_version").fetchall()
    assert number == postgres_schema.SCHEMA_VERSION


@pytest.mark.slow
def test_the_jobs_of_the_schema_before_not_before_may_start_at_once(legacy_url: str) -> None:
    _before_jobs(legacy_url)
    backend, target = parse_store_url(legacy_url)
    if backend == "sqlite":
        with closing(sqlite3.connect(target, isolation_level=None)) as conn:
            conn.executescript(
                f"BEGIN IMMEDIATE; {schema.UPGRADES[6]} PRAGMA user_version = 6; COMMIT;"
                "INSERT INTO jobs (id, namespace, kind, conversation, status, max_attempts, "
                "created, updated) VALUES ('job-old', 'default', 'build', 'c1', 'queued', 3, 1, 1);"
            )
    else:
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn, conn.transaction():
            conn.execute(postgres_schema.UPGRADES[5])
            conn.execute("UPDATE schema_version SET version = 5")
            conn.execute(
                "INSERT INTO jobs (id, namespace, kind, conversation, status, max_attempts, "
                "created, updated) VALUES ('job-old', 'default', 'build', 'c1', 'queued', 3, 1, 1)"
            )
    with closing(open_store(legacy_url)) as store:
        old = store.jobs.get("job-old")  # type: ignore[attr-defined]
        assert old is not None and old.not_before is None
        claimed = store.jobs.claim("w", 30.0)  # type: ignore[attr-defined]
        assert claimed is not None and claimed.id == "job-old"


def _before_corrections(url: str) -> None:
    """Bring the legacy store at ``url`` to the schema before corrections (SQLite 8,
    PostgreSQL 7) with a correction by hand of S1 (S3, citing D1:1) and a fact whose
    correction went with the fact it corrected (S4)."""
    _before_jobs(url)
    rows = (
        "INSERT INTO facts (conv, id, content, session, tokens) VALUES "
        "(1, 'S3', 'Ana has a cat, Mochi.', 1, 'ana cat mochi'), "
        "(1, 'S4', 'Ana has a dog.', 1, 'ana dog')",
        "INSERT INTO supersessions VALUES (1, 'S1', 'S3', '[\"D1:1\"]', "
        "'2024-05-01T10:00:00', 'manual', '2024-06-01T00:00:00+00:00')",
    )
    backend, target = parse_store_url(url)
    if backend == "sqlite":
        steps = "".join(f"{schema.UPGRADES[n]} PRAGMA user_version = {n};" for n in (6, 7, 8))
        with closing(sqlite3.connect(target, isolation_level=None)) as conn:
            conn.executescript(f"BEGIN IMMEDIATE; {steps} {'; '.join(rows)}; COMMIT;")
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn, conn.transaction():
        for number in (5, 6, 7):
            conn.execute(postgres_schema.UPGRADES[number])
        conn.execute("UPDATE schema_version SET version = 7")
        for row in rows:
            conn.execute(row)


def test_the_schema_before_corrections_gains_them(legacy_url: str) -> None:
    _before_corrections(legacy_url)
    started = datetime.now(UTC) - timedelta(minutes=1)
    with closing(open_store(legacy_url)) as store:
        manual, lost = store.corrections(SCOPE)
        # S1 was learned from E10 (D2:1) and E2 (D1:2, D1:1): in conversation order
        assert manual == Correction(
            "S3", ("D1:1",), ("D1:1", "D1:2", "D2:1"), datetime(2024, 6, 1, tzinfo=UTC)
        )
        assert (lost.fact, lost.turn_ids, lost.corrected_turns) == ("S4", (), ())
        assert lost.recorded >= started
        assert {f.id for f in store.facts(SCOPE)} == {"S1", "S2", "S3", "S4"}


def test_a_store_of_the_version_before_items_gains_their_table(store_url: str) -> None:
    """A store that the previous release left at SQLite 13 / PostgreSQL 12 (assistant memory,
    without the ``items`` and ``passages`` tables) gets both on open, and with them the newest
    version."""
    backend, target = parse_store_url(store_url)
    open_store(store_url).close()
    if backend == "sqlite":
        with closing(sqlite3.connect(target, isolation_level=None)) as conn:
            conn.executescript("DROP TABLE items; DROP TABLE passages; PRAGMA user_version = 13;")
    else:
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("DROP TABLE items")
            conn.execute("DROP TABLE passages")
            conn.execute("UPDATE schema_version SET version = 12")
    with closing(open_store(store_url)) as store:
        for table in ("items", "passages"):
            found = store._query(f"SELECT count(*) FROM {table}", ())  # type: ignore[attr-defined]
            assert [tuple(r) for r in found] == [(0,)]
    if backend == "sqlite":
        with closing(sqlite3.connect(target)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        return
    import psycopg

    with psycopg.connect(target) as conn:
        [(number,)] = conn.execute("SELECT version FROM schema_version").fetchall()
    assert number == postgres_schema.SCHEMA_VERSION
