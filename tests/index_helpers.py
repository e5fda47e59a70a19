"""The bundled sample conversation in an in-memory store, with extra episodes and facts, as a
``SourceIndex`` (the fixture of the evidence and answer tests)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

from qemem.embed import HashEmbedder
from qemem.evidence import SourceIndex
from qemem.memory import Memory
from qemem.models import Episode, SemanticFact, search_text
from qemem.store import Scope, SQLiteStore


def sample_index(
    scope: Scope, episodes: Sequence[Episode] = (), facts: Sequence[SemanticFact] = ()
) -> SourceIndex:
    """The sample conversation ingested with the hash embedder, plus ``episodes`` and
    ``facts``, indexed for ``scope``."""
    store = SQLiteStore(":memory:")
    embedder = HashEmbedder()
    sample = resources.files("qemem.data").joinpath("sample.json")
    with resources.as_file(sample) as path:
        Memory(store, embedder).ingest(path)
    if episodes:
        store.add_episodes(
            scope, episodes, embedder.embed([search_text(e) for e in episodes]), embedder.id
        )
    if facts:
        store.put_facts(scope, facts, embedder.embed([search_text(f) for f in facts]), embedder.id)
    return SourceIndex(store, scope)
