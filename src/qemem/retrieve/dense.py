"""Dense-only retrieval of episodes and facts: the question's embedding against the store's
vectors, exact cosine, top-k per space (the retrieval of the ``nemori-baseline`` mode)."""

from __future__ import annotations

import numpy as np

from qemem.embed.base import Embedder
from qemem.embed.cache import query_cache
from qemem.errors import InputError
from qemem.models import Episode, Pool, PoolItem, Reason, SemanticFact, Space
from qemem.retrieve.index import search_index
from qemem.store.base import MemoryStore, Scope


def dense_pool(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    question: str,
    *,
    episodes: int,
    facts: int,
) -> Pool:
    """The ``episodes`` episodes and ``facts`` facts whose vectors are most cosine-similar to
    the question's (best first, ties by index order), and no turns. The question is embedded
    as it is (one query; no speaker stripping, no BM25, no provenance raise). Each item's
    score is its cosine, its reason its dense rank, its ``position`` the order the baseline's
    prompt lists it in (episodes first, then facts)."""
    question = " ".join(question.split())
    if not question:
        raise InputError("nothing to retrieve with: give a non-empty question")
    if episodes < 0 or facts < 0:
        raise InputError("the numbers of episodes and facts to retrieve must be at least 0")
    vector = query_cache.embed(embedder, [question])
    pool = Pool(scope.conversation, [question])
    pool.episodes = _top(store, scope, "episode", vector, episodes)
    pool.facts = _top(store, scope, "fact", vector, facts)
    for position, item in enumerate((*pool.episodes, *pool.facts)):
        item.position = position
    return pool


def _top(
    store: MemoryStore, scope: Scope, space: Space, vector: np.ndarray, k: int
) -> list[PoolItem]:
    """The ``k`` records of ``space`` nearest to ``vector`` as pool items, best first."""
    if k == 0:
        return []
    ranked = search_index(store, scope, space).dense(vector, k)[0]
    ids = [rid for rid, _ in ranked]
    fetched = store.episodes(scope, ids) if space == "episode" else store.facts(scope, ids)
    records: dict[str, Episode | SemanticFact] = {r.id: r for r in fetched}
    found = [(rid, cosine) for rid, cosine in ranked if rid in records]
    return [
        PoolItem(space, records[rid], cosine, [Reason("ranked", query=0, method="dense", rank=n)])
        for n, (rid, cosine) in enumerate(found, start=1)
    ]
