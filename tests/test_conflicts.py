"""Updates and contradictions (issue 33, item 5): one rule (``qemem.statements``) marks the cards
the constructor names as disagreeing, and decides whether a build records a supersession."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from qemem.answer.assemble import format_card
from qemem.build import BuildConfig, build_memory
from qemem.embed import HashEmbedder
from qemem.evidence import CardDraft, SourceIndex, ViewCard, verify_card
from qemem.evidence.cards import Conflict
from qemem.evidence.conflicts import conflict_text, mark_conflicts, named_card
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.store import SQLiteStore
from qemem.testing import OfflineLLM, offline_answer

TEXTS = [
    ("s1", "I implemented the basic homepage route with Flask."),
    ("s1", "My sprint deadline is April 1."),
    ("s2", "I've never written any Flask routes in this project."),
    ("s2", "The new sprint deadline is April 5."),
]


def _messages() -> list[dict[str, Any]]:
    return [
        {
            "session_id": session,
            "timestamp": f"2024-03-{11 if session == 's1' else 18}T10:0{n}:00",
            "speaker": "User",
            "role": "user",
            "text": text,
            "id": f"m{n}",
        }
        for n, (session, text) in enumerate(TEXTS, start=1)
    ]


@pytest.fixture
def memory() -> Iterator[Memory]:
    with Memory(SQLiteStore(":memory:"), HashEmbedder()) as memory:
        memory.add_messages("c1", _messages())
        yield memory


def card(index: SourceIndex, source: str, quote: str, relation: str) -> ViewCard:
    return verify_card(
        CardDraft(claim=quote, sources=[source], quote=quote, relation=relation), index
    )


def test_the_rule_decides_which_relation_the_named_pairs_have(memory: Memory) -> None:
    index = SourceIndex(memory.store, memory.scope("c1"))
    cards = [
        card(index, "m1", "implemented the basic homepage route with Flask", "answer candidate"),
        card(index, "m3", "I've never written any Flask routes", "contradicts card 1"),
        card(index, "m4", "The new sprint deadline is April 5", "answer candidate"),
        card(index, "m2", "My sprint deadline is April 1", "conflicts with card 3"),
        card(index, "m2", "My sprint deadline is April 1", "intermediate fact"),
    ]
    marked = mark_conflicts(cards, index)
    assert [c.conflict for c in marked] == [
        Conflict("contradiction", 2, later=False),
        Conflict("contradiction", 1, later=True),
        Conflict("update", 4, later=True),  # said later than card 4, whatever the wording
        Conflict("update", 3, later=False),
        None,
    ]
    assert "relation: contradicts card 1; CONTRADICTION with card 1: both cannot hold" in (
        format_card(2, marked[1])
    )
    assert "UPDATE of card 4: said later, this value replaces it" in format_card(3, marked[2])
    assert conflict_text(marked[3].conflict) == (  # type: ignore[arg-type]
        "UPDATED by card 3: an earlier value, replaced since"
    )


@pytest.mark.parametrize(
    ("relation", "number"),
    [
        ("updates card 2", 2),
        ("Contradicts card #3", 3),
        ("replaces the value of card 12", 12),
        ("answer candidate", None),
        ("card 2 says more", None),
    ],
)
def test_the_card_a_relation_names(relation: str, number: int | None) -> None:
    assert named_card(relation) == number


def test_a_card_naming_itself_or_no_card_is_left_alone(memory: Memory) -> None:
    index = SourceIndex(memory.store, memory.scope("c1"))
    cards = [
        card(index, "m1", "homepage route", "updates card 1"),
        card(index, "m2", "April 1", "contradicts card 9"),
    ]
    assert [c.conflict for c in mark_conflicts(cards, index)] == [None, None]


class Calibrating:
    """The offline LLM, but the first episode's calibrate call states the route and the
    deadline, and the second's claims that the denial supersedes the route and the new
    deadline the old one."""

    def __call__(self, request: LLMRequest) -> Any:
        found = offline_answer(request)
        if request.stage != "build.calibrate":
            return found
        known = {f.content: f.id for f in request.inputs["known"]}
        if not known:
            return {"facts": [ROUTE, "User's sprint deadline is April 1"]}
        return {
            "facts": [
                {"fact": DENIAL, "supersedes": known[ROUTE], "turns": [1]},
                {"fact": NEW_DEADLINE, "supersedes": known[OLD_DEADLINE], "turns": [2]},
            ]
        }


ROUTE = "User implemented the homepage route with Flask"
OLD_DEADLINE = "User's sprint deadline is April 1"
DENIAL = "User has never written Flask routes"
NEW_DEADLINE = "User's sprint deadline is April 5"


def test_a_build_records_an_update_and_keeps_both_sides_of_a_contradiction(memory: Memory) -> None:
    scope = memory.scope("c1")
    llm = LLMClient(OfflineLLM(Calibrating()))
    config = BuildConfig(snapshot_lag=1)
    report = build_memory(memory.store, scope, memory.embedder, llm, config=config)
    assert report.facts_contradicted == 1 and report.facts_superseded == 1
    [update] = memory.supersessions("c1")
    old, new = memory.facts("c1", [update.old, update.new])
    assert (old.content, new.content) == (OLD_DEADLINE, NEW_DEADLINE)
    current = {f.content for f in memory.facts("c1")}
    assert {ROUTE, DENIAL, NEW_DEADLINE} <= current and OLD_DEADLINE not in current
