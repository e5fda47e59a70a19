"""The stores the state machine (``forget_machine``) runs on, and where it looks for forgotten
text beyond the library's answers: every text cell of every table of the store, read with the
backend's own driver (SQLite file, PostgreSQL URL), and the exchanges of the LLM cache file."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Collection, Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, Protocol

TEXT_TYPES = ("text", "character varying", "json", "jsonb")
"""PostgreSQL column types that can hold user text."""


class Backend(Protocol):
    name: str

    def store(self, folder: Path) -> str:
        """The store URL of one example (``folder`` is its own, removed afterwards)."""

    def cells(self, url: str) -> Iterator[tuple[str, str]]:
        """(table, text) of every text cell of the store ``url``."""

    def close(self) -> None:
        """Release what reading the cells holds (after the last example)."""


def sqlite_cells(path: str | Path) -> Iterator[tuple[str, str]]:
    """(table, text) of every text cell of the SQLite database ``path``."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                yield from ((table, cell) for cell in row if isinstance(cell, str))


def postgres_cells(conn: Any) -> Iterator[tuple[str, str]]:
    """(table, text) of every text cell of the PostgreSQL database of ``conn`` (a psycopg
    connection; schema public), read in one statement."""
    columns = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND data_type = ANY(%s)",
        (list(TEXT_TYPES),),
    ).fetchall()
    union = " UNION ALL ".join(
        f'SELECT \'{table}\', "{column}"::text FROM "{table}"' for table, column in columns
    )
    for table, cell in conn.execute(union).fetchall() if union else ():
        if cell is not None:
            yield table, cell


def leaks(cells: Iterable[tuple[str, str]], words: Collection[str]) -> list[tuple[str, str]]:
    """The (place, word) of every word of ``words`` (lower case) found in ``cells``."""
    if not words:
        return []
    pattern = re.compile("|".join(sorted(map(re.escape, words))), re.IGNORECASE)
    return [(place, m.group(0).lower()) for place, text in cells for m in pattern.finditer(text)]


class SQLiteBackend:
    """A new SQLite file for each example."""

    name = "sqlite"

    def store(self, folder: Path) -> str:
        return str(folder / "memory.db")

    def cells(self, url: str) -> Iterator[tuple[str, str]]:
        return sqlite_cells(url)

    def close(self) -> None:
        """Nothing to close: each read opens the file."""


class PostgresBackend:
    """One PostgreSQL database for every example (each has a namespace of its own and
    deletes its conversations at the end); its cells are read on one connection."""

    name = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None

    def store(self, folder: Path) -> str:
        return self.url

    def cells(self, url: str) -> Iterator[tuple[str, str]]:
        if self._conn is None:
            import psycopg

            self._conn = psycopg.connect(url, autocommit=True)
        return postgres_cells(self._conn)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
