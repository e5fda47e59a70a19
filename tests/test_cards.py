"""Evidence constructor and deterministic card verification (quotes, ids, times, agreement)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pytest
from pydantic import TypeAdapter

from index_helpers import sample_index
from qemem.evidence import (
    CardDraft,
    SourceIndex,
    ViewCard,
    construct_cards,
    merge_cards,
    resolve_card_time,
    time_agrees,
    verify_card,
)
from qemem.evidence.times import TimeResolution, resolve_times
from qemem.llm import LLMClient, LLMRequest
from qemem.models import Episode, Plan, Pool, PoolItem, SemanticFact
from qemem.store import Scope
from qemem.testing import OfflineLLM

SCOPE = Scope("demo-1")
PLAN = Plan(
    question="When did Priya go to her first pottery class?",
    need="The date of Priya's first pottery class.",
    answer_type="date",
    aggregate=False,
    temporal=True,
)
EPISODE = Episode(
    "E1",
    "demo-1",
    2,
    "Priya changes jobs",
    "Priya told Tomas she handed in her notice at Northgate to join Brightfield Solar.",
    datetime(2024, 5, 2, 12, 40),
    ("D2:1", "D2:2", "D2:3", "D2:4"),
)
FACT = SemanticFact(
    "S1", "demo-1", "Priya works as a data analyst at Brightfield Solar.", 2, ("E1",)
)


@pytest.fixture(scope="module")
def index() -> SourceIndex:
    return sample_index(SCOPE, [EPISODE], [FACT])


def small_pool(index: SourceIndex, turn_ids: list[str]) -> Pool:
    turns = [index.get(t) for t in turn_ids]
    return Pool(
        "demo-1",
        [PLAN.question],
        episodes=[PoolItem("episode", EPISODE)],
        facts=[PoolItem("fact", FACT)],
        turns=[PoolItem("turn", loc.record) for loc in turns if loc is not None],
    )


def card_json(view: ViewCard) -> dict[str, Any]:
    """A card's JSON form, as the answer's serialiser writes it."""
    data: dict[str, Any] = TypeAdapter(ViewCard).dump_python(view, mode="json")
    return data


def card(quote: str, sources: list[str], claim: str = "a claim", time: str = "") -> CardDraft:
    return CardDraft(claim=claim, sources=sources, quote=quote, time=time, relation="answer")


# ------------------------------------------------------------------ constructor


def test_constructor_prompt_and_output(index: SourceIndex) -> None:
    seen: list[LLMRequest] = []

    def handler(request: LLMRequest) -> dict[str, Any]:
        seen.append(request)
        return {
            "cards": [
                {
                    "claim": "Priya went to her first pottery class.",
                    "sources": ["D1:3"],
                    "quote": "I went to my first pottery class last Saturday",
                    "time": "the Saturday before 14 March 2024",
                    "relation": "answer candidate",
                }
            ],
            "sufficient": False,
            "missing": "  the studio's name ",
            "follow_up_queries": ["studio near the canal", "pottery studio", "clay", "fourth"],
        }

    made = construct_cards(
        LLMClient(OfflineLLM(handler)), index, small_pool(index, ["D2:2", "D1:3"]), PLAN
    )
    assert made.degraded is None
    assert [c.sources for c in made.cards] == [["D1:3"]]
    assert made.feedback.sufficient is False
    assert made.feedback.missing == "the studio's name"
    assert made.feedback.follow_up_queries == ["studio near the canal", "pottery studio", "clay"]
    request = seen[0]
    assert request.stage == "construct"
    assert (
        request.schema is not None
        and request.schema["properties"]["follow_up_queries"]["maxItems"] == 3
    )
    prompt = request.messages[0].content
    assert "Information needed: The date of Priya's first pottery class." in prompt
    # episodes, then facts, then turns, each grouped by session in time order under one date
    # header per session, with ids
    session_2 = "--- Session 2 (Thursday, 2 May 2024, 12:40)\n"
    order = [
        prompt.index(f"Episodes:\n{session_2}[E1] Priya changes jobs"),
        prompt.index(f"learned in):\n{session_2}[S1] "),
        prompt.index("Turns:\n--- Session 1 (Thursday, 14 March 2024, 19:15)\n"),
        prompt.index("[D1:3] Priya: That's amazing!"),
        prompt.index(f"{session_2}[D2:2] Priya: Ha, a few!"),
    ]
    assert order == sorted(order)
    assert "follow-up round" not in prompt


def test_refinement_prompt_summarises_existing_cards(index: SourceIndex) -> None:
    seen: list[LLMRequest] = []

    def handler(request: LLMRequest) -> dict[str, Any]:
        seen.append(request)
        return {"cards": [], "sufficient": True}

    existing = [ViewCard("Priya adopted Miso.", ["D4:4"], "I adopted a kitten", "", "x")]
    llm = LLMClient(OfflineLLM(handler))
    construct_cards(llm, index, small_pool(index, ["D1:3"]), PLAN, existing=existing, refining=True)
    prompt = seen[0].messages[0].content
    assert "1. Priya adopted Miso. (sources: D4:4)" in prompt
    assert "numbered from 2 on" in prompt


def test_malformed_constructor_output_degrades(index: SourceIndex) -> None:
    calls: list[str] = []

    def handler(request: LLMRequest) -> str:
        calls.append(request.stage)
        return '{"cards": "not a list"}'

    made = construct_cards(LLMClient(OfflineLLM(handler)), index, small_pool(index, ["D1:3"]), PLAN)
    assert calls == ["construct", "construct.repair"]
    assert made.degraded == "construct output invalid"
    assert made.cards == [] and made.feedback.sufficient is False
    assert len(made.responses) == 2


# ------------------------------------------------------------------ verification


def test_verified_card_with_resolved_time(index: SourceIndex) -> None:
    out = verify_card(
        card("I went to my first pottery class last Saturday", ["[D1:3]"], time="9 March 2024"),
        index,
    )
    assert out.verified and out.score >= 0.85
    assert out.sources == ["D1:3"] and out.matched_source == "D1:3"
    assert out.grounded_in == "turn"
    assert out.unresolved_sources == []
    assert out.resolved_time is not None
    assert out.resolved_time.phrase == "the Saturday before 14 March 2024"
    assert out.resolved_time.start == date(2024, 3, 9)
    assert out.time_agrees is True


def test_unverified_card_is_kept_and_unknown_ids_recorded(index: SourceIndex) -> None:
    # the number changed: the quote is not in the source
    out = verify_card(card("I went to my second pottery class", ["D1:3", "D9:99"]), index)
    assert out.verified is False
    assert out.matched_source == "D1:3"
    assert out.unresolved_sources == ["D9:99"]
    assert out.sources == ["D1:3", "D9:99"]


def test_quote_from_another_turn_is_unverified(index: SourceIndex) -> None:
    out = verify_card(card("I adopted a kitten last Friday", ["D1:3"]), index)
    assert out.verified is False and out.score < 0.85


def test_card_with_no_known_source(index: SourceIndex) -> None:
    out = verify_card(card("anything at all", ["X7", "turn:D0:1"]), index)
    assert out.verified is False and out.score == 0.0
    assert out.matched_source is None and out.resolved_time is None
    assert out.unresolved_sources == ["X7", "D0:1"]


def test_episode_and_fact_sources(index: SourceIndex) -> None:
    ep = verify_card(card("handed in her notice at Northgate", ["E1", "D1:3"]), index)
    assert ep.verified and ep.matched_source == "E1"
    assert ep.grounded_in == "episode" and card_json(ep)["grounded_in"] == "episode"
    fact = verify_card(card("a data analyst at Brightfield Solar", ["S1"]), index)
    assert fact.verified and fact.matched_source == "S1"
    assert fact.grounded_in == "fact"
    # no relative expression: the session date of the fact's session
    assert fact.resolved_time is not None and fact.resolved_time.phrase == "2 May 2024"
    assert fact.resolved_time.expression == ""


def test_time_comes_from_the_source_outside_the_quote(index: SourceIndex) -> None:
    # D1:2 says "... the Riverside Half Marathon yesterday": the expression is in the cited
    # message, not in the quoted span, and the claim does not repeat it
    out = verify_card(
        card(
            "I signed up for the Riverside Half Marathon",
            ["D1:2"],
            claim="Tomas signed up for the Riverside Half Marathon.",
            time="13 March 2024",
        ),
        index,
    )
    assert out.verified
    assert out.resolved_time is not None and out.resolved_time.phrase == "13 March 2024"
    assert out.time_agrees is True


def test_time_is_the_expression_nearest_the_quote(index: SourceIndex) -> None:
    # D4:4: "... we've agreed to go next spring instead. ... I adopted a kitten last Friday!"
    out = verify_card(card("I adopted a kitten", ["D4:4"], time="19 July 2024"), index)
    assert out.resolved_time is not None
    assert out.resolved_time.expression == "last Friday"
    assert out.time_agrees is True


def test_time_without_expression_is_the_session_date() -> None:
    anchor = datetime(2023, 5, 8, 13, 56)
    resolved = resolve_card_time("I love painting sunsets.", (0, 6), anchor)
    assert (resolved.expression, resolved.phrase) == ("", "8 May 2023")


def test_time_of_a_later_session(index: SourceIndex) -> None:
    out = verify_card(card("I adopted a kitten last Friday!", ["D4:4"], time="July 2024"), index)
    assert out.resolved_time is not None
    assert out.resolved_time.phrase == "the Friday before 22 July 2024"
    assert out.resolved_time.start == date(2024, 7, 19)
    assert out.time_agrees is True


SATURDAY = TimeResolution(
    "last Saturday",
    date(2024, 3, 9),
    date(2024, 3, 9),
    "day",
    "the Saturday before 14 March 2024",
)
LAST_WEEK = TimeResolution(
    "last week", date(2024, 3, 4), date(2024, 3, 10), "week", "the week before 14 March 2024"
)


FIRST_MAY = TimeResolution("", date(2023, 5, 1), date(2023, 5, 1), "day", "1 May 2023")
(LAST_SUMMER,) = resolve_times("last summer", date(2023, 10, 17))
(LAST_MONTH,) = resolve_times("last month", date(2023, 5, 8))
(TEN_YEARS_AGO,) = resolve_times("ten years ago", date(2023, 6, 27))


@pytest.mark.parametrize(
    ("llm_time", "resolved", "expected"),
    [
        ("the Saturday before 14 March 2024", SATURDAY, True),  # same phrase
        ("The Saturday before 14 March, 2024.", SATURDAY, True),  # punctuation ignored
        ("9 March 2024", SATURDAY, True),  # the same day
        ("Saturday, March 9th, 2024", SATURDAY, True),
        ("2024-03-09", SATURDAY, True),
        ("March 2024", SATURDAY, True),  # coarser but consistent
        ("early March 2024", SATURDAY, True),
        ("10 March 2024", SATURDAY, False),  # another day
        ("the Saturday after 14 March 2024", SATURDAY, False),  # 16 March
        ("the Friday before 14 March 2024", SATURDAY, False),  # 8 March
        ("2023", SATURDAY, False),
        ("April 2024", SATURDAY, False),
        ("last Saturday", SATURDAY, False),  # names no date
        ("", SATURDAY, None),
        ("n/a", SATURDAY, None),
        ("Unknown", SATURDAY, None),
        ("8 March 2024", LAST_WEEK, True),  # a day inside the week
        ("the week before 14 March 2024", LAST_WEEK, True),
        ("the weekend of 9 March 2024", LAST_WEEK, True),
        ("12 March 2024", LAST_WEEK, False),
        ("winter 2023", LAST_WEEK, False),  # Dec 2023 - Feb 2024
        ("spring 2024", LAST_WEEK, True),
        ("9 March", SATURDAY, True),  # no year: read in the resolved range's year
        ("March 9th", SATURDAY, True),
        ("10 March", SATURDAY, False),
        ("31 February", SATURDAY, False),  # impossible day
        ("1 May 2023", FIRST_MAY, True),
        ("11 May 2023", FIRST_MAY, False),  # not a substring match: day boundaries count
        ("21 May 2023", FIRST_MAY, False),
        ("May 11, 2023", FIRST_MAY, False),
        ("the summer before 17 October 2023", LAST_SUMMER, True),  # one period, two phrasings
        ("summer 2023", LAST_SUMMER, True),
        ("the summer before 17 October 2022", LAST_SUMMER, False),
        ("the month before 8 May 2023", LAST_MONTH, True),
        ("April 2023", LAST_MONTH, True),
        ("May 2023", LAST_MONTH, False),
        ("10 years ago", TEN_YEARS_AGO, True),  # relative, read against the same session date
        ("a few years ago", TEN_YEARS_AGO, False),
        ("2013", TEN_YEARS_AGO, True),
    ],
)
def test_time_agreement(llm_time: str, resolved: TimeResolution, expected: bool | None) -> None:
    assert time_agrees(llm_time, resolved) is expected


def test_merge_cards_keeps_existing_and_drops_repeats() -> None:
    first = ViewCard("Priya has a cat.", ["D1:11"], "My cat Biscuit", "", "")
    repeat = ViewCard("priya  has a CAT.", ["D1:11"], "My cat Biscuit would never", "", "")
    other_source = ViewCard("Priya has a cat.", ["D4:5"], "Biscuit", "", "")
    merged = merge_cards([first], [repeat, other_source])
    assert merged == [first, other_source]


def test_turn_quote_is_checked_against_the_message_not_the_speaker(index: SourceIndex) -> None:
    # D1:3 is Priya's "I went to my first pottery class last Saturday ..."
    named = verify_card(card("Priya went to my first pottery class last Saturday", ["D1:3"]), index)
    assert named.verified is False
    prefixed = verify_card(card("Priya: I went to my first pottery class", ["D1:3"]), index)
    assert prefixed.verified is True


def test_one_word_quote_is_not_evidence(index: SourceIndex) -> None:
    out = verify_card(card("went", ["D1:3"]), index)
    assert out.verified is False and out.grounded_in == "turn"
