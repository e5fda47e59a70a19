"""SQLite record/replay cache of LLM exchanges, safe for many threads and processes.

The key is the sha256 of the canonical JSON of (provider, model, endpoint, system, messages,
schema, temperature, max_tokens), where the endpoint is whatever else selects the model (an
``openai-compat`` server's base URL: two servers serving a model of the same name are two
models; absent for providers without one). It never includes the stage label (the same prompt
from two stages is one exchange) nor any secret (providers keep keys out of
``name``/``model``/``base_url``).

An exchange is tied to the conversations it was about (the ``subjects`` of the client that
made or reused it, see ``LLMClient.about``): :meth:`LLMCache.forget` removes every exchange
tied to a conversation, which ``Memory`` does when the conversation, or one of its messages,
is deleted or redacted. The file runs with ``secure_delete`` and its log is truncated after a
forget, so removed exchanges leave the file. Exchanges recorded without a subject (by code that
calls the LLM outside ``Memory``, or before subjects existed) are tied to nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from qemem.errors import CacheMissError, ConfigError
from qemem.llm.types import LLMRequest, LLMResponse

CacheMode = Literal["off", "readwrite", "replay"]
CACHE_MODES: tuple[CacheMode, ...] = ("off", "readwrite", "replay")

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS llm_cache (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)""",
    """
CREATE TABLE IF NOT EXISTS llm_cache_subjects (
    key TEXT NOT NULL,
    namespace TEXT NOT NULL,
    conversation TEXT NOT NULL,
    PRIMARY KEY (namespace, conversation, key)
)""",
)
Subject = tuple[str, str]
"""A conversation an exchange was about: (namespace, conversation id)."""


def provider_endpoint(provider: object) -> str | None:
    """What selects a provider's model beyond its name and model: its ``base_url`` (secret-free,
    e.g. an ``openai-compat`` server), None when it has none."""
    endpoint = getattr(provider, "base_url", None)
    return endpoint if isinstance(endpoint, str) and endpoint else None


def cache_key(provider: str, model: str, request: LLMRequest, endpoint: str | None = None) -> str:
    """Hex sha256 identifying an exchange (stage label excluded; ``endpoint`` only when set, so
    keys of providers without one are unchanged)."""
    payload = {
        **({"endpoint": endpoint} if endpoint is not None else {}),
        "provider": provider,
        "model": model,
        "system": request.system,
        "messages": [m.to_dict() for m in request.messages],
        "schema": request.schema,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def parse_mode(mode: str) -> CacheMode:
    """Validate a cache mode string."""
    if mode not in CACHE_MODES:
        raise ConfigError(
            f"unknown cache mode {mode!r}; QEMEM_CACHE_MODE must be one of {', '.join(CACHE_MODES)}"
        )
    return mode


class LLMCache:
    """A record/replay store of responses in one SQLite file (WAL, busy timeout, insert-or-ignore).

    One connection per thread (all closed by :meth:`close`); several processes may share the
    file.
    """

    def __init__(self, path: str | os.PathLike[str], mode: CacheMode = "readwrite") -> None:
        self.path = Path(path)
        self.mode = parse_mode(mode)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        if self.mode != "off":
            if self.mode == "replay" and not self.path.exists():
                raise ConfigError(
                    f"replay mode needs an existing cache file, {self.path} does not exist; "
                    "record one first with QEMEM_CACHE_MODE=readwrite"
                )
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn()

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=60.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout = 60000")
            conn.execute("PRAGMA secure_delete = ON")
            for attempt in range(50):
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    for table in _SCHEMA if self.mode == "readwrite" else _SCHEMA[:1]:
                        conn.execute(table)  # a replayed recording gains no table
                    break
                except sqlite3.OperationalError:
                    if attempt == 49:
                        raise
                    time.sleep(0.05)
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def get(self, key: str) -> LLMResponse | None:
        """The stored response for ``key`` (None on a miss or when the cache is off)."""
        if self.mode == "off":
            return None
        row = (
            self._conn().execute("SELECT response FROM llm_cache WHERE key = ?", (key,)).fetchone()
        )
        return LLMResponse.from_dict(json.loads(row[0])) if row else None

    def put(
        self,
        key: str,
        provider: str,
        model: str,
        request: LLMRequest,
        response: LLMResponse,
        subjects: Sequence[Subject] = (),
    ) -> None:
        """Store an exchange unless one is already stored under ``key`` (first writer wins),
        tied to ``subjects`` (see :meth:`tie`), in one transaction."""
        if self.mode != "readwrite":
            return
        req = request.to_dict()
        req.pop("stage")
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "INSERT OR IGNORE INTO llm_cache VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key,
                    provider,
                    model,
                    json.dumps(req, sort_keys=True),
                    json.dumps(response.to_dict(), sort_keys=True),
                    time.time(),
                ),
            )
            _tie(conn, key, subjects)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def tie(self, key: str, subjects: Sequence[Subject]) -> None:
        """Tie the exchange under ``key`` to the conversations ``subjects`` (an exchange
        reused for another conversation is about it too): forgetting any of them removes
        it. Nothing in replay mode, which never writes."""
        if self.mode == "readwrite" and subjects:
            _tie(self._conn(), key, subjects)

    def forget(self, namespace: str, conversation: str) -> int:
        """Remove every exchange tied to the conversation (also one another conversation
        reused: it holds this one's text); the number removed. Nothing in replay mode, which
        never writes (a replayed recording is a fixed input)."""
        if self.mode != "readwrite":
            return 0
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            keys = [
                (row[0],)
                for row in conn.execute(
                    "SELECT key FROM llm_cache_subjects WHERE namespace = ? AND conversation = ?",
                    (namespace, conversation),
                )
            ]
            conn.executemany("DELETE FROM llm_cache WHERE key = ?", keys)
            conn.executemany("DELETE FROM llm_cache_subjects WHERE key = ?", keys)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        if keys:  # the old copies of the removed rows leave the write-ahead log too
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return len(keys)

    def miss(self, key: str, provider: str, model: str, stage: str) -> CacheMissError:
        """The error replay mode raises for an unrecorded request."""
        return CacheMissError(
            f"replay mode: no recorded {provider}:{model} exchange for stage {stage!r} "
            f"(key {key[:12]}) in {self.path}; re-record with QEMEM_CACHE_MODE=readwrite "
            "or check that the prompts and model did not change"
        )

    def count(self) -> int:
        """Number of recorded exchanges."""
        if self.mode == "off":
            return 0
        return int(self._conn().execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0])

    def close(self) -> None:
        """Close the connections of every thread (the cache must not be used afterwards)."""
        with self._all_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


def _tie(conn: sqlite3.Connection, key: str, subjects: Sequence[Subject]) -> None:
    """Record that the exchange under ``key`` was about each of ``subjects``."""
    conn.executemany(
        "INSERT OR IGNORE INTO llm_cache_subjects VALUES (?, ?, ?)",
        [(key, namespace, conversation) for namespace, conversation in subjects],
    )
