"""History items of agent frameworks in the SQL stores (``SQLItems``, a mixin of
:class:`qemem.store.sql.SQLStore`): one row per item of a conversation, its JSON kept as it
was sent, numbered by the conversation's ``item`` id counter (so an id is never given twice in
a life of the conversation, not after a pop or a clear either), deleted with the conversation
and with the message it was stored as (:meth:`qemem.store.edits.SQLEdits.forget_turn`).

Items are no search material: writing them does not change the scope's version."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol

from qemem.models import ITEM_COUNTER, Item
from qemem.store.base import Scope

ITEM_PREFIX = "I"
_COLUMNS = "seq, data, turn, created_at"


class _Host(Protocol):
    """What of ``SQLStore`` these methods use."""

    def transaction(self) -> AbstractContextManager[None]: ...
    def _query(
        self, sql: str, params: Sequence[object] = (), *, binary: bool = False
    ) -> list[tuple[Any, ...]]: ...
    def _exec(self, sql: str, params: Sequence[object] = ()) -> int: ...
    def _write(self, sql: str, rows: Sequence[Sequence[object]]) -> None: ...
    def _pk(self, scope: Scope) -> int: ...
    def _locked_pk(self, scope: Scope) -> int: ...
    def _forgotten(self) -> None: ...


def item_seq(item_id: str) -> int | None:
    """The number of an item id ``I<n>`` (None for any other text)."""
    digits = item_id[len(ITEM_PREFIX) :]
    if not item_id.startswith(ITEM_PREFIX) or not digits.isdigit() or len(digits) > 15:
        return None
    return int(digits)


def _item(row: Sequence[Any]) -> Item:
    seq, data, turn, created = row
    created_at = datetime.fromisoformat(str(created))
    return Item(f"{ITEM_PREFIX}{int(seq)}", json.loads(data), turn, created_at)


class SQLItems:
    """The history items of ``SQLStore``."""

    def add_items(self: _Host, scope: Scope, items: Sequence[tuple[str, str | None]]) -> list[Item]:
        """Append items, each (its JSON text, the turn it was stored as or None), after the
        conversation's stored items, under its write lock; the stored items, in order."""
        with self.transaction():
            pk = self._locked_pk(scope)
            counted = self._query(
                "SELECT value FROM id_counters WHERE conv = ? AND prefix = ?", (pk, ITEM_COUNTER)
            )
            first = int(counted[0][0]) + 1 if counted else 1
            now = datetime.now(UTC).isoformat(timespec="microseconds")
            rows = [(pk, first + n, data, turn, now) for n, (data, turn) in enumerate(items)]
            self._write(
                "INSERT INTO items (conv, seq, data, turn, created_at) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            if rows:
                self._exec(
                    "INSERT INTO id_counters (conv, prefix, value) VALUES (?, ?, ?) "
                    "ON CONFLICT (conv, prefix) DO UPDATE SET value = excluded.value "
                    "WHERE id_counters.value < excluded.value",
                    (pk, ITEM_COUNTER, first + len(rows) - 1),
                )
        return [_item(row[1:]) for row in rows]

    def items(self: _Host, scope: Scope, limit: int | None = None) -> list[Item]:
        """The conversation's items in order; with ``limit``, its last ``limit`` items."""
        pk = self._pk(scope)
        if limit is None:
            rows = self._query(f"SELECT {_COLUMNS} FROM items WHERE conv = ? ORDER BY seq", (pk,))
            return [_item(r) for r in rows]
        rows = self._query(
            f"SELECT {_COLUMNS} FROM items WHERE conv = ? ORDER BY seq DESC LIMIT ?",
            (pk, max(limit, 0)),
        )
        return [_item(r) for r in reversed(rows)]

    def delete_items(self: _Host, scope: Scope, ids: Sequence[str] | None = None) -> int:
        """Delete the items of ``ids`` (every item when None) under the conversation's write
        lock; how many went. Their numbers stay counted."""
        with self.transaction():
            pk = self._locked_pk(scope)
            self._forgotten()
            if ids is None:
                return self._exec("DELETE FROM items WHERE conv = ?", (pk,))
            seqs = [s for s in map(item_seq, ids) if s is not None]
            return sum(
                self._exec("DELETE FROM items WHERE conv = ? AND seq = ?", (pk, s)) for s in seqs
            )
