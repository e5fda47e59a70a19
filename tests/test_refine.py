"""Sufficiency-guided refinement: exclusion, merging and every termination reason."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from importlib import resources
from typing import Any

import pytest

from qemem.embed import HashEmbedder
from qemem.evidence import SourceIndex, build_evidence, merge_pools
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.models import Plan, Pool, PoolItem, Ref
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM

PLAN = Plan(
    question="What pottery pieces has Priya made?",
    need="Every pottery piece Priya made.",
    answer_type="list",
    aggregate=True,
    temporal=False,
)


@pytest.fixture(scope="module")
def index() -> SourceIndex:
    store = SQLiteStore(":memory:")
    sample = resources.files("qemem.data").joinpath("sample.json")
    with resources.as_file(sample) as path:
        Memory(store, HashEmbedder()).ingest(path)
    return SourceIndex(store, Scope("demo-1"))


def pool_of(index: SourceIndex, *turn_ids: str) -> Pool:
    items = []
    for tid in turn_ids:
        found = index.get(tid)
        assert found is not None
        items.append(PoolItem("turn", found.record))
    return Pool("demo-1", ["q"], turns=items)


def card(tid: str, quote: str) -> dict[str, Any]:
    return {"claim": f"Priya made something ({tid}).", "sources": [tid], "quote": quote}


class Constructor:
    """Scripted constructor: one output per call, recording the prompts it saw."""

    def __init__(self, *outputs: dict[str, Any] | str) -> None:
        self.outputs = list(outputs)
        self.prompts: list[str] = []

    def __call__(self, request: LLMRequest) -> dict[str, Any] | str:
        assert request.stage.startswith("construct")
        self.prompts.append(request.messages[-1].content)
        return self.outputs.pop(0)


class Retriever:
    """Scripted retriever: one pool per call, recording queries and exclusions."""

    def __init__(self, *pools: Pool) -> None:
        self.pools = list(pools)
        self.calls: list[tuple[list[str], set[Ref]]] = []

    def __call__(self, queries: Sequence[str], exclude: Collection[Ref]) -> Pool:
        self.calls.append((list(queries), set(exclude)))
        return self.pools.pop(0)


def T(tid: str) -> Ref:
    return Ref("turn", tid)


MUG = card("D1:5", "I ended up with a lopsided little mug")
BOWL = card("D3:9", "My last piece was a shallow bowl with a green glaze")
VASE = card("D4:12", "last weekend I made a tall vase at the studio")
NOT_YET = {"sufficient": False, "missing": "later pieces", "follow_up_queries": ["bowl", "vase"]}


def test_sufficient_first_round(index: SourceIndex) -> None:
    constructor = Constructor({"cards": [MUG], "sufficient": True})
    retriever = Retriever()
    evidence = build_evidence(
        LLMClient(OfflineLLM(constructor)), index, PLAN, pool_of(index, "D1:5"), retriever
    )
    assert evidence.termination == "sufficient"
    assert retriever.calls == []
    assert [c.matched_source for c in evidence.cards] == ["D1:5"]
    assert evidence.cards[0].verified
    assert len(evidence.rounds) == 1 and evidence.rounds[0].refs() == [T("D1:5")]


def test_refinement_excludes_examined_and_merges(index: SourceIndex) -> None:
    constructor = Constructor(
        {"cards": [MUG], **NOT_YET}, {"cards": [BOWL, MUG], "sufficient": True}
    )
    # the retriever returns one examined turn (D1:5) and one new one (D3:9)
    retriever = Retriever(pool_of(index, "D1:5", "D3:9"))
    evidence = build_evidence(
        LLMClient(OfflineLLM(constructor)), index, PLAN, pool_of(index, "D1:4", "D1:5"), retriever
    )
    assert evidence.termination == "sufficient"
    assert retriever.calls == [(["bowl", "vase"], {T("D1:4"), T("D1:5")})]
    # the second round sees only the new candidate and a summary of the cards so far
    assert "[D3:9]" in constructor.prompts[1] and "[D1:5]" not in constructor.prompts[1]
    assert "1. Priya made something (D1:5). (sources: D1:5)" in constructor.prompts[1]
    # merged: the existing card kept, the repeated one dropped
    assert [(c.matched_source, c.round) for c in evidence.cards] == [("D1:5", 0), ("D3:9", 1)]
    assert [r.refs() for r in evidence.rounds] == [[T("D1:4"), T("D1:5")], [T("D3:9")]]
    assert evidence.rounds[1].queries == ["bowl", "vase"]
    assert [i.id for i in evidence.pool.turns] == ["D1:4", "D1:5", "D3:9"]


def test_no_new_candidates(index: SourceIndex) -> None:
    constructor = Constructor({"cards": [MUG], **NOT_YET})
    retriever = Retriever(pool_of(index, "D1:5"))
    evidence = build_evidence(
        LLMClient(OfflineLLM(constructor)), index, PLAN, pool_of(index, "D1:5"), retriever
    )
    assert evidence.termination == "no_new_candidates"
    assert len(constructor.prompts) == 1 and len(retriever.calls) == 1


def test_no_query_to_run_means_no_new_candidates(index: SourceIndex) -> None:
    constructor = Constructor({"cards": [], "sufficient": False})
    retriever = Retriever()
    evidence = build_evidence(
        LLMClient(OfflineLLM(constructor)), index, PLAN, pool_of(index, "D1:5"), retriever
    )
    assert evidence.termination == "no_new_candidates"
    assert retriever.calls == []


def test_missing_is_the_query_without_follow_ups(index: SourceIndex) -> None:
    constructor = Constructor(
        {"cards": [], "sufficient": False, "missing": "the vase"}, {"cards": [], "sufficient": True}
    )
    retriever = Retriever(pool_of(index, "D4:12"))
    build_evidence(
        LLMClient(OfflineLLM(constructor)), index, PLAN, pool_of(index, "D1:5"), retriever
    )
    assert retriever.calls[0][0] == ["the vase"]


def test_round_budget(index: SourceIndex) -> None:
    constructor = Constructor(
        {"cards": [MUG], **NOT_YET}, {"cards": [BOWL], **NOT_YET}, {"cards": [VASE], **NOT_YET}
    )
    retriever = Retriever(pool_of(index, "D3:9"), pool_of(index, "D4:12"))
    evidence = build_evidence(
        LLMClient(OfflineLLM(constructor)), index, PLAN, pool_of(index, "D1:5"), retriever
    )
    assert evidence.termination == "round_budget"
    assert len(constructor.prompts) == 3
    assert retriever.calls[1][1] == {T("D1:5"), T("D3:9")}
    assert [c.matched_source for c in evidence.cards] == ["D1:5", "D3:9", "D4:12"]
    assert all(c.verified for c in evidence.cards)


def test_no_refinement_rounds(index: SourceIndex) -> None:
    constructor = Constructor({"cards": [MUG], **NOT_YET})
    retriever = Retriever()
    evidence = build_evidence(
        LLMClient(OfflineLLM(constructor)),
        index,
        PLAN,
        pool_of(index, "D1:5"),
        retriever,
        refine_rounds=0,
    )
    assert evidence.termination == "round_budget"
    assert retriever.calls == []


def test_degraded_refinement_round_keeps_cards(index: SourceIndex) -> None:
    constructor = Constructor({"cards": [MUG], **NOT_YET}, "garbage", "still garbage")
    retriever = Retriever(pool_of(index, "D3:9"))
    evidence = build_evidence(
        LLMClient(OfflineLLM(constructor)), index, PLAN, pool_of(index, "D1:5"), retriever
    )
    assert evidence.termination == "degraded: construct output invalid in round 1"
    assert evidence.degradations == ["construct output invalid in round 1"]
    assert [c.matched_source for c in evidence.cards] == ["D1:5"]
    assert evidence.rounds[1].degraded == "construct output invalid"


def test_merge_pools_orders_turns(index: SourceIndex) -> None:
    merged = merge_pools(index, pool_of(index, "D3:9", "D1:5"), pool_of(index, "D2:1", "D1:5"))
    assert [i.id for i in merged.turns] == ["D1:5", "D2:1", "D3:9"]
