from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from qemem.embed.base import HashEmbedder
from qemem.errors import InputError
from qemem.memory import Memory
from qemem.models import Episode, Exposure, Plan, Reason, Ref, SemanticFact, Turn, passage_key
from qemem.passages import Units
from qemem.retrieve.budgets import RetrievalConfig, round_half_up, space_budgets, token_budgets
from qemem.retrieve.exposure import Budgets, exposure_order, interleave
from qemem.retrieve.pool import (
    FusedScore,
    build_pool,
    focus_turns,
    fuse_lists,
    pool_from_fusion,
    provenance_adjust,
)
from qemem.store.sqlite import SQLiteStore

SAMPLE = Path(__file__).parents[1] / "src" / "qemem" / "data" / "sample.json"
WHEN = datetime(2024, 3, 14, 19, 15)


def test_rrf_sums_reciprocal_ranks_and_absent_adds_nothing() -> None:
    fused = fuse_lists({(0, "dense"): ["a", "b", "c"], (0, "bm25"): ["b", "d"]}, k=60)
    assert list(fused) == ["b", "a", "d", "c"]
    assert fused["b"].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"].score == pytest.approx(1 / 61)
    assert fused["d"].score == pytest.approx(1 / 62)
    assert fused["c"].score == pytest.approx(1 / 63)
    assert fused["a"].ranks == [(0, "dense", 1)]
    assert fused["b"].ranks == [(0, "dense", 2), (0, "bm25", 1)]
    assert fused["b"].reasons()[1] == Reason("ranked", query=0, method="bm25", rank=1)


def test_provenance_adjustment_raises_cited_episodes() -> None:
    episodes = {
        "E1": FusedScore(0.04, [(0, "dense", 1)]),
        "E2": FusedScore(0.02, [(0, "dense", 2)]),
    }
    facts = {"S1": FusedScore(0.02, []), "S2": FusedScore(0.01, [])}
    citations = {"S1": ("E2", "E2"), "S2": ("E3",), "S9": ("E1",)}
    out = provenance_adjust(episodes, facts, citations, 0.5)
    assert list(out) == ["E1", "E2", "E3"]
    assert out["E1"].score == pytest.approx(0.04)
    assert out["E2"].score == pytest.approx(0.03)  # cited twice by one fact counts once
    assert out["E3"].score == pytest.approx(0.005)  # only a fact points at it
    assert out["E2"].via == ["S1"] and out["E3"].via == ["S2"]
    assert Reason("provenance", via="S1") in out["E2"].reasons()
    assert episodes["E2"].score == 0.02  # inputs untouched
    assert {k: v.score for k, v in provenance_adjust(episodes, facts, citations, 0).items()} == {
        "E1": 0.04,
        "E2": 0.02,
    }


def test_budgets_with_and_without_aggregate() -> None:
    config = RetrievalConfig(budget_episodes=8, budget_facts=15, budget_turns=40)
    assert space_budgets(config, False) == {"episode": 8, "fact": 15, "turn": 40}
    assert space_budgets(config, True) == {"episode": 12, "fact": 23, "turn": 60}  # half up
    doubled = RetrievalConfig(aggregate_multiplier=2.0, budget_turns=40)
    assert space_budgets(doubled, True)["turn"] == 80
    assert space_budgets(RetrievalConfig(budget_turns=None), True)["turn"] is None


def test_token_budgets_widen_per_space_and_cap_the_whole() -> None:
    config = RetrievalConfig(
        budget_tokens=1000,
        budget_tokens_episodes=301,
        budget_tokens_facts=None,
        max_tokens=2000,
        temporal_multiplier=1.2,
    )
    assert token_budgets(config, False) == Budgets(
        {"turn": 1000, "episode": 301, "fact": None}, 2000
    )
    assert token_budgets(config, True).spaces == {"turn": 1500, "episode": 452, "fact": None}
    assert token_budgets(config, False, temporal=True).spaces["turn"] == 1200
    assert token_budgets(config, True, temporal=True).spaces["turn"] == 1500  # the larger
    assert token_budgets(config, True).total == 2000  # the cap is not widened


def _turn(tid: str, session: int, position: int) -> Turn:
    return Turn(tid, "c", session, position, "A", tid, WHEN)


