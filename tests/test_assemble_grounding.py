"""What the answerer is told about a card's grounding (issue 20): relative times annotated in
the cited context (the constructor's pool stays verbatim), the rule time's basis, session-date
fallbacks not to be preferred, plans marked, and cards grounded only in model-written memory
marked and shown with the original turns behind them."""

from __future__ import annotations

from datetime import datetime

import pytest

from index_helpers import sample_index
from qemem.answer import assemble
from qemem.answer.wire import answer_from_json, answer_to_json
from qemem.evidence import CardDraft, SourceIndex, format_pool, verify_card
from qemem.llm import LLMClient
from qemem.memory import Memory
from qemem.models import Episode, Pool, PoolItem, SemanticFact
from qemem.store import Scope
from qemem.testing import OfflineLLM

SCOPE = Scope("demo-1")
RACE = Episode(
    "E1",
    "demo-1",
    5,
    "After the race",
    "Tomas ran the Riverside Half Marathon in 1 hour 52 minutes.",
    datetime(2024, 8, 29, 16, 45),
    tuple(f"D5:{n}" for n in range(1, 9)),
)
FACT = SemanticFact("F1", "demo-1", "Tomas ran the Riverside Half Marathon.", 5, ("E1",))


@pytest.fixture(scope="module")
def index() -> SourceIndex:
    return sample_index(SCOPE, [RACE], [FACT])


def card(index: SourceIndex, sources: list[str], quote: str, time: str = "") -> str:
    cards = [verify_card(CardDraft(claim="c", sources=sources, quote=quote, time=time), index)]
    return assemble(index, cards, Pool("demo-1", ["q"])).text


def test_cited_context_annotates_times_and_the_pool_stays_verbatim(index: SourceIndex) -> None:
    text = card(index, ["D1:3"], "I went to my first pottery class last Saturday")
    assert "last Saturday [the Saturday before 14 March 2024]" in text
    # the neighbour D1:2 is annotated too, where its expression stands
    assert "Half Marathon yesterday [13 March 2024]" in text
    located = index.get("D1:3")
    assert located is not None
    pool = Pool("demo-1", ["q"], turns=[PoolItem("turn", located.record)])
    assert "last Saturday at" in format_pool(index, pool)
    assert "[the Saturday" not in format_pool(index, pool)


def test_a_quote_without_an_expression_is_marked_as_said_not_happened(
    index: SourceIndex,
) -> None:
    text = card(index, ["D1:7"], "Work has been so draining lately")
    time_line = next(line for line in text.splitlines() if line.strip().startswith("time:"))
    assert "by the session-date rule" not in time_line
    assert "no relative expression in the quote; said on 14 March 2024" in time_line


def test_the_rule_names_the_other_cited_turn_it_read(index: SourceIndex) -> None:
    # the quote is in D4:5, the "last Friday" the constructor's time is about in D4:4
    located = index.get("D4:5")
    assert located is not None
    quote = located.record.text.split(".")[0]  # type: ignore[union-attr]
    text = card(index, ["D4:5", "D4:4"], quote, time="19 July 2024")
    assert '("last Friday" in D4:4): the Friday before 22 July 2024' in text


def test_a_plan_is_marked_planned(index: SourceIndex) -> None:
    text = card(index, ["D2:6"], "Arjun and I have started planning a trip to Japan in September")
    assert "PLANNED: stated as a plan or intention" in text


def test_model_written_grounding_is_marked_and_shown_with_its_turns(index: SourceIndex) -> None:
    cards = [
        verify_card(
            CardDraft(claim="Tomas ran.", sources=["F1"], quote="ran the Riverside Half Marathon"),
            index,
        )
    ]
    assert cards[0].verified and cards[0].model_written and cards[0].grounded_in == "fact"
    assembly = assemble(index, cards, Pool("demo-1", ["q"]))
    assert "MODEL-WRITTEN: found only in a memory fact a model wrote" in assembly.text
    # the fact's provenance turn, where the race was told, is in the cited context
    assert "[D5:2] Tomas: I did it! I ran the Riverside Half Marathon" in assembly.text
    assert "last Sunday [the Sunday before" in assembly.text
    assert "D5:2" in assembly.shown.cited_context


def test_card_time_fields_are_in_the_answer_record(memory: Memory) -> None:
    mem = Memory(memory.store, memory.embedder, llm=LLMClient(OfflineLLM()))
    answer = mem.ask("demo-1", "When did Priya adopt a kitten?")
    cards = answer_to_json(answer)["evidence"]["cards"]
    assert cards and all("time_basis" in c and "planned" in c for c in cards)
    assert any(c["time_basis"] in ("quote", "cited", "session") for c in cards)
    again = answer_from_json(answer_to_json(answer))
    assert [c.time_basis for c in again.evidence.cards] == [
        c.time_basis for c in answer.evidence.cards
    ]
