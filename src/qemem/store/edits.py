"""Edits of single records in the SQL stores: supersessions of facts, and forgetting one turn
or one fact (``SQLEdits``, a mixin of :class:`qemem.store.sql.SQLStore`).

A turn is forgotten by deleting it or by redacting it (its text replaced by
:data:`~qemem.models.REDACTED`, re-embedded, its id and place kept); its passages go either
way. Either way every episode
citing it goes (its narrative was written from the turn), a fact loses those episodes from its
provenance and goes when none is left, and a build supersession loses the turn from the turns
it cites (and goes when none is left: no supersession without a cited turn). Each edit is one
transaction that gives the conversation a new version, so cached search indexes reload.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

import numpy as np

from qemem.models import Supersession, Turn
from qemem.store.base import Scope, TurnRemoval, record_order
from qemem.store.dialect import Conflict
from qemem.store.passages import drop_passages
from qemem.store.rows import turn_row
from qemem.store.staged import PREFIX

T = TypeVar("T")
SUPERSESSION_COLUMNS = ("conv", "old", "new", "turns", "at", "kind", "recorded")
MANUAL_FACTS = "SELECT new FROM supersessions WHERE conv = ? AND kind = 'manual'"
"""Facts corrected by hand: their provenance is their supersession, not episodes."""
NOT_SUPERSEDED = (
    " AND NOT EXISTS (SELECT 1 FROM supersessions s WHERE s.conv = {table}.conv "
    "AND s.old = {table}.id)"
)
"""The condition (after a WHERE, ``{table}`` the alias of a facts or vectors row) that keeps
current facts only: a superseded fact is in no search index."""
ORPHANS = (
    "SELECT id FROM facts f WHERE conv = ? AND NOT EXISTS (SELECT 1 FROM "
    f"fact_episodes l WHERE l.conv = f.conv AND l.fact = f.id) AND id NOT IN ({MANUAL_FACTS})"
)
"""Facts no episode supports (but those corrected by hand, whose source is the correction)."""
_DANGLING = (
    "DELETE FROM supersessions WHERE conv = ? AND (old NOT IN (SELECT id FROM facts WHERE "
    "conv = ?) OR new NOT IN (SELECT id FROM facts WHERE conv = ?))"
)


class _Host(Protocol):
    """What of ``SQLStore`` these methods use."""

    def transaction(self) -> AbstractContextManager[None]: ...
    def _query(
        self, sql: str, params: Sequence[object] = (), *, binary: bool = False
    ) -> list[tuple[Any, ...]]: ...
    def _exec(self, sql: str, params: Sequence[object] = ()) -> int: ...
    def _write(self, sql: str, rows: Sequence[Sequence[object]]) -> None: ...
    def _insert(self, table: str, columns: Sequence[str], conflict: Conflict = "fail") -> str: ...
    def _writing(self, scope: Scope) -> int: ...
    def _load(self, scope: Scope, what: str, load: Callable[[int], T]) -> T: ...
    def _check_vectors(self, count: int, vectors: np.ndarray, embedder: str) -> None: ...
    def _put_vectors(
        self, pk: int, space: Any, ids: Sequence[str], vectors: np.ndarray
    ) -> None: ...


def supersession_row(pk: int, s: Supersession) -> tuple[object, ...]:
    """A ``supersessions`` row (``SUPERSESSION_COLUMNS``)."""
    turns = json.dumps(list(s.turn_ids))
    return (pk, s.old, s.new, turns, s.at.isoformat(), s.kind, s.recorded.isoformat())


def drop_facts(host: _Host, pk: int, ids: Sequence[str]) -> None:
    """Delete facts (links cascade), their vectors and every supersession left dangling."""
    _drop_vectors(host, pk, "fact", ids)
    host._write("DELETE FROM facts WHERE conv = ? AND id = ?", [(pk, i) for i in ids])
    host._exec(_DANGLING, (pk, pk, pk))


class SQLEdits:
    """Supersessions and single-record deletions of ``SQLStore``."""

    def supersessions(self: _Host, scope: Scope) -> list[Supersession]:
        """The scope's supersessions, in the order of the facts they replace."""
        return self._load(scope, "supersessions", lambda pk: _load_supersessions(self, pk))

    def put_supersessions(self: _Host, scope: Scope, items: Sequence[Supersession]) -> None:
        """Record supersessions (one replacing an old fact's earlier one)."""
        with self.transaction():
            pk = self._writing(scope)
            self._write(
                self._insert("supersessions", SUPERSESSION_COLUMNS, ("conv", "old")),
                [supersession_row(pk, s) for s in items],
            )

    def delete_facts(self: _Host, scope: Scope, ids: Sequence[str]) -> None:
        """Delete facts with their links, vectors and supersessions (a fact they replaced is
        current again)."""
        with self.transaction():
            drop_facts(self, self._writing(scope), ids)

    def forget_turn(
        self: _Host,
        scope: Scope,
        turn_id: str,
        redacted: tuple[Turn, np.ndarray, str] | None = None,
    ) -> TurnRemoval:
        """Delete turn ``turn_id``, or with ``redacted`` (the redacted turn, its vector and
        the embedder id) replace its text and vector, removing what was derived from it (see
        the module's docstring); one transaction."""
        with self.transaction():
            pk = self._writing(scope)
            citing = "SELECT episode FROM episode_turns WHERE conv = ? AND turn = ?"
            episodes = sorted({r[0] for r in self._query(citing, (pk, turn_id))})
            touched = {
                r[0]
                for r in self._query(
                    f"SELECT fact FROM fact_episodes WHERE conv = ? AND episode IN ({citing})",
                    (pk, pk, turn_id),
                )
            }
            self._write(
                "DELETE FROM episodes WHERE conv = ? AND id = ?", [(pk, e) for e in episodes]
            )
            _drop_vectors(self, pk, "episode", episodes)
            _drop_vectors(self, pk, "turn", [turn_id])  # a redacted turn gets a new one below
            drop_passages(self, pk, [turn_id])
            if redacted is None:
                self._exec("DELETE FROM turns WHERE conv = ? AND id = ?", (pk, turn_id))
            else:
                turn, vector, embedder = redacted
                self._check_vectors(1, vector, embedder)
                self._exec(
                    "UPDATE turns SET text = ?, tokens = ? WHERE conv = ? AND id = ?",
                    (turn.text, turn_row(pk, turn)[-1], pk, turn_id),
                )
                self._put_vectors(pk, "turn", [turn_id], vector)
            orphans = sorted(r[0] for r in self._query(ORPHANS, (pk, pk)))
            before = {s.old for s in _load_supersessions(self, pk)}
            _uncite(self, pk, turn_id)
            drop_facts(self, pk, orphans)
            after = {s.old for s in _load_supersessions(self, pk)}
        return TurnRemoval(
            tuple(episodes),
            tuple(orphans),
            tuple(sorted(touched - set(orphans))),
            tuple(sorted(before - after)),
        )


