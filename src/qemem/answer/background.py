"""The answer prompt's background: the pool records the cards did not cite, best-ranked first,
within a token budget.

The constructor has read the whole pool and written cards for what bears on the question; the
background is the answerer's second look at what it passed over. Records are ranked by their
place in the pool's exposure order (:func:`~qemem.evidence.context.exposure_place`: turn hits,
episodes and facts interleaved; a follow-up round's candidates by their place in that round's
order; a turn that is only context of a candidate, or that an episode or fact exposes, with
that candidate), ties in the order given. The background is the longest prefix of that
ranking whose rendering stays within the budget, so a larger budget never shows less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from qemem.evidence.context import SourceIndex, exposure_place, format_memories
from qemem.llm.types import estimate_tokens
from qemem.models import Episode, Pool, SemanticFact, Space, Span, Turn


@dataclass(frozen=True)
class Background:
    """The background records by space, each in the order given to :func:`background`, and
    their listing as the answer prompt shows it."""

    episodes: list[Episode]
    facts: list[SemanticFact]
    turns: list[Turn]
    text: str


def _ranked(
    pool: Pool, episodes: Sequence[Episode], facts: Sequence[SemanticFact], turns: Sequence[Turn]
) -> list[Episode | SemanticFact | Turn]:
    """The records, best place first (ties: episodes, facts, turns, each in the order
    given)."""
    place = exposure_place(pool)
    items = {(item.space, item.id): item for item in pool.items()}
    records: list[tuple[Space, Episode | SemanticFact | Turn]] = [
        *(("episode", e) for e in episodes),
        *(("fact", f) for f in facts),
        *(("turn", t) for t in turns),
    ]
    ranked = sorted(records, key=lambda pair: place(items[(pair[0], pair[1].id)]))
    return [record for _, record in ranked]


def _listing(
    index: SourceIndex,
    chosen: Sequence[Episode | SemanticFact | Turn],
    shown: Sequence[str],
    passages: Mapping[str, Sequence[Span]] | None,
) -> Background:
    """``chosen`` by space, with their listing (:func:`format_memories`)."""
    episodes = [r for r in chosen if isinstance(r, Episode)]
    facts = [r for r in chosen if isinstance(r, SemanticFact)]
    turns = [r for r in chosen if isinstance(r, Turn)]
    text = format_memories(index, episodes, facts, turns, shown=shown, passages=passages)
    return Background(episodes, facts, turns, text)


def background(
    index: SourceIndex,
    pool: Pool,
    episodes: Sequence[Episode],
    facts: Sequence[SemanticFact],
    turns: Sequence[Turn],
    budget: int | None,
    *,
    shown: Sequence[str] = (),
    passages: Mapping[str, Sequence[Span]] | None = None,
) -> Background:
    """The records to list as background: all of them with ``budget`` None, else the longest
    best-ranked prefix (see the module docstring) whose listing, rendered as the answer prompt
    renders it (``shown``: the turn ids the prompt shows elsewhere; ``passages``: the long
    turns' pooled passages), takes at most ``budget`` tokens."""
    if budget is None:
        return _listing(index, [*episodes, *facts, *turns], shown, passages)
    ranked = _ranked(pool, episodes, facts, turns)
    kept = _listing(index, [], shown, passages)
    for n in range(1, len(ranked) + 1):
        trial = _listing(index, ranked[:n], shown, passages)
        if estimate_tokens(trial.text) > budget:
            break
        kept = trial
    return kept
