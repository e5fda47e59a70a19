"""Edits of single records in the SQL stores: supersessions of facts, corrections by hand,
and forgetting one turn or one fact (``SQLEdits``, a mixin of :class:`qemem.store.sql.SQLStore`).

A turn is forgotten by deleting it or by redacting it (its text replaced by
:data:`~qemem.models.REDACTED`, re-embedded, its id and place kept); its passages (rows and
vectors) go either way. Either way every episode
citing it goes (its narrative was written from the turn), so do the history items stored
as it (:mod:`qemem.store.items`), a fact loses those episodes and the
turn itself from its provenance and goes when none is left (a fact written by hand never does:
its provenance is its correction), a build supersession loses the turn from the turns it
cites (and goes when none is left: no supersession without a cited turn), and so does a
correction (which stays).
Each edit is one transaction that gives the conversation a new version, so cached search
indexes reload. Forgetting a turn and deleting facts count as removals by hand
(:mod:`qemem.store.lives`): a build that started before one writes nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

import numpy as np

from qemem.models import REDACTED, SESSION_COUNTER, Correction, Supersession, Turn
from qemem.store.base import Scope, TurnRemoval, record_order
from qemem.store.dialect import Conflict
from qemem.store.items import ITEM_PREFIX
from qemem.store.lives import COUNT_REMOVAL
from qemem.store.passages import drop_passages
from qemem.store.rows import turn_row
from qemem.store.staged import PREFIX

T = TypeVar("T")
SUPERSESSION_COLUMNS = ("conv", "old", "new", "turns", "at", "kind", "recorded")
CORRECTION_COLUMNS = ("conv", "fact", "turns", "corrected_turns", "recorded")
CORRECTED = "SELECT fact FROM corrections WHERE conv = ?"
"""Facts written by hand: their provenance is their correction, not episodes."""
NOT_SUPERSEDED = (
    " AND NOT EXISTS (SELECT 1 FROM supersessions s WHERE s.conv = {table}.conv "
    "AND s.old = {table}.id)"
)
"""The condition (after a WHERE, ``{table}`` the alias of a facts or vectors row) that keeps
current facts only: a superseded fact is in no search index."""
NOT_REDACTED = " AND r.text <> '{}'".format(REDACTED.replace("'", "''"))
"""The condition (after a WHERE, ``r`` the alias of a turns row) that keeps turns that were
not redacted: a redacted turn is in no search index."""


def searchable(space: str) -> str:
    """The condition (after a WHERE, ``r`` the alias of the space's records) that keeps what
    search indexes hold: current facts and turns not redacted (every episode)."""
    if space == "fact":
        return NOT_SUPERSEDED.format(table="r")
    return NOT_REDACTED if space == "turn" else ""


ORPHANS = (
    "SELECT id FROM facts f WHERE conv = ? AND NOT EXISTS (SELECT 1 FROM "
    "fact_episodes l WHERE l.conv = f.conv AND l.fact = f.id) AND NOT EXISTS (SELECT 1 FROM "
    f"fact_turns r WHERE r.conv = f.conv AND r.fact = f.id) AND id NOT IN ({CORRECTED})"
)
"""Facts no episode and no turn supports (but those written by hand, whose source is their
correction)."""
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
    def _forgotten(self) -> None: ...
    def _load(self, scope: Scope, what: str, load: Callable[[int], T]) -> T: ...
    def _check_vectors(self, count: int, vectors: np.ndarray, embedder: str) -> None: ...
    def _put_vectors(
        self, pk: int, space: Any, ids: Sequence[str], vectors: np.ndarray
    ) -> None: ...


def supersession_row(pk: int, s: Supersession) -> tuple[object, ...]:
    """A ``supersessions`` row (``SUPERSESSION_COLUMNS``)."""
    turns = json.dumps(list(s.turn_ids))
    return (pk, s.old, s.new, turns, s.at.isoformat(), s.kind, s.recorded.isoformat())


def correction_row(pk: int, c: Correction) -> tuple[object, ...]:
    """A ``corrections`` row (``CORRECTION_COLUMNS``)."""
    return (
        pk,
        c.fact,
        json.dumps(list(c.turn_ids)),
        json.dumps(list(c.corrected_turns)),
        c.recorded.isoformat(),
    )


def drop_facts(host: _Host, pk: int, ids: Sequence[str]) -> None:
    """Delete facts (links cascade), their vectors and corrections, and every supersession
    left dangling."""
    _drop_vectors(host, pk, "fact", ids)
    rows = [(pk, i) for i in ids]
    host._write("DELETE FROM facts WHERE conv = ? AND id = ?", rows)
    host._write("DELETE FROM corrections WHERE conv = ? AND fact = ?", rows)
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

    def corrections(self: _Host, scope: Scope) -> list[Correction]:
        """The provenance of the scope's facts written by hand, in fact order."""
        return self._load(scope, "corrections", lambda pk: _load_corrections(self, pk))

    def put_corrections(self: _Host, scope: Scope, items: Sequence[Correction]) -> None:
        """Record the provenance of facts written by hand (replacing a fact's earlier one)."""
        with self.transaction():
            pk = self._writing(scope)
            self._write(
                self._insert("corrections", CORRECTION_COLUMNS, ("conv", "fact")),
                [correction_row(pk, c) for c in items],
            )

    def delete_facts(self: _Host, scope: Scope, ids: Sequence[str]) -> None:
        """Delete facts with their links, vectors and supersessions (a fact they replaced is
        current again)."""
        with self.transaction():
            pk = self._writing(scope)
            self._exec(COUNT_REMOVAL, (pk,))
            drop_facts(self, pk, ids)
            self._forgotten()

    def forget_turn(
        self: _Host,
        scope: Scope,
        turn_id: str,
        redacted: tuple[Turn, np.ndarray, str] | None = None,
    ) -> TurnRemoval:
        """Delete turn ``turn_id``, or with ``redacted`` (the redacted turn, its vector and
        the embedder id) replace its text and vector, removing what was derived from it (see
        the module's docstring); one transaction. A session a delete leaves without turns,
        episodes and facts is removed too (``_retire``)."""
        with self.transaction():
            pk = self._writing(scope)
            [(session,)] = self._query(
                "SELECT session FROM turns WHERE conv = ? AND id = ?", (pk, turn_id)
            )
            self._exec(COUNT_REMOVAL, (pk,))
            self._forgotten()
            citing = "SELECT episode FROM episode_turns WHERE conv = ? AND turn = ?"
            episodes = sorted({r[0] for r in self._query(citing, (pk, turn_id))})
            touched = {
                r[0]
                for r in self._query(
                    f"SELECT fact FROM fact_episodes WHERE conv = ? AND episode IN ({citing}) "
                    "UNION SELECT fact FROM fact_turns WHERE conv = ? AND turn = ?",
                    (pk, pk, turn_id, pk, turn_id),
                )
            }
            self._exec("DELETE FROM fact_turns WHERE conv = ? AND turn = ?", (pk, turn_id))
            items = self._query(
                "SELECT seq FROM items WHERE conv = ? AND turn = ? ORDER BY seq", (pk, turn_id)
            )
            self._exec("DELETE FROM items WHERE conv = ? AND turn = ?", (pk, turn_id))
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
            retired = () if redacted is not None else _retire(self, pk, int(session))
        return TurnRemoval(
            tuple(episodes),
            tuple(orphans),
            tuple(sorted(touched - set(orphans))),
            tuple(sorted(before - after)),
            retired,
            tuple(f"{ITEM_PREFIX}{int(r[0])}" for r in items),
        )


def _retire(host: _Host, pk: int, session: int) -> tuple[int, ...]:
    """Remove ``session`` when no turn, episode or fact is left in it, and raise the
    conversation's ``SESSION_COUNTER`` to its number (new sessions are numbered above it);
    the removed sessions' numbers."""
    held = host._query(
        "SELECT (SELECT count(*) FROM turns WHERE conv = ? AND session = ?) + "
        "(SELECT count(*) FROM episodes WHERE conv = ? AND session = ?) + "
        "(SELECT count(*) FROM facts WHERE conv = ? AND session = ?)",
        (pk, session) * 3,
    )
    if held[0][0]:
        return ()
    host._exec("DELETE FROM sessions WHERE conv = ? AND idx = ?", (pk, session))
    host._exec(
        "INSERT INTO id_counters (conv, prefix, value) VALUES (?, ?, ?) "
        "ON CONFLICT (conv, prefix) DO UPDATE SET value = excluded.value "
        "WHERE id_counters.value < excluded.value",
        (pk, SESSION_COUNTER, session),
    )
    return (session,)


def _drop_vectors(host: _Host, pk: int, space: str, ids: Sequence[str]) -> None:
    """Delete the live and the staged vectors (a re-embedding under way) of records."""
    host._write(
        "DELETE FROM vectors WHERE conv = ? AND space IN (?, ?) AND id = ?",
        [(pk, space, PREFIX + space, i) for i in ids],
    )


def _uncite(host: _Host, pk: int, turn_id: str) -> None:
    """Remove ``turn_id`` from the turns supersessions and corrections cite; a build
    supersession left citing none goes."""
    for fact, turns, corrected in host._query(
        "SELECT fact, turns, corrected_turns FROM corrections WHERE conv = ?", (pk,)
    ):
        cited, learned = json.loads(turns), json.loads(corrected)
        if turn_id in cited or turn_id in learned:
            host._exec(
                "UPDATE corrections SET turns = ?, corrected_turns = ? WHERE conv = ? AND fact = ?",
                (
                    json.dumps([t for t in cited if t != turn_id]),
                    json.dumps([t for t in learned if t != turn_id]),
                    pk,
                    fact,
                ),
            )
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


def _load_corrections(host: _Host, pk: int) -> list[Correction]:
    rows = host._query(
        "SELECT fact, turns, corrected_turns, recorded FROM corrections WHERE conv = ?", (pk,)
    )
    out = [
        Correction(
            fact, tuple(json.loads(turns)), tuple(json.loads(learned)), datetime.fromisoformat(at)
        )
        for fact, turns, learned, at in rows
    ]
    return sorted(out, key=lambda c: record_order(c.fact))
