"""The initial evidence pool: multi-granular hybrid retrieval over episodes, facts and turns.

For every query, space and method (dense, BM25) a ranked list; per space, reciprocal rank
fusion; episodes optionally raised by the facts that cite them; per-space budgets. Turn hits,
episodes and facts are then interleaved by their rank within their space into one exposure
order: a turn hit exposes its same-session neighbours, an episode its turns, a fact the turns
it was read from and those of its episodes, each only what no earlier candidate exposed (its
cost). Every pool item carries the reasons it is there and every candidate its place in that
order. In a conversation with an assistant the user's messages are also ranked apart
(:mod:`qemem.retrieve.roles`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

import numpy as np

from qemem.embed.base import Embedder
from qemem.embed.cache import query_cache
from qemem.errors import InputError
from qemem.models import (
    SPACES,
    Episode,
    Exposure,
    Plan,
    Pool,
    PoolItem,
    Reason,
    Ref,
    SemanticFact,
    Space,
    Span,
    Turn,
    Unit,
    passage_key,
    split_key,
    unredacted,
    user_turns,
)
from qemem.passages import Units
from qemem.retrieve.bm25 import tokenize
from qemem.retrieve.budgets import RetrievalConfig, space_budgets, token_budgets
from qemem.retrieve.exposure import exposure_order, interleave
from qemem.retrieve.fusion import FusedScore, fuse_lists
from qemem.retrieve.index import search_index
from qemem.retrieve.query_rules import strip_speakers
from qemem.retrieve.roles import restricted_lists
from qemem.retrieve.search import hybrid_search, ranked_lists
from qemem.store.base import MemoryStore, Scope


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


def focus_turns(turn_ids: Sequence[str], turn_rank: Mapping[str, int], limit: int) -> list[str]:
    """The turns among ``turn_ids`` (an episode's) that the queries matched: those ranked by
    the turn fusion (``turn_rank``: id -> fused rank from 1), best first, at most ``limit``."""
    matched = sorted((turn_rank[t], t) for t in dict.fromkeys(turn_ids) if t in turn_rank)
    return [t for _, t in matched[:limit]]


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
    user_turns: Collection[str] = (),
) -> dict[Space, dict[str, FusedScore]]:
    """Per space, the RRF fusion of the dense and BM25 lists of every query (``texts``); all
    dense queries not in the query cache are embedded in one batch. With ``user_turns`` (the
    ids of the user's messages in a conversation with an assistant) and
    ``config.user_lists``, the turn space also fuses each list restricted to them
    (:mod:`qemem.retrieve.roles`)."""
    vectors = dense_vectors(embedder, texts, store.get_conversation(scope).speakers, config)
    tokens = [tokenize(q) for q in texts]
    fused: dict[Space, dict[str, FusedScore]] = {}
    for space in SPACES:
        lists = ranked_lists(store, scope, space, vectors, tokens, config.depth)
        if space == "turn" and config.user_lists and user_turns:
            index = search_index(store, scope, space)
            lists.update(restricted_lists(index, user_turns, vectors, tokens, config.depth))
        fused[space] = fuse_lists(lists, config.rrf_k)
    return fused


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
    passages: Mapping[str, Sequence[Span]] | None = None,
    temporal: bool = False,
    units: Units | None = None,
) -> Pool:
    """The pool from per-space fusions (pure: no store, no embedder).

    The turn fusion ranks units (:class:`~qemem.retrieve.exposure.Units`: a turn, or a
    passage of a long turn; ``passages`` gives the long turns' spans). Episodes get the
    provenance raise; each space keeps its count of candidates (widened by the plan's flags);
    candidates are interleaved by within-space rank (:func:`interleave`,
    ``config.weight_episodes``/``weight_facts`` against turns' 1) into the exposure order. A
    turn hit exposes its unit with ``config.context_window`` units each side in its session
    (each side within ``config.context_tokens``); an episode or fact exposes one unit of each
    turn of its episode(s), a fact also of each turn it was read from (a long turn's
    best-ranked passage), or with ``config.focus_turns`` those the queries matched with their
    windows. Each candidate costs the tokens of the units it newly exposes (and an episode or
    fact its own line), and the order is cut by the per-space token budgets and the cap
    (:func:`token_budgets`, strict per space). Pool turns carry why they are there and the
    passages shown; every candidate its ``position``. Only units of ``turns`` are ever
    exposed (the callers leave redacted turns out).
    """
    excluded = set(exclude)
    units = units or Units(turns, passages or {})
    ranked = _ranked_units(fused["turn"], units, excluded)
    raised = provenance_adjust(
        fused["episode"],
        fused["fact"],
        {fid: fact.episode_ids for fid, fact in facts.items()},
        config.provenance_weight,
    )
    budgets = space_budgets(config, aggregate, temporal)
    chosen: dict[Space, list[str]] = {
        "turn": [passage_key(*unit) for unit in ranked][: budgets["turn"]],
        "fact": _kept("fact", fused["fact"], facts, excluded)[: budgets["fact"]],
        "episode": _kept("episode", raised, episodes, excluded)[: budgets["episode"]],
    }
    weights: dict[Space, float] = {
        "turn": 1.0,
        "fact": config.weight_facts,
        "episode": config.weight_episodes,
    }
    exposes, own = _exposures(chosen, episodes, facts, units, ranked, config)
    for candidate, found in exposes.items():
        exposes[candidate] = [u for u in found if not _left_out(u, excluded)]
    budgeted = token_budgets(config, aggregate, temporal)
    order = exposure_order(interleave(chosen, weights), exposes, units.cost, budgeted, own)
    pool = _pool(conversation, queries, order, fused, raised, turns, episodes, facts)
    pool.order = order
    return pool


def _kept(
    space: Space, ids: Iterable[str], known: Collection[str], excluded: Collection[Ref]
) -> list[str]:
    """The ids among ``ids`` (in their order) of records ``known`` holds and ``excluded`` does
    not name."""
    return [r for r in ids if r in known and Ref(space, r) not in excluded]


def _exposures(
    chosen: Mapping[Space, Sequence[str]],
    episodes: Mapping[str, Episode],
    facts: Mapping[str, SemanticFact],
    units: Units,
    ranked: Mapping[Unit, int],
    config: RetrievalConfig,
) -> tuple[dict[tuple[Space, str], list[Unit]], dict[tuple[Space, str], int]]:
    """What each chosen candidate exposes (a turn hit its window, an episode or fact its
    member units: :func:`_member_units`) and the tokens of an episode's or fact's own line."""
    window, tokens = config.context_window, config.context_tokens
    exposes: dict[tuple[Space, str], list[Unit]] = {
        ("turn", key): units.window(split_key(key), window, tokens) for key in chosen["turn"]
    }
    own: dict[tuple[Space, str], int] = {}
    for space in ("episode", "fact"):
        for rid in chosen[space]:
            record: Episode | SemanticFact = episodes[rid] if space == "episode" else facts[rid]
            own[(space, rid)] = _line_tokens(record)
            exposes[(space, rid)] = _member_units(record, episodes, units, ranked, config)
    return exposes, own


def _ranked_units(
    fused: Mapping[str, FusedScore], units: Units, excluded: Collection[Ref]
) -> dict[Unit, int]:
    """The units the turn fusion ranks (keys of :func:`~qemem.models.passage_key`), those of
    the conversation and not excluded, each with its rank from 1, best first."""
    ranked: dict[Unit, int] = {}
    for key in fused:
        unit = split_key(key)
        if unit in units.index and not _left_out(unit, excluded):
            ranked[unit] = len(ranked) + 1
    return ranked


def _left_out(unit: Unit, excluded: Collection[Ref]) -> bool:
    """Whether ``excluded`` holds the unit's turn, or the unit's passage."""
    whole = Ref("turn", unit[0])
    return whole in excluded or (
        unit[1] is not None and Ref("turn", unit[0], span=unit[1]) in excluded
    )


def _line_tokens(record: Episode | SemanticFact) -> int:
    """The tokens of an episode's or fact's own line in a prompt (an episode by its title:
    its turns are shown)."""
    if isinstance(record, Episode):
        return math.ceil(len(f"[{record.id}] {record.title} (its turns are shown)") / 4)
    return math.ceil(len(f"[{record.id}] {record.content}") / 4)


def _member_units(
    record: Episode | SemanticFact,
    episodes: Mapping[str, Episode],
    units: Units,
    ranked: Mapping[Unit, int],
    config: RetrievalConfig,
) -> list[Unit]:
    """The units an episode exposes, or a fact: the turns it was read from directly, then
    those of its episodes (see :func:`pool_from_fusion`); turns the conversation does not
    hold are skipped."""
    members = (
        record.turn_ids
        if isinstance(record, Episode)
        else [
            *record.turn_ids,
            *(t for e in record.episode_ids if e in episodes for t in episodes[e].turn_ids),
        ]
    )
    known = [t for t in dict.fromkeys(members) if t in units.of_turn]
    if config.focus_turns is None:
        return [units.representative(t, ranked) for t in known]
    turn_rank: dict[str, int] = {}
    for (tid, _), rank in ranked.items():
        turn_rank.setdefault(tid, rank)
    focus = focus_turns(known, turn_rank, config.focus_turns)
    return list(
        dict.fromkeys(
            u
            for t in focus
            for u in units.window(units.representative(t, ranked), config.focus_window)
        )
    )


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
    conversation order, each with every candidate that exposes it and the passages shown."""
    pool = Pool(conversation, queries)
    by_id = {t.id: t for t in turns}
    exposed: dict[str, PoolItem] = {}
    spans: dict[str, list[Span]] = {}
    position: dict[str, int] = {}
    for n, item in enumerate(order):
        if item.space == "turn":
            position.setdefault(split_key(item.id)[0], n)
    for n, item in enumerate(order):
        if item.space == "episode":
            raise_ = raised[item.id]
            pool.episodes.append(
                PoolItem("episode", episodes[item.id], raise_.score, raise_.reasons(), n)
            )
        elif item.space == "fact":
            fact = fused["fact"][item.id]
            pool.facts.append(PoolItem("fact", facts[item.id], fact.score, fact.reasons(), n))
        via = split_key(item.id)[0]
        for tid, span in item.units:
            if span is not None:
                spans.setdefault(tid, []).append(span)
            if tid not in exposed:
                entry = fused["turn"].get(passage_key(tid, span))
                hit = position.get(tid)
                reasons = entry.reasons() if entry and hit is not None else []
                exposed[tid] = PoolItem(
                    "turn", by_id[tid], entry.score if entry else 0.0, reasons, hit
                )
            reason = _exposed_by(item.space, via, tid)
            if reason is not None and reason not in exposed[tid].reasons:
                exposed[tid].reasons.append(reason)
    for tid, found in spans.items():
        exposed[tid].passages = sorted(found)
    pool.turns = [exposed[t.id] for t in turns if t.id in exposed]
    return pool


def _exposed_by(space: Space, via: str, turn_id: str) -> Reason | None:
    """Why a candidate of ``space`` (``via``: its id, a turn hit's turn id) exposes a turn:
    as context of a turn hit, as provenance of an episode or fact; None for the hit's own
    turn."""
    if space != "turn":
        return Reason("provenance", via=via)
    return None if via == turn_id else Reason("context", via=via)


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
    turns = unredacted(store.turns(scope))
    fused = fused_spaces(store, scope, embedder, texts, config, user_turns(turns))
    return pool_from_fusion(
        scope.conversation,
        texts,
        fused,
        turns,
        {e.id: e for e in store.episodes(scope)},
        {f.id: f for f in store.facts(scope)},
        aggregate=plan.aggregate,
        config=config,
        exclude=exclude,
        passages=store.passages(scope),
        temporal=plan.temporal,
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
