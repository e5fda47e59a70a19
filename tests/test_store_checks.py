"""Issue 21, three store items: a PostgreSQL database without qemem's schema is a missing
store for serve and mcp, a ``password=`` parameter is masked, and a read-only open of a store
left in WAL mode leaves no side files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.errors import StoreError
from qemem.memory import Memory
from qemem.store import redact, store_exists

runner = CliRunner()


def _tables(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return {r[0] for r in rows}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["serve", "mcp", "delete c1", "build"])
def test_a_database_without_qemem_schema_is_a_missing_store(command: str, pg_url: str) -> None:
    assert not store_exists(pg_url)
    result = runner.invoke(app, [*command.split(), "--store", pg_url])
    assert result.exit_code != 0
    assert isinstance(result.exception, StoreError)
    assert "no qemem store" in str(result.exception) and "no qemem schema" in str(result.exception)
    assert _tables(pg_url) == set()  # nothing was created
    Memory.open(pg_url, embedder="hash").close()  # a writing open creates the schema
    assert store_exists(pg_url) and "schema_version" in _tables(pg_url)


def test_an_unreachable_database_is_a_store_error() -> None:
    url = "postgresql://u:S3cret@127.0.0.1:1/db?connect_timeout=2"
    with pytest.raises(StoreError) as caught:
        store_exists(url)
    assert "S3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("host=db password=S3cret dbname=q", "host=db password=*** dbname=q"),
        ("host=db password = 'S3 \\' cret' port=5", "host=db password = *** port=5"),
        (
            "postgresql://u@db/q?password=S3cret&sslmode=require",
            "postgresql://u@db/q?password=***&sslmode=require",
        ),
        ("postgresql://u:S3cret@db/q?PASSWORD=S3cret", "postgresql://u:***@db/q?PASSWORD=***"),
        ("postgresql://u@db/q", "postgresql://u@db/q"),
        ("memory.db", "memory.db"),
    ],
)
def test_a_password_parameter_is_masked(dsn: str, shown: str) -> None:
    assert redact(dsn) == shown
    assert "S3" not in redact(dsn)


def test_a_read_only_open_of_a_store_left_in_wal_mode_leaves_no_side_files(
    tmp_path: Path, sample_path: Path
) -> None:
    store = tmp_path / "m.db"
    with Memory.open(store, embedder="hash") as memory:
        memory.ingest(sample_path)
    with sqlite3.connect(store) as conn:  # as a writer that never closed would leave it
        assert conn.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]
    for args in (["conversations"], ["search", "pottery", "-c", "demo-1"]):
        result = runner.invoke(app, [*args, "--store", str(store)], env={"QEMEM_EMBEDDER": "hash"})
        assert result.exit_code == 0, result.output
        assert "demo-1" in result.output
        assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]
    with Memory.open(store, embedder="hash", read_only=True) as memory:
        assert [c.id for c in memory.conversations()] == ["demo-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]