def test_round_half_up() -> None:
    assert [round_half_up(x) for x in (22.5, 23.5, 0.5, 2.49, 3.0)] == [23, 24, 1, 2, 3]


def test_windows_count_units_and_stay_in_session() -> None:
    turns = [_turn(f"a{i}", 1, i) for i in range(4)] + [_turn(f"b{i}", 2, i) for i in range(3)]
    units = Units(turns, {})
    assert units.window(("a3", None), 2) == [("a1", None), ("a2", None), ("a3", None)]
    assert units.window(("b0", None), 2) == [("b0", None), ("b1", None), ("b2", None)]
    assert units.window(("a1", None), 0) == [("a1", None)]
    long = Units(turns, {"a2": [(0, 1), (1, 2), (2, 3)]})  # a2 is three passages
    assert long.window(("a2", (1, 2)), 1) == [("a2", (0, 1)), ("a2", (1, 2)), ("a2", (2, 3))]
    assert long.window(("a1", None), 1) == [("a0", None), ("a1", None), ("a2", (0, 1))]
    assert long.representative("a2", {("a2", (2, 3)): 4, ("a2", (1, 2)): 9}) == ("a2", (2, 3))
    assert long.representative("a2", {}) == ("a2", (0, 1))  # none ranked: the first
    assert long.representative("a1", {}) == ("a1", None)


def test_a_token_bounded_window_stops_each_side_before_a_long_neighbour() -> None:
    turns = [
        Turn("u1", "c", 1, 0, "User", "x" * 40, WHEN),  # 10 tokens
        Turn("a1", "c", 1, 1, "Assistant", "y" * 4000, WHEN),  # 1,000 tokens
        Turn("u2", "c", 1, 2, "User", "z" * 80, WHEN),  # 20 tokens
        Turn("u3", "c", 1, 3, "User", "w" * 80, WHEN),
        Turn("u4", "c", 1, 4, "User", "v" * 80, WHEN),
    ]
    units = Units(turns, {})
    assert units.window(("u3", None), 2, 100) == [("u2", None), ("u3", None), ("u4", None)]
    assert units.window(("u2", None), 2, 100) == [("u2", None), ("u3", None), ("u4", None)]
    assert units.window(("u3", None), 2, 30) == [("u2", None), ("u3", None), ("u4", None)]
    assert units.window(("u3", None), 2, 19) == [("u3", None)]  # each neighbour costs 20
    assert units.window(("u2", None), 2, None) == [(t.id, None) for t in turns[:5]]
    assert units.window(("a1", None), 2, 30) == [("u1", None), ("a1", None), ("u2", None)]


def test_interleave_by_within_space_rank() -> None:
    rankings = {"turn": ["t1", "t2", "t3", "t4"], "fact": ["s1", "s2"], "episode": ["e1"]}
    assert interleave(rankings, {"turn": 1, "fact": 1, "episode": 1}) == [
        ("turn", "t1"),
        ("fact", "s1"),
        ("episode", "e1"),
        ("turn", "t2"),
        ("fact", "s2"),
        ("turn", "t3"),
        ("turn", "t4"),
    ]
    half = interleave(rankings, {"turn": 1, "fact": 0.5})  # episodes left out
    assert half == [
        ("turn", "t1"),
        ("turn", "t2"),
        ("fact", "s1"),
        ("turn", "t3"),
        ("turn", "t4"),
        ("fact", "s2"),
    ]


def test_focus_turns_are_the_matched_turns_best_first() -> None:
    rank = {"D1:4": 9, "D1:2": 3, "D2:1": 1}
    assert focus_turns(["D1:1", "D1:2", "D1:3", "D1:4"], rank, 2) == ["D1:2", "D1:4"]
    assert focus_turns(["D1:1", "D1:2", "D1:4"], rank, 1) == ["D1:2"]
    assert focus_turns(["D1:1"], rank, 3) == []  # nothing matched: nothing exposed


