"""Storing the standing instructions and preferences an ingest or an append finds by rule
(:mod:`qemem.ingest.standing`), in the transaction that stores their messages.

Their texts are embedded before the transaction (:func:`embed_standing`), so that no writer
waits for the embedder; inside it (:func:`store_standing`) they get the conversation's next
fact ids, and a statement the conversation already holds as a current standing fact is left
out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from qemem.build.pipeline import next_number
from qemem.ingest.standing import standing_facts
from qemem.models import SemanticFact, Turn
from qemem.store import MemoryStore, Scope

EmbedFacts = Callable[[Sequence[SemanticFact]], np.ndarray]
"""Passage vectors of facts (``Memory.embed_documents``)."""


def embed_standing(turns: Sequence[Turn], embed: EmbedFacts) -> dict[str, np.ndarray]:
    """The vectors of the standing facts ``turns`` state, by fact text (none without roles)."""
    facts = standing_facts(turns, (), 1)
    if not facts:
        return {}
    return dict(zip((f.content for f in facts), embed(facts), strict=True))


def store_standing(
    store: MemoryStore,
    scope: Scope,
    turns: Sequence[Turn],
    vectors: Mapping[str, np.ndarray],
    embed: EmbedFacts,
    embedder: str,
) -> list[SemanticFact]:
    """Store the standing facts of ``turns`` (just stored, inside the caller's transaction)
    that the conversation's current facts do not already state, with ``vectors`` embedded
    ahead (a fact missing from them is embedded here); return them."""
    if not any(t.role == "user" for t in turns):
        return []
    stored = store.facts(scope)
    replaced = {s.old for s in store.supersessions(scope)}
    current = [f for f in stored if f.id not in replaced]
    facts = standing_facts(turns, current, next_number(store, scope, "S"))
    if not facts:
        return facts
    missing = [f for f in facts if f.content not in vectors]
    fresh = dict(zip((f.content for f in missing), embed(missing), strict=True)) if missing else {}
    rows = np.stack(
        [vectors[f.content] if f.content in vectors else fresh[f.content] for f in facts]
    )
    store.put_facts(scope, facts, rows, embedder)
    return facts
