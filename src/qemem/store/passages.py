"""The passages of long turns in the SQL stores (``SQLPassages``, a mixin of
:class:`qemem.store.sql.SQLStore`).

A turn longer than one passage is searched by its passages (:mod:`qemem.passages`): the
``passages`` table holds each passage's span and BM25 tokens, the ``vectors`` table its vector
under the space ``passage``, keyed by :func:`~qemem.models.passage_key`. A turn without
passages (a short one, or one stored before its store was reindexed) is searched whole. The
search index of the turn space therefore has one row per passage of a long turn and one per
other turn; a turn's passages go when the turn is deleted or redacted, and with its
conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

import numpy as np

from qemem.models import Span, Turn, passage_key, search_text
from qemem.store.base import Scope
from qemem.store.dialect import Conflict
from qemem.store.staged import PREFIX
from qemem.tokens import tokenize

T = TypeVar("T")
PASSAGE_COLUMNS = ("conv", "id", "turn", "start", "stop", "tokens")
PASSAGE_SPACE = "passage"
"""The space of passage vectors in the ``vectors`` table (not a search space of its own:
passages are searched as the turn space)."""


def turn_index(searchable: str) -> str:
    """The query of the rows of the turn space's search index of one conversation (its pk
    twice as parameters): every turn without passages, and every passage of the others (key,
    tokens, vector, session, position, start); ``searchable`` is the condition (after a WHERE,
    ``r`` the alias of the turns row) a turn must meet to be searched at all."""
    return (
        "SELECT r.id, r.tokens, v.vector, r.session, r.position, 0 FROM turns r "
        "JOIN vectors v ON v.conv = r.conv AND v.space = 'turn' AND v.id = r.id WHERE r.conv = ? "
        "AND NOT EXISTS (SELECT 1 FROM passages p WHERE p.conv = r.conv AND p.turn = r.id)"
        f"{searchable} UNION ALL "
        "SELECT p.id, p.tokens, v.vector, r.session, r.position, p.start FROM passages p "
        "JOIN turns r ON r.conv = p.conv AND r.id = p.turn "
        "JOIN vectors v ON v.conv = p.conv AND v.space = 'passage' AND v.id = p.id "
        f"WHERE p.conv = ?{searchable}"
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


def passage_row(pk: int, turn: Turn, span: Span) -> tuple[object, ...]:
    """A ``passages`` row (``PASSAGE_COLUMNS``) of passage ``span`` of ``turn``."""
    tokens = " ".join(tokenize(search_text(turn, span)))
    return (pk, passage_key(turn.id, span), turn.id, span[0], span[1], tokens)


def drop_passages(host: _Host, pk: int, turn_ids: Sequence[str]) -> None:
    """Delete the passages of turns ``turn_ids`` with their live and staged vectors."""
    of_turn = "SELECT id FROM passages WHERE conv = ? AND turn = ?"
    host._write(
        f"DELETE FROM vectors WHERE conv = ? AND space IN (?, ?) AND id IN ({of_turn})",
        [(pk, PASSAGE_SPACE, PREFIX + PASSAGE_SPACE, pk, t) for t in turn_ids],
    )
    host._write("DELETE FROM passages WHERE conv = ? AND turn = ?", [(pk, t) for t in turn_ids])


class SQLPassages:
    """The passages of long turns, for ``SQLStore``."""

    def put_passages(
        self: _Host,
        scope: Scope,
        turn_ids: Sequence[str],
        passages: Sequence[tuple[Turn, Span]],
        vectors: np.ndarray,
        embedder: str,
    ) -> None:
        """Replace the passages of turns ``turn_ids`` by ``passages`` (each a turn among them
        and a span of its text; ``vectors`` row-aligned), in one transaction."""
        with self.transaction():
            pk = self._writing(scope)
            drop_passages(self, pk, turn_ids)
            if not passages:
                return
            self._check_vectors(len(passages), vectors, embedder)
            rows = [passage_row(pk, turn, span) for turn, span in passages]
            self._write(self._insert("passages", PASSAGE_COLUMNS), rows)
            self._put_vectors(pk, PASSAGE_SPACE, [str(r[1]) for r in rows], vectors)

    def passages(self: _Host, scope: Scope) -> dict[str, list[Span]]:
        """The passages of the scope's turns that have them: turn id -> spans in text order."""
        return self._load(scope, "passages", lambda pk: _load_passages(self, pk))


def _load_passages(host: _Host, pk: int) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {}
    for turn, start, stop in host._query(
        "SELECT turn, start, stop FROM passages WHERE conv = ? ORDER BY turn, start", (pk,)
    ):
        out.setdefault(turn, []).append((int(start), int(stop)))
    return out