def test_exposure_order_deduplicates_and_cuts_each_space_at_its_budget() -> None:
    a, b, c, d, e = ((t, None) for t in "abcde")
    exposes = {
        ("turn", "a"): [a, b],
        ("episode", "E1"): [b, c],
        ("fact", "S1"): [d],
        ("turn", "t2"): [e],
    }
    order = [("turn", "a"), ("episode", "E1"), ("fact", "S1"), ("turn", "t2")]
    assert exposure_order(order, exposes) == [  # type: ignore[arg-type]
        Exposure("turn", "a", (a, b)),
        Exposure("episode", "E1", (c,)),
        Exposure("fact", "S1", (d,)),
        Exposure("turn", "t2", (e,)),
    ]
    cost = {a: 10, b: 10, c: 30, d: 5, e: 1}
    own = {("episode", "E1"): 2}

    def cut(budgets: Budgets) -> list[str]:
        return [x.id for x in exposure_order(order, exposes, cost, budgets, own)]  # type: ignore[arg-type]

    assert cut(Budgets({"turn": 21, "episode": 31})) == ["a", "S1", "t2"]  # E1 costs 32
    assert cut(Budgets({"turn": 21, "episode": 32})) == ["a", "E1", "S1", "t2"]
    assert cut(Budgets({"turn": 19})) == ["E1", "S1"]  # the turn space closes at its first
    assert cut(Budgets({}, total=49)) == ["a"]  # the cap ends the order: E1 would make 52


def test_pool_from_fusion_exposes_focused_turns_with_positions() -> None:
    turns = [_turn(f"D1:{i}", 1, i) for i in range(1, 9)]
    episodes = {
        "E1": Episode("E1", "c", 1, "t", "x", WHEN, ("D1:1", "D1:2", "D1:3")),
        "E2": Episode("E2", "c", 1, "t", "y", WHEN, ("D1:6", "D1:7", "D1:8")),
    }
    facts = {"S1": SemanticFact("S1", "c", "f", 1, ("E2",))}
    fused = {
        "turn": fuse_lists({(0, "dense"): ["D1:2", "D1:7", "D1:1"]}),
        "episode": fuse_lists({(0, "dense"): ["E1"]}),
        "fact": fuse_lists({(0, "dense"): ["S1"]}),
    }
    config = RetrievalConfig(
        budget_turns=1,
        context_window=0,
        focus_turns=1,
        focus_window=0,
        weight_episodes=1,
        weight_facts=1,
        provenance_weight=0.5,
    )
    pool = pool_from_fusion(
        "c", ["q"], fused, turns, episodes, facts, aggregate=False, config=config
    )
    assert [(i.id, i.position) for i in pool.turns] == [("D1:2", 0), ("D1:7", None)]
    assert [(i.id, i.position) for i in pool.facts] == [("S1", 1)]
    # E1 matched directly, E2 through the fact citing it; both show turns already exposed
    assert [(i.id, i.position) for i in pool.episodes] == [("E1", 2), ("E2", 3)]
    assert Reason("provenance", via="S1") in pool.turns[1].reasons
    tight = pool_from_fusion(
        "c",
        ["q"],
        fused,
        turns,
        episodes,
        facts,
        aggregate=False,
        config=RetrievalConfig(budget_turns=1, context_window=2, budget_tokens=4),
    )
    assert [i.id for i in tight.turns] == ["D1:1", "D1:2", "D1:3", "D1:6", "D1:7", "D1:8"]
    assert tight.order[0].space == "episode"  # the first window would cost 4 x 2 tokens
    capped = pool_from_fusion(
        "c",
        ["q"],
        fused,
        turns,
        episodes,
        facts,
        aggregate=False,
        config=RetrievalConfig(budget_turns=1, context_window=2, max_tokens=7),
    )
    assert capped.turns == [] and capped.order == []
    whole = pool_from_fusion(
        "c",
        ["q"],
        fused,
        turns,
        episodes,
        facts,
        aggregate=False,
        config=RetrievalConfig(budget_turns=1, context_window=0),  # episodes expose all turns
    )
    assert [i.id for i in whole.turns] == ["D1:1", "D1:2", "D1:3", "D1:6", "D1:7", "D1:8"]
    assert [(i.id, i.position) for i in whole.episodes] == [("E1", 1)]  # place 1 / 0.75
    assert [(i.id, i.position) for i in whole.facts] == [("S1", 2)]  # place 1 / 0.5: E2's turns
    assert Reason("provenance", via="E1") in whole.turns[0].reasons


def test_config_validation() -> None:
    with pytest.raises(InputError):
        RetrievalConfig(rrf_k=0)
    with pytest.raises(InputError):
        RetrievalConfig(depth=0)
    with pytest.raises(InputError):
        RetrievalConfig(budget_tokens=-1)
    with pytest.raises(InputError):
        RetrievalConfig(temporal_multiplier=0.5)
    with pytest.raises(InputError):
        RetrievalConfig(focus_turns=0)


