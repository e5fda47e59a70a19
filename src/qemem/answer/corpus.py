"""What the query-time method runs over: one conversation, or several of a namespace ranked
together (a user's threads).

A corpus gives the index of its records (:class:`~qemem.evidence.context.SourceIndex`; across
conversations the qualified one of :mod:`qemem.evidence.many`), the evidence pool for a plan
and the matched-context baseline's pool. Across conversations every space is ranked globally
as ``search_many`` ranks (:func:`~qemem.retrieve.across.fused_spaces_across`: each list
merged by score over the conversations, then RRF), and the usual per-space budgets, exposure
order and token cap then apply to that one ranking: a conversation whose hits are all weak
gets no candidates rather than a share.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from qemem.embed.base import Embedder
from qemem.evidence.context import SourceIndex
from qemem.evidence.many import ManyIndex, label
from qemem.models import Plan, Pool, PoolItem, Reason, Ref
from qemem.retrieve.across import fused_spaces_across, search_across
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.pool import (
    build_pool,
    dense_vectors,
    matched_pool,
    pool_from_fusion,
    pool_texts,
)
from qemem.store.base import MemoryStore, Scope


class Corpus(Protocol):
    """The records ``ask`` and ``context`` work on."""

    @property
    def index(self) -> SourceIndex: ...

    def pool(
        self,
        plan: Plan,
        config: RetrievalConfig | None,
        exclude: Collection[Ref] = (),
        queries: Sequence[str] | None = None,
    ) -> Pool:
        """The evidence pool for ``queries`` (default: the plan's) less ``exclude``."""
        ...

    def matched(self, question: str, size: int) -> Pool:
        """The matched-context baseline: the ``size`` best turns of plain hybrid search."""
        ...


@dataclass
class OneConversation:
    """One conversation's records (``build_pool``, ``matched_pool``)."""

    store: MemoryStore
    scope: Scope
    embedder: Embedder
    index: SourceIndex = field(init=False)

    def __post_init__(self) -> None:
        self.index = SourceIndex(self.store, self.scope)

    def pool(
        self,
        plan: Plan,
        config: RetrievalConfig | None,
        exclude: Collection[Ref] = (),
        queries: Sequence[str] | None = None,
    ) -> Pool:
        return build_pool(
            self.store,
            self.scope,
            self.embedder,
            plan,
            config=config,
            exclude=exclude,
            queries=queries,
        )

    def matched(self, question: str, size: int) -> Pool:
        return matched_pool(self.store, self.scope, self.embedder, question, size)


@dataclass
class ManyConversations:
    """Several conversations' records ranked together; pools of qualified records (see
    :mod:`qemem.evidence.many`)."""

    store: MemoryStore
    scopes: Mapping[str, Scope]
    embedder: Embedder
    index: ManyIndex = field(init=False)

    def __post_init__(self) -> None:
        self.index = ManyIndex(self.store, self.scopes)

    def pool(
        self,
        plan: Plan,
        config: RetrievalConfig | None,
        exclude: Collection[Ref] = (),
        queries: Sequence[str] | None = None,
    ) -> Pool:
        config = config or RetrievalConfig()
        texts = pool_texts(plan, queries)
        vectors = {
            cid: dense_vectors(self.embedder, texts, self.index.speakers(cid), config)
            for cid in self.scopes
        }
        users = self.index.user_turns if config.user_lists else None
        fused = fused_spaces_across(
            self.store,
            self.scopes,
            vectors,
            texts,
            depth=config.depth,
            rrf_k=config.rrf_k,
            user_turns=users,
        )
        labelled = {
            space: {label(cid, rid): score for (cid, rid), score in ranking.items()}
            for space, ranking in fused.items()
        }
        index = self.index
        pool = pool_from_fusion(
            "",
            texts,
            labelled,
            index.turns,
            {e.id: e for e in index.episodes},
            {f.id: f for f in index.facts},
            aggregate=plan.aggregate,
            config=config,
            exclude=exclude,
            passages=index.passages,
            temporal=plan.temporal,
        )
        pool.conversations = list(self.scopes)
        return pool

    def matched(self, question: str, size: int) -> Pool:
        hits = search_across(
            self.store, self.scopes, "turn", [question], self.embedder, k=max(0, size)
        )
        found = [(self.index.get(label(cid, hit.id)), hit) for cid, hit in hits]
        items = []
        for position, (located, hit) in enumerate((f, h) for f, h in found if f is not None):
            reasons = []
            for key, rank in hit.ranks.items():
                method, _, query = key.partition(":")
                reasons.append(Reason("ranked", query=int(query), method=method, rank=rank))
            items.append(PoolItem("turn", located.record, hit.score, reasons, position))
        order = {t.id: n for n, t in enumerate(self.index.turns)}
        turns = sorted(items, key=lambda i: order[i.id])
        return Pool("", [question], turns=turns, conversations=list(self.scopes))
