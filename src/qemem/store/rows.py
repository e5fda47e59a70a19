"""The rows of the record tables, as both SQL backends write them: column names and one row
builder per table (BM25 tokens are stored space-separated, times as ISO 8601 text)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from qemem.models import Episode, SemanticFact, Session, Space, Turn, search_text
from qemem.tokens import tokenize

Row = tuple[object, ...]

TABLES: dict[Space, str] = {"turn": "turns", "episode": "episodes", "fact": "facts"}
"""The table of each space's records."""
FIRST_TURN = (
    "COALESCE((SELECT min(t.position) FROM episode_turns l JOIN turns t ON t.conv = l.conv "
    "AND t.id = l.turn WHERE l.conv = r.conv AND l.episode = r.id), 0)"
)
"""The position of the first turn of episode ``r`` (episodes are ordered by it, per session)."""

SESSION_COLUMNS = ("conv", "idx", "key", "date_time")
TURN_COLUMNS = (
    "conv",
    "id",
    "session",
    "position",
    "speaker",
    "text",
    "timestamp",
    "role",
    "tokens",
)
EPISODE_COLUMNS = ("conv", "id", "session", "title", "content", "timestamp", "tokens")
FACT_COLUMNS = ("conv", "id", "content", "session", "kind", "tokens")
LINK_COLUMNS = {
    "episode_turns": ("conv", "episode", "turn", "ord"),
    "fact_episodes": ("conv", "fact", "episode", "ord"),
    "fact_turns": ("conv", "fact", "turn", "ord"),
}
"""The provenance links: an episode's turns, a fact's episodes and the turns a fact was read
from directly, ``ord`` in their order."""


def session_row(pk: int, s: Session) -> Row:
    """A ``sessions`` row (``SESSION_COLUMNS``); a session without a key is keyed by index."""
    return (pk, s.index, s.key or str(s.index), s.date_time.isoformat())


TURN_SELECT = "SELECT id, session, position, speaker, text, timestamp, role FROM turns"
"""The columns a :class:`~qemem.models.Turn` is read from (:func:`turn_of`)."""
IN_CHUNK = 500
"""The most values one ``IN (...)`` list holds (SQLite allows 32,766 parameters)."""


def turn_of(conversation: str, row: tuple[Any, ...]) -> Turn:
    """The turn of a ``TURN_SELECT`` row of ``conversation``."""
    rid, session, position, speaker, text, stamp, role = row
    when = datetime.fromisoformat(stamp)
    return Turn(rid, conversation, session, position, speaker, text, when, role)


def turn_order(turn: Turn) -> tuple[int, int]:
    """Conversation order: session, then position in it."""
    return turn.session, turn.position


def turn_row(pk: int, t: Turn) -> Row:
    """A ``turns`` row (``TURN_COLUMNS``)."""
    tokens = " ".join(tokenize(search_text(t)))
    stamp = t.timestamp.isoformat()
    return (pk, t.id, t.session, t.position, t.speaker, t.text, stamp, t.role, tokens)


def episode_row(pk: int, e: Episode) -> Row:
    """An ``episodes`` row (``EPISODE_COLUMNS``)."""
    tokens = " ".join(tokenize(search_text(e)))
    return (pk, e.id, e.session, e.title, e.content, e.timestamp.isoformat(), tokens)


def fact_row(pk: int, f: SemanticFact) -> Row:
    """A ``facts`` row (``FACT_COLUMNS``)."""
    return (pk, f.id, f.content, f.session, f.kind, " ".join(tokenize(search_text(f))))


def link_rows(pk: int, owner: str, targets: Iterable[str]) -> list[Row]:
    """The link rows (either link table) of ``owner`` to ``targets``, in their order."""
    return [(pk, owner, target, n) for n, target in enumerate(targets)]