@pytest.fixture(scope="module")
def memory() -> Memory:
    mem = Memory(SQLiteStore(":memory:"), HashEmbedder())
    mem.ingest(SAMPLE)
    return mem


def _plan(question: str, *queries: str, aggregate: bool = False) -> Plan:
    return Plan(question, question, "description", aggregate, False, tuple(queries))


def test_pool_turns_only_with_reasons_and_exclusion(memory: Memory) -> None:
    scope = memory.scope("demo-1")
    config = RetrievalConfig(budget_turns=3, context_window=1)
    plan = _plan("Which pottery pieces did Priya make?", "lopsided mug", "tall vase")
    pool = build_pool(memory.store, scope, memory.embedder, plan, config=config)
    assert pool.queries == plan.query_set
    assert pool.episodes == [] and pool.facts == []  # no episodes or facts built
    order = [t.id for t in memory.turns("demo-1")]
    ids = [item.id for item in pool.turns]
    assert ids == sorted(ids, key=order.index)  # conversation order
    hits = [i for i in pool.turns if any(r.kind == "ranked" for r in i.reasons)]
    assert len(hits) == 3
    for item in pool.turns:
        for reason in item.reasons:
            if reason.kind == "ranked":
                assert reason.method in ("dense", "bm25") and reason.query in (0, 1, 2)
                assert reason.rank is not None and reason.rank >= 1
            else:
                assert reason.kind == "context" and reason.via in {h.id for h in hits}
    assert "D1:5" in ids  # the mug, found by BM25 on "lopsided mug"
    excluded = {Ref("turn", "D1:5"), Ref("turn", "D4:12"), Ref("turn", "D1:4")}
    again = build_pool(memory.store, scope, memory.embedder, plan, config=config, exclude=excluded)
    assert not set(again.refs()) & excluded
    assert len([i for i in again.turns if i.reasons and i.reasons[0].kind == "ranked"]) == 3


def test_pool_provenance_over_episodes_and_facts() -> None:
    mem = Memory(SQLiteStore(":memory:"), HashEmbedder())
    mem.ingest(SAMPLE)
    scope = mem.scope("demo-1")
    plan = _plan("Which marathon did Tomas run?")
    before = build_pool(mem.store, scope, mem.embedder, plan)
    assert before.episodes == [] and before.facts == []
    turns = {t.id: t for t in mem.turns("demo-1")}
    episodes = [
        Episode("E1", "demo-1", 1, "Pottery class", "Priya tried a wheel.", WHEN, ("D1:3", "D1:5")),
        Episode("E2", "demo-1", 5, "Catching up", "They chatted.", WHEN, ("D5:1", "D5:2")),
    ]
    facts = [
        SemanticFact("S1", "demo-1", "Tomas ran the Riverside Half Marathon.", 5, ("E2",)),
        SemanticFact("S2", "demo-1", "Priya made a lopsided mug.", 1, ("E1",)),
    ]
    mem.store.add_episodes(scope, episodes, mem.embed_documents(episodes), mem.embedder.id)
    mem.store.put_facts(scope, facts, mem.embed_documents(facts), mem.embedder.id)
    raise_ = RetrievalConfig(provenance_weight=0.5)
    pool = build_pool(mem.store, scope, mem.embedder, plan, config=raise_)  # cache sees the write
    assert pool.facts[0].id == "S1"
    e2 = next(e for e in pool.episodes if e.id == "E2")
    assert Reason("provenance", via="S1") in e2.reasons
    assert pool.episodes[0].id == "E2"  # raised above E1 by the fact citing it
    assert all(t.id in turns for t in (i.record for i in pool.turns))
    off = build_pool(
        mem.store, scope, mem.embedder, plan, config=RetrievalConfig(provenance_weight=0.0)
    )
    assert all(r.kind == "ranked" for e in off.episodes for r in e.reasons)
    excluded = build_pool(
        mem.store,
        scope,
        mem.embedder,
        plan,
        config=raise_,
        exclude={Ref("episode", "E2"), Ref("fact", "S1")},
    )
    assert "E2" not in {e.id for e in excluded.episodes}
    assert "S1" not in {f.id for f in excluded.facts}


