"""The lives of a conversation in the SQL stores: pins and id counters (``SQLLives``, a mixin
of :class:`qemem.store.sql.SQLStore`).

A conversation's life begins when it is created and ends with its delete; one created again
under the same id is a new life: a new ``pk`` (never reused, on both backends), a new
``created_at`` and fresh id counters.

*Pins.* A long operation (a build) pins the life it starts in (:meth:`SQLLives.pin`); every
read and write through the pinned scope checks, in its own transaction and under the scope's
write lock, that the conversation is still that life (else ``ConversationGoneError``) and has
lost no record by hand since (``conversations.removals``, counted by deleting or redacting a
message and deleting a fact; else ``ConversationChangedError``), so such an operation never
writes into a re-created conversation, nor anything derived from text removed meanwhile.

*Id counters.* For each id prefix (``E`` episodes, ``S`` facts, ``D<session>:`` messages
without an id of their own) the highest number an id ``<prefix><n>`` has had in this life.
Every write of a record whose id has that form (given by qemem, or a source's own such as
LoCoMo's ``D3:12``) raises its prefix's counter to the id's number, and nothing lowers one, so
the ids qemem gives (``<prefix><counter + 1>``: builds, corrections, the NEMORI import, ingest
and appends of messages without an id) never name a record of the past, deleted or not. A
store migrated from a schema without counters starts each one at the highest number among
the records it held then (records deleted before the migration are not known).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol

from qemem.errors import ConversationChangedError, ConversationGoneError, NotFoundError
from qemem.models import highest_numbers
from qemem.store.base import Pin, Scope
from qemem.store.dialect import Conflict, Dialect


class _Host(Protocol):
    """What of ``SQLStore`` these methods use."""

    path: str
    dialect: ClassVar[Dialect]

    def _query(
        self, sql: str, params: Sequence[object] = (), *, binary: bool = False
    ) -> list[tuple[Any, ...]]: ...
    def _exec(self, sql: str, params: Sequence[object] = ()) -> int: ...
    def _write(self, sql: str, rows: Sequence[Sequence[object]]) -> None: ...
    def _insert(self, table: str, columns: Sequence[str], conflict: Conflict = "fail") -> str: ...
    def _in_transaction(self) -> bool: ...
    def lock_scope(self, scope: Scope) -> None: ...
    def _row(self, scope: Scope) -> tuple[int, int]: ...
    def _life(self, scope: Scope) -> tuple[int, int, int]: ...


def created_stamp() -> str:
    """The ``created_at`` of a conversation created now (UTC ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def check_pin(scope: Scope, row: tuple[Any, ...] | None) -> None:
    """Raise unless ``row`` (pk, version, removals of the scope's conversation, None when
    absent) is the life the scope is pinned to (if it is), with no removal since."""
    pin = scope.pin
    if pin is None:
        return
    if row is None or int(row[0]) != pin.key:
        raise ConversationGoneError(
            f"conversation {scope} was deleted while it was being built (or read): nothing "
            "more was written to it; a conversation created again under its id is a new one "
            "(build it anew)"
        )
    if int(row[2]) != pin.removals:
        raise ConversationChangedError(
            f"a message or fact of conversation {scope} was deleted or redacted while it was "
            "being built: nothing more was written (it might derive from the removed text); "
            "run the build again, it resumes from what was stored"
        )


COUNT_REMOVAL = "UPDATE conversations SET removals = removals + 1 WHERE pk = ?"
"""Counts one removal by hand from the conversation whose pk is ``?`` (run inside the
removing transaction)."""


class SQLLives:
    """Pins and id counters of ``SQLStore``."""

    def pin(self: _Host, scope: Scope) -> Scope:
        """``scope`` pinned to its conversation's current life (see the module's docstring);
        a pinned scope is checked and returned as it is. NotFoundError when absent."""
        pk, _, removals = self._life(scope)
        return scope if scope.pin is not None else dataclasses.replace(scope, pin=Pin(pk, removals))

    def _life(self: _Host, scope: Scope) -> tuple[int, int, int]:
        """(pk, version, removals) of the scope's conversation; NotFoundError when absent.
        A pinned scope is checked against its pin (:func:`check_pin`),
        inside a write transaction under the scope's write lock."""
        if scope.pin is not None and self._in_transaction():
            self.lock_scope(scope)
        rows = self._query(
            "SELECT pk, version, removals FROM conversations WHERE namespace = ? AND id = ?",
            (scope.namespace, scope.conversation),
        )
        check_pin(scope, rows[0] if rows else None)
        if not rows:
            raise NotFoundError(
                f"no conversation {scope!s} in store {self.path}: ingest it first "
                f"(qemem ingest FILE --store {self.dialect.store_arg}) or list them "
                "(qemem conversations)",
                kind="conversation",
                name=scope.conversation,
            )
        return int(rows[0][0]), int(rows[0][1]), int(rows[0][2])

    def counters(self: _Host, scope: Scope) -> dict[str, int]:
        """The conversation's id counters, by prefix (a prefix never counted is absent)."""
        pk = self._row(scope)[0]
        rows = self._query("SELECT prefix, value FROM id_counters WHERE conv = ?", (pk,))
        return {str(prefix): int(value) for prefix, value in rows}

    def _raise_counters(self: _Host, pk: int, ids: Iterable[str]) -> None:
        """Raise the counters to the numbers of ``ids`` (inside the writing transaction)."""
        self._write(
            "INSERT INTO id_counters (conv, prefix, value) VALUES (?, ?, ?) "
            "ON CONFLICT (conv, prefix) DO UPDATE SET value = excluded.value "
            "WHERE id_counters.value < excluded.value",
            [(pk, prefix, number) for prefix, number in highest_numbers(ids).items()],
        )
