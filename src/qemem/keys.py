"""API keys of the HTTP service: each key belongs to one namespace (tenant), may be read-only,
and is stored only as a salted scrypt hash.

A key reads ``qm_<id>_<secret>``: the id finds the row, the secret is checked against the hash in
constant time. Secrets are 256 random bits, so a light scrypt cost is enough (nothing to guess).
Storage sits behind the small ``KeyStore`` protocol; ``SQLiteKeyStore`` and ``PostgresKeyStore``
keep the ``api_keys`` table of the store itself.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from qemem.errors import AuthError, ConfigError, InputError, NotFoundError, StoreError
from qemem.models import check_text
from qemem.store import parse_store_url, pg_timeout
from qemem.store.guard import write_error
from qemem.store.schema import migrate

PREFIX = "qm"
_SCRYPT = {"n": 2**10, "r": 8, "p": 1, "dklen": 32}
_DUMMY_SALT = bytes(16)


@dataclass(frozen=True)
class ApiKey:
    """A key's public record (never the secret)."""

    id: str
    namespace: str
    label: str = ""
    read_only: bool = False
    created: str = ""
    revoked: str | None = None


@dataclass(frozen=True)
class StoredKey:
    """A key's record with its salt and hash, as a ``KeyStore`` keeps it."""

    key: ApiKey
    salt: bytes
    hash: bytes


class KeyStore(Protocol):
    """Persistence of API keys (rows of ``StoredKey``)."""

    def add(self, stored: StoredKey) -> None: ...

    def get(self, key_id: str) -> StoredKey | None: ...

    def list(self, namespace: str | None = None) -> list[ApiKey]: ...

    def revoke(self, key_id: str, when: str) -> bool:
        """Mark the key revoked; False when no such key exists."""
        ...

    def ping(self) -> None:
        """Return when the keys can be read; a StoreError otherwise."""
        ...

    def close(self) -> None: ...


def hash_secret(secret: str, salt: bytes) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, **_SCRYPT)


def create_key(
    keys: KeyStore, namespace: str, *, read_only: bool = False, label: str = ""
) -> tuple[str, ApiKey]:
    """Make a new key for ``namespace``; returns the full key (shown once) and its record."""
    if not namespace.strip():
        raise ConfigError("a key needs a namespace: pass --namespace NAME")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_bytes(16)
    record = ApiKey(key_id, namespace, label, read_only, datetime.now(UTC).isoformat())
    keys.add(StoredKey(record, salt, hash_secret(secret, salt)))
    return f"{PREFIX}_{key_id}_{secret}", record


def verify_key(keys: KeyStore, key: str) -> ApiKey:
    """The record of a valid, unrevoked ``key``; raises ``AuthError`` otherwise (the message
    never contains the key). The hash comparison is constant-time and runs even for unknown
    ids, so timing tells nothing about which ids exist."""
    prefix, _, rest = key.partition("_")
    key_id, _, secret = rest.partition("_")
    try:
        stored = keys.get(key_id) if prefix == PREFIX and key_id and secret else None
    except InputError:  # an id no store can hold names no key
        stored = None
    expected = stored.hash if stored else bytes(32)
    actual = hash_secret(secret, stored.salt if stored else _DUMMY_SALT)
    if stored is None or not hmac.compare_digest(expected, actual):
        raise AuthError("invalid API key: create one with `qemem keys create`")
    if stored.key.revoked is not None:
        raise AuthError("this API key was revoked: create a new one with `qemem keys create`")
    return stored.key


