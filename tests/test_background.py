"""The answer prompt's background: the uncited pool records, best-ranked first, within
``AskConfig.background_tokens``."""

from __future__ import annotations

import itertools
import math

import pytest

from qemem.answer import Answer, AskConfig, ask
from qemem.answer.background import background
from qemem.embed import HashEmbedder
from qemem.errors import InputError
from qemem.evidence import SourceIndex
from qemem.evidence.context import exposure_place, format_memories, pool_passages, pool_records
from qemem.llm import LLMClient
from qemem.llm.types import estimate_tokens
from qemem.models import Pool, PoolItem, Reason
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM

SCOPE = Scope("demo-1")
EMBEDDER = HashEmbedder()
QUESTION = "What did Priya make at the pottery class?"
BUDGETS = (0, 50, 150, 400, 1000, 4000, None)


@pytest.fixture
def store(sample_store: SQLiteStore) -> SQLiteStore:
    return sample_store


def _ask(store: SQLiteStore, budget: int | None, layout: str = "paper") -> Answer:
    config = AskConfig(background_tokens=budget, prompt_layout=layout)  # type: ignore[arg-type]
    return ask(store, SCOPE, EMBEDDER, LLMClient(OfflineLLM()), QUESTION, config=config)


def test_a_larger_budget_never_shows_less(store: SQLiteStore) -> None:
    shown = [_ask(store, budget).evidence.shown for budget in BUDGETS]
    for smaller, larger in itertools.pairwise(shown):
        assert set(smaller.background) <= set(larger.background)
        assert set(smaller.background_refs) <= set(larger.background_refs)
    assert shown[0].background == [] and shown[0].background_refs == []
    assert len(shown[-1].background) > len(shown[3].background) > 0


def test_without_a_budget_the_whole_rest_of_the_pool_is_shown(store: SQLiteStore) -> None:
    answer = _ask(store, None)
    shown = answer.evidence.shown
    pooled = {item.id for item in answer.evidence.pool.turns}
    assert set(shown.turns) == pooled | set(shown.cited_context)
    assert set(shown.background) == pooled - set(shown.cited_context)


def test_the_listing_stays_within_the_budget_and_keeps_the_best_ranked(
    store: SQLiteStore,
) -> None:
    pool = _ask(store, None).evidence.pool
    index = SourceIndex(store, SCOPE)
    episodes, facts, turns = pool_records(pool)
    place = exposure_place(pool)
    items = {item.id: item for item in pool.turns}
    held = pool_passages(pool)
    for budget in (60, 200, 500):
        kept = background(index, pool, episodes, facts, turns, budget, passages=held)
        text = format_memories(index, kept.episodes, kept.facts, kept.turns, passages=held)
        assert 0 < estimate_tokens(text) <= budget
        worst_kept = max(place(items[t.id]) for t in kept.turns)
        left_out = [t for t in turns if t not in kept.turns]
        assert all(place(items[t.id]) >= worst_kept for t in left_out)


def test_a_context_turn_ranks_with_the_hit_it_widens(store: SQLiteStore) -> None:
    turns = SourceIndex(store, SCOPE).turns[:4]
    pool = Pool(
        "demo-1",
        [],
        turns=[
            PoolItem("turn", turns[0], position=4),
            PoolItem("turn", turns[1], reasons=[Reason("context", via=turns[2].id)]),
            PoolItem("turn", turns[2], position=1),
            PoolItem("turn", turns[3]),
        ],
    )
    place = exposure_place(pool)
    assert [place(item) for item in pool.turns] == [4, 1, 1, math.inf]


def test_the_cached_layout_keeps_the_prefix_pool_shown(store: SQLiteStore) -> None:
    answer = _ask(store, 0, layout="cached")
    prefix = set(answer.evidence.turn_ids([0]))
    assert prefix and prefix <= set(answer.evidence.shown.turns)


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(InputError, match="background_tokens must be >= 0"):
        AskConfig(background_tokens=-1)