def test_empty_query_is_refused(memory: Memory) -> None:
    with pytest.raises(InputError):
        build_pool(memory.store, memory.scope("demo-1"), memory.embedder, _plan("  "))


def test_a_long_turn_is_ranked_and_shown_by_its_passages() -> None:
    turns = [_turn("D1:1", 1, 1), _turn("D1:2", 1, 2), _turn("D1:3", 1, 3)]
    long = Turn("D1:2", "c", 1, 2, "A", "one. " * 20 + "two. " * 20 + "three. " * 20, WHEN)
    turns[1] = long
    spans = [(0, 99), (100, 199), (200, 339)]
    first, _, third = (passage_key("D1:2", s) for s in spans)
    fused = {
        "turn": fuse_lists({(0, "dense"): [third, "D1:3", first]}),
        "episode": fuse_lists({(0, "dense"): ["E1"]}),
        "fact": fuse_lists({}),
    }
    episodes = {"E1": Episode("E1", "c", 1, "t", "x", WHEN, ("D1:1", "D1:2"))}
    config = RetrievalConfig(budget_turns=2, context_window=0, weight_episodes=1)
    pool = pool_from_fusion(
        "c",
        ["q"],
        fused,
        turns,
        episodes,
        {},
        aggregate=False,
        config=config,
        passages={"D1:2": spans},
    )
    assert [e.units for e in pool.order] == [
        (("D1:2", (200, 339)),),  # the best passage, not the whole reply
        (("D1:1", None),),  # the episode: D1:1 whole, D1:2 by its best passage (shown)
        (("D1:3", None),),
    ]
    assert [(i.id, i.passages) for i in pool.turns] == [
        ("D1:1", None),
        ("D1:2", [(200, 339)]),
        ("D1:3", None),
    ]
    assert Ref("turn", "D1:2", span=(200, 339)) in pool.refs()
    window = pool_from_fusion(
        "c",
        ["q"],
        fused,
        turns,
        {},
        {},
        aggregate=False,
        config=RetrievalConfig(budget_turns=1, context_window=1),
        passages={"D1:2": spans},
    )
    assert window.turns[0].passages == [(100, 199), (200, 339)]  # one passage each side
    assert window.turns[-1].id == "D1:3" and window.turns[-1].reasons == [
        Reason("context", via="D1:2")
    ]
    again = pool_from_fusion(
        "c",
        ["q"],
        fused,
        turns,
        {},
        {},
        aggregate=False,
        config=RetrievalConfig(budget_turns=2, context_window=0),
        passages={"D1:2": spans},
        exclude={Ref("turn", "D1:2", span=(200, 339))},
    )
    assert [(i.id, i.passages) for i in again.turns] == [("D1:2", [(0, 99)]), ("D1:3", None)]


def test_a_fact_read_from_a_message_exposes_that_message() -> None:
    """A standing instruction the ingest's rules read from one message has no episode: its
    turn is its provenance, and the pool shows it (before, such a fact exposed nothing)."""
    turns = [_turn(f"D1:{i}", 1, i) for i in range(1, 7)]
    episodes = {"E1": Episode("E1", "c", 1, "t", "x", WHEN, ("D1:5", "D1:6"))}
    facts = {
        "S1": SemanticFact("S1", "c", "Always use tabs.", 1, (), "instruction", ("D1:2",)),
        "S2": SemanticFact("S2", "c", "Likes tea.", 1, ("E1",), "preference", ("D1:3",)),
    }
    fused = {
        "turn": fuse_lists({}),
        "episode": fuse_lists({}),
        "fact": fuse_lists({(0, "dense"): ["S1", "S2"]}),
    }
    config = RetrievalConfig(context_window=0)
    pool = pool_from_fusion(
        "c", ["q"], fused, turns, episodes, facts, aggregate=False, config=config
    )
    assert [i.id for i in pool.facts] == ["S1", "S2"]
    assert [i.id for i in pool.turns] == ["D1:2", "D1:3", "D1:5", "D1:6"]
    assert Reason("provenance", via="S1") in pool.turns[0].reasons
    assert [u for e in pool.order for u in e.units] == [
        ("D1:2", None),
        ("D1:3", None),
        ("D1:5", None),
        ("D1:6", None),
    ]