class KeyVerifier:
    """``verify_key`` for a server: a key verified once is recognised afterwards by its SHA-256
    (no scrypt per request); revocation is still read from the store on every call."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys
        self._lock = threading.Lock()
        self._verified: dict[str, tuple[bytes, bytes]] = {}

    def __call__(self, key: str) -> ApiKey:
        key_id = key.split("_")[1] if key.count("_") >= 2 else ""
        digest = hashlib.sha256(key.encode()).digest()
        with self._lock:
            known = self._verified.get(key_id)
        if known is not None and hmac.compare_digest(known[0], digest):
            stored = self.keys.get(key_id)
            if stored is not None and stored.hash == known[1]:
                if stored.key.revoked is not None:
                    raise AuthError(
                        "this API key was revoked: create a new one with `qemem keys create`"
                    )
                return stored.key
        record = verify_key(self.keys, key)
        stored = self.keys.get(record.id)
        if stored is not None:
            with self._lock:
                self._verified[record.id] = (digest, stored.hash)
        return record


def revoke_key(keys: KeyStore, key_id: str) -> None:
    if not keys.revoke(key_id, datetime.now(UTC).isoformat()):
        raise NotFoundError(f"no API key {key_id!r}: see `qemem keys list`")


class _SQLKeyStore:
    """The ``api_keys`` table; subclasses run one statement (``_execute``) and name the
    driver's parameter placeholder (``?`` or ``%s``)."""

    placeholder = "?"
    path: str

    def _execute(self, sql: str, params: tuple[object, ...]) -> tuple[list[Any], int]:
        """(rows, rowcount) of one statement, written with the driver's placeholders."""
        raise NotImplementedError

    def _run(self, sql: str, params: tuple[object, ...] = ()) -> tuple[list[Any], int]:
        """(rows, rowcount) of one statement, ``?`` written for every parameter. Text no
        store can keep (a NUL, a lone surrogate) is refused (InputError) before a store sees it."""
        for value in params:
            if isinstance(value, str):
                check_text(value, "key field")
        return self._execute(sql.replace("?", self.placeholder), params)

    def add(self, stored: StoredKey) -> None:
        k = stored.key
        self._run(
            "INSERT INTO api_keys (id, namespace, label, read_only, salt, hash, created, "
            "revoked) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                k.id,
                k.namespace,
                k.label,
                int(k.read_only),
                stored.salt.hex(),
                stored.hash.hex(),
                k.created,
                k.revoked,
            ),
        )

    def get(self, key_id: str) -> StoredKey | None:
        rows, _ = self._run(
            "SELECT id, namespace, label, read_only, created, revoked, salt, hash "
            "FROM api_keys WHERE id = ?",
            (key_id,),
        )
        if not rows:
            return None
        row = rows[0]
        return StoredKey(
            ApiKey(row[0], row[1], row[2], bool(row[3]), row[4], row[5]),
            bytes.fromhex(row[6]),
            bytes.fromhex(row[7]),
        )

    def list(self, namespace: str | None = None) -> list[ApiKey]:
        sql = "SELECT id, namespace, label, read_only, created, revoked FROM api_keys"
        params: tuple[str, ...] = ()
        if namespace is not None:
            sql, params = sql + " WHERE namespace = ?", (namespace,)
        rows, _ = self._run(sql + " ORDER BY created, id", params)
        return [ApiKey(r[0], r[1], r[2], bool(r[3]), r[4], r[5]) for r in rows]

    def revoke(self, key_id: str, when: str) -> bool:
        _, changed = self._run(
            "UPDATE api_keys SET revoked = ? WHERE id = ? AND revoked IS NULL", (when, key_id)
        )
        if changed:
            return True
        return bool(self._run("SELECT 1 FROM api_keys WHERE id = ?", (key_id,))[0])

    def ping(self) -> None:
        """Read the table once: a StoreError when the key store cannot be read."""
        self._run("SELECT 1 FROM api_keys LIMIT 1")


class SQLiteKeyStore(_SQLKeyStore):
    """API keys in the ``api_keys`` table of a SQLite store file (or in memory), over one
    connection."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
            conn.execute("PRAGMA busy_timeout = 30000")
            migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open key store {self.path!r}: {exc}") from exc
        self._conn = conn
        self._lock = threading.Lock()

    def _execute(self, sql: str, params: tuple[object, ...]) -> tuple[list[Any], int]:
        with self._lock:
            try:
                cursor = self._conn.execute(sql, params)
            except sqlite3.OperationalError as exc:  # a read-only file, a writer's lock
                raise write_error(self.path, exc) or exc from None
            rows = cursor.fetchall() if cursor.description else []
            return rows, cursor.rowcount

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class PostgresKeyStore(_SQLKeyStore):
    """API keys in the ``api_keys`` table of a PostgreSQL store (the ``postgres`` extra),
    over a small pool of checked connections: a connection broken by a restart of the
    database is replaced, and while the database is down each call fails within
    ``timeout`` seconds with a StoreError."""

    placeholder = "%s"

    def __init__(self, url: str, *, timeout: float | None = None) -> None:
        from qemem.store import redact
        from qemem.store.postgres import PostgresStore, checked_pool, unreachable

        PostgresStore(url, pool_size=1).close()  # creates or migrates the schema
        self.path = redact(url)
        self._unreachable = unreachable()
        self._pool = checked_pool(url, 2, timeout)

    def _execute(self, sql: str, params: tuple[object, ...]) -> tuple[list[Any], int]:
        try:
            with self._pool.connection() as conn:
                cursor = conn.execute(sql, params)
                return (cursor.fetchall() if cursor.description else []), cursor.rowcount
        except self._unreachable as exc:
            raise StoreError(f"the key store {self.path} is unreachable: {exc}") from exc

    def close(self) -> None:
        self._pool.close()


def open_key_store(url: str | Path) -> KeyStore:
    """The key store of a store URL: the store's own ``api_keys`` table (SQLite file or
    PostgreSQL; ``:memory:`` for tests)."""
    backend, target = parse_store_url(url)
    if backend == "postgresql":
        try:
            timeout = pg_timeout()
        except ValueError as exc:
            raise ConfigError(f"QEMEM_PG_TIMEOUT must be a number of seconds ({exc})") from exc
        return PostgresKeyStore(target, timeout=timeout)
    return SQLiteKeyStore(target)