def _drop_vectors(host: _Host, pk: int, space: str, ids: Sequence[str]) -> None:
    """Delete the live and the staged vectors (a re-embedding under way) of records."""
    host._write(
        "DELETE FROM vectors WHERE conv = ? AND space IN (?, ?) AND id = ?",
        [(pk, space, PREFIX + space, i) for i in ids],
    )


def _uncite(host: _Host, pk: int, turn_id: str) -> None:
    """Remove ``turn_id`` from the turns supersessions cite; a build supersession left
    citing none goes."""
    for old, turns, kind in host._query(
        "SELECT old, turns, kind FROM supersessions WHERE conv = ?", (pk,)
    ):
        cited = json.loads(turns)
        if turn_id not in cited:
            continue
        left = [t for t in cited if t != turn_id]
        if not left and kind == "build":
            host._exec("DELETE FROM supersessions WHERE conv = ? AND old = ?", (pk, old))
        else:
            host._exec(
                "UPDATE supersessions SET turns = ? WHERE conv = ? AND old = ?",
                (json.dumps(left), pk, old),
            )


def _load_supersessions(host: _Host, pk: int) -> list[Supersession]:
    rows = host._query(
        "SELECT old, new, turns, at, kind, recorded FROM supersessions WHERE conv = ?", (pk,)
    )
    out = [
        Supersession(
            old,
            new,
            tuple(json.loads(turns)),
            datetime.fromisoformat(at),
            kind,
            datetime.fromisoformat(recorded),
        )
        for old, new, turns, at, kind, recorded in rows
    ]
    return sorted(out, key=lambda s: record_order(s.old))
