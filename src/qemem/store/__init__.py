"""Memory stores: the ``MemoryStore`` seam, SQLite (default) and PostgreSQL + pgvector."""

from __future__ import annotations

import os
import re
from pathlib import Path

from qemem.errors import ConfigError
from qemem.models import check_path, check_text
from qemem.store.base import IndexRows, MemoryStore, Ranked, Scope
from qemem.store.sqlite import SQLiteStore

__all__ = [
    "IndexRows",
    "MemoryStore",
    "Ranked",
    "SQLiteStore",
    "Scope",
    "open_store",
    "parse_store_url",
    "redact",
    "store_exists",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(//|$)?")
POSTGRES_SCHEMES = ("postgresql", "postgres")
_KNOWN = ("sqlite", *POSTGRES_SCHEMES)


_PASSWORD_PARAMETER = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)")


def redact(url: str | Path) -> str:
    """A store argument as messages show it: a URL's password replaced by ``***`` (also in a
    malformed URL such as ``postgresql:/user:pw@host``), and so is the value of a
    ``password=`` parameter of a libpq key/value DSN (``host=h password=pw``) or URL query."""
    text = _PASSWORD_PARAMETER.sub(r"\1***", str(url))
    head, at, tail = text.rpartition("@")
    if not at:
        return text
    scheme, sep, auth = head.partition("//")
    if not sep:
        scheme, sep, auth = head.partition(":")
    user, colon, _ = auth.partition(":")
    return f"{scheme}{sep}{user}:***@{tail}" if colon else text


def parse_store_url(url: str | Path | None) -> tuple[str, str]:
    """(backend, target) of a store argument: ``("sqlite", path)`` for a plain path or
    ``sqlite:///PATH`` (relative; ``sqlite:////abs/path`` is absolute; ``":memory:"`` for
    None or ``sqlite://``), ``("postgresql", url)`` for ``postgresql://`` and ``postgres://``
    URLs. Any other scheme is a ConfigError: a store argument with a scheme is never a file
    path. An empty or blank argument is a ConfigError too (an unset shell variable would
    otherwise put the data in memory, where it is lost)."""
    if url is None:
        return "sqlite", ":memory:"
    if not str(url).strip():
        raise ConfigError(
            "the store argument is empty: pass a file path or a URL with --store or "
            "QEMEM_STORE (is a shell variable unset?)"
        )
    if isinstance(url, Path):
        return "sqlite", _sqlite_path(str(url))
    match = _SCHEME.match(url)
    if match is None or (match.group(2) is None and match.group(1).lower() not in _KNOWN):
        return "sqlite", _sqlite_path(url)
    scheme = match.group(1).lower()
    if scheme == "sqlite":
        if url.rstrip("/") == "sqlite:":
            return "sqlite", ":memory:"
        if not url.startswith("sqlite:///"):
            raise ConfigError(f"store URL {url!r}: write sqlite:///PATH (or a plain path)")
        return "sqlite", _sqlite_path(url[len("sqlite:///") :] or ":memory:")
    if scheme in POSTGRES_SCHEMES:
        if not url.startswith(f"{match.group(1)}://"):
            raise ConfigError(f"store URL {redact(url)!r}: write postgresql://USER@HOST/DB")
        return "postgresql", url
    raise ConfigError(
        f"unknown store scheme {scheme!r} in {redact(url)!r}: use a file path or sqlite:///PATH "
        "(SQLite), or postgresql://USER@HOST/DB (PostgreSQL with pgvector)"
    )


def _sqlite_path(path: str) -> str:
    """A SQLite store path the file system can take (else InputError: a control character,
    a lone surrogate, too long)."""
    if path == ":memory:":
        return path
    check_text(path, "store path")  # SQLite takes UTF-8 file names only
    return str(check_path(path, "store path"))


def store_exists(url: str | Path) -> bool:
    """Whether ``url`` names an existing qemem store without creating anything: a SQLite file
    that exists (the in-memory store always does), or a reachable PostgreSQL database that
    holds qemem's schema (a database without it counts as missing, like a missing file; an
    unreachable one is a StoreError)."""
    backend, target = parse_store_url(url)
    if backend == "sqlite":
        return target == ":memory:" or Path(target).is_file()
    try:
        from qemem.store.postgres_schema import has_schema

        return has_schema(target, redact(target))
    except ImportError as exc:
        raise ConfigError(
            f"the PostgreSQL store needs psycopg ({exc.name} is missing): "
            "pip install 'qemem[postgres]'"
        ) from None


def pg_timeout() -> float | None:
    """``QEMEM_PG_TIMEOUT`` (seconds a PostgreSQL call waits for a pooled connection), or
    None for the default; ValueError when it is no positive number."""
    text = os.environ.get("QEMEM_PG_TIMEOUT")
    if not text:
        return None
    seconds = float(text)
    if not seconds > 0:
        raise ValueError(f"QEMEM_PG_TIMEOUT={text} is not more than 0")
    return seconds


def open_store(
    url: str | Path | None = None, *, pool_size: int | None = None, read_only: bool = False
) -> MemoryStore:
    """Open the store a URL names (see :func:`parse_store_url`); in memory when None.

    ``pool_size`` bounds PostgreSQL's connection pool (default ``QEMEM_PG_POOL_SIZE``, else
    8); ``QEMEM_PG_TIMEOUT`` is how long a call waits for a pooled connection before it fails
    (seconds, default 5: while the database is down, calls fail within it);
    ``QEMEM_PG_HNSW_MIN_ROWS`` turns on pgvector HNSW top-k for conversations with at least
    that many vectors (default: exact search). SQLite ignores them. ``read_only`` opens an
    existing SQLite store for reading only (never created); PostgreSQL leaves read access to
    the server's roles.
    """
    backend, target = parse_store_url(url)
    if backend == "postgresql":
        from qemem.store.postgres import PostgresStore

        try:
            size = pool_size or int(os.environ.get("QEMEM_PG_POOL_SIZE") or 8)
            hnsw = os.environ.get("QEMEM_PG_HNSW_MIN_ROWS")
            hnsw_min_rows = int(hnsw) if hnsw else None
            timeout = pg_timeout()
        except ValueError as exc:
            raise ConfigError(
                f"QEMEM_PG_POOL_SIZE and QEMEM_PG_HNSW_MIN_ROWS must be integers, "
                f"QEMEM_PG_TIMEOUT a number of seconds ({exc})"
            ) from exc
        return PostgresStore(target, pool_size=size, hnsw_min_rows=hnsw_min_rows, timeout=timeout)
    return SQLiteStore(target, read_only=read_only and target != ":memory:")
