"""Answer stage: FINAL ANSWER extraction, abstentions and the retry, evidence assembly."""

from __future__ import annotations

from datetime import datetime

import pytest

from index_helpers import sample_index
from qemem.answer import (
    Asking,
    answer_candidates,
    answer_question,
    assemble,
    assemble_pool,
    extract_final_answer,
    is_abstention,
)
from qemem.evidence import CardDraft, SourceIndex, ViewCard, verify_card
from qemem.llm import LLMClient, LLMRequest
from qemem.models import Episode, Pool, PoolItem
from qemem.store import Scope
from qemem.testing import OfflineLLM

SCOPE = Scope("demo-1")
EPISODE = Episode(
    "E1",
    "demo-1",
    5,
    "After the race",
    "Tomas ran the Riverside Half Marathon; Priya was in the Lake District with Arjun.",
    datetime(2024, 8, 29, 16, 45),
    tuple(f"D5:{n}" for n in range(1, 14)),
)


@pytest.mark.parametrize(
    ("text", "answer", "found"),
    [
        ("She went on 9 March.\nFINAL ANSWER: 9 March 2024", "9 March 2024", True),
        ("final answer: Biscuit", "Biscuit", True),
        ("Reasoning.\n**FINAL ANSWER:** Biscuit.", "Biscuit", True),
        (
            "**Final Answer**: the Saturday before 14 March 2024.",
            "the Saturday before 14 March 2024",
            True,
        ),
        ("FINAL ANSWER: **Piranesi**", "Piranesi", True),
        ('FINAL ANSWER: "Klara and the Sun"', "Klara and the Sun", True),
        ("FINAL ANSWER: draft\nOn reflection...\nFINAL ANSWER: Miso", "Miso", True),
        ("Thinking it over.\nFINAL ANSWER:\n\n  2 cats  \n", "2 cats", True),
        ("She has two cats, Biscuit and Miso.\n\n", "She has two cats, Biscuit and Miso", False),
        ("Some reasoning.\nFINAL ANSWER:", "Some reasoning", False),
        ("", "", False),
        ("FINAL ANSWER: the U.S.", "the U.S.", True),  # an abbreviation keeps its period
        ("FINAL ANSWER: books, paints, etc.", "books, paints, etc.", True),
        ("FINAL ANSWER: No.", "No", True),
        ("FINAL ANSWER: The capital is **Paris**.", "The capital is Paris", True),
        ("FINAL ANSWER: *Becoming* by `Michelle Obama`", "Becoming by Michelle Obama", True),
        ("FINAL ANSWER: __Miso__ and [Biscuit](http://x.y)", "Miso and Biscuit", True),
        ("FINAL ANSWER: 2 * 3 = 6 cats", "2 * 3 = 6 cats", True),
        ("FINAL ANSWER: snake_case_name", "snake_case_name", True),
    ],
)
def test_extract_final_answer(text: str, answer: str, found: bool) -> None:
    assert extract_final_answer(text) == (answer, found)


@pytest.mark.parametrize(
    "answer",
    [
        "No information available",
        "The conversation does not say",
        "It is not mentioned",
        "Cannot be determined from the conversation",
        "I don't know",
        "Unknown",
        "The date is unknown",
        "Not enough information",
        "The memories don't mention it",
        "",
        "Not mentioned in the conversation.",
        "The conversation does not mention when she adopted the dog",
        "No information about the date of the race",
        "There is no mention of a dog in the conversation",
        "It cannot be determined from the memories",
        "The exact date is not specified",
        "The name of the dog is not mentioned in the conversation",
        "I can't tell from the conversation",
        "**Unknown**",
    ],
)
def test_abstentions(answer: str) -> None:
    assert is_abstention(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "No",
        "Biscuit",
        "Probably yes",
        "9 March 2024",
        "An unknown artist's vase",
        # negative answers that mention "not": answers, not abstentions
        "No, she did not mention adopting a dog",
        "She can't tell her parents",
        "It was not provided by the school",
        "No, Melanie has not been to Paris",
        "She did not say yes to the offer",
        "He could not find a job for months",
        "Not a painting but a sculpture",
        "Probably no; she is not known to like crowds",
    ],
)
def test_not_abstentions(answer: str) -> None:
    assert not is_abstention(answer)


class Answers:
    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.stages: list[str] = []
        self.prompts: list[str] = []

    def __call__(self, request: LLMRequest) -> str:
        self.stages.append(request.stage)
        self.prompts.append(request.messages[-1].content)
        return self.texts.pop(0)


CANDIDATES = Asking(candidates=[1, 3])
"""An answer call whose evidence holds verified answer candidates (cards 1 and 3)."""


def test_abstention_retry_replaces_the_answer_when_cards_hold_one() -> None:
    script = Answers("Nothing here.\nFINAL ANSWER: Not mentioned", "Found it.\nFINAL ANSWER: Miso")
    llm = LLMClient(OfflineLLM(script))
    reply = answer_question(llm, "Who is the kitten?", "evidence", asking=CANDIDATES)
    assert (reply.text, reply.abstention_retry) == ("Miso", True)
    assert reply.reasoning == "Found it.\nFINAL ANSWER: Miso"
    assert script.stages == ["answer", "answer.retry"]
    assert "(card 1, card 3)" in script.prompts[1] and "card 1" not in script.prompts[0]
    assert "nearly always" not in script.prompts[1]  # no push against abstaining


def test_an_abstention_without_answer_candidates_stands() -> None:
    script = Answers("Nothing here.\nFINAL ANSWER: Not mentioned")
    reply = answer_question(LLMClient(OfflineLLM(script)), "Who is the kitten?", "evidence")
    assert (reply.text, reply.abstention_retry) == ("Not mentioned", False)
    assert script.stages == ["answer"]


def test_answer_candidates_are_the_verified_cards_offering_an_answer() -> None:
    def card(relation: str, verified: bool) -> ViewCard:
        return ViewCard("c", ["D1:1"], "q", "", relation, verified=verified)

    cards = [
        card("answer candidate", True),
        card("intermediate fact", True),
        card("Answer", True),
        card("answer candidate", False),
    ]
    assert answer_candidates(cards) == [1, 3]


def test_retry_that_abstains_keeps_the_first() -> None:
    script = Answers("FINAL ANSWER: no information", "FINAL ANSWER: I don't know")
    reply = answer_question(LLMClient(OfflineLLM(script)), "q?", "evidence", asking=CANDIDATES)
    assert (reply.text, reply.abstention_retry) == ("no information", True)
    assert reply.reasoning == "FINAL ANSWER: no information"


def test_no_retry_for_a_real_answer_and_missing_line_flagged() -> None:
    script = Answers("Biscuit")
    reply = answer_question(LLMClient(OfflineLLM(script)), "q?", "evidence")
    assert (reply.text, reply.abstention_retry) == ("Biscuit", False)
    assert reply.degradations == ["answer: no FINAL ANSWER line; used the last line"]
    assert script.stages == ["answer"]


def test_retry_can_be_turned_off() -> None:
    script = Answers("FINAL ANSWER: unknown")
    reply = answer_question(LLMClient(OfflineLLM(script)), "q?", "e", retry_abstention=False)
    assert (reply.text, reply.abstention_retry) == ("unknown", False)


@pytest.fixture(scope="module")
def index() -> SourceIndex:
    return sample_index(SCOPE, [EPISODE])


def turn_items(index: SourceIndex, *ids: str) -> list[PoolItem]:
    return [PoolItem("turn", loc.record) for i in ids if (loc := index.get(i)) is not None]


def test_assembly_with_cards(index: SourceIndex) -> None:
    cards = [
        verify_card(
            CardDraft(
                claim="Priya went to her first pottery class.",
                sources=["D1:3", "Z1"],
                quote="I went to my first pottery class last Saturday",
                time="9 March 2024",
                relation="answer candidate",
            ),
            index,
        ),
        verify_card(
            CardDraft(claim="Made up.", sources=["E1"], quote="Priya flew to Kyoto"), index
        ),
    ]
    pool = Pool(
        "demo-1",
        ["q"],
        episodes=[PoolItem("episode", EPISODE)],
        turns=turn_items(index, "D1:2", "D1:3", "D2:6", "D4:2"),
    )
    assembly = assemble(index, cards, pool, neighbours=2, episode_turns=12)
    text = assembly.text
    assert text.index("Evidence cards") < text.index("Cited sources") < text.index("background")
    assert "[1] Priya went to her first pottery class." in text
    assert "(verified)" in text and "(UNVERIFIED: quote not found in the cited sources)" in text
    assert "(unknown ids: Z1)" in text
    rule = 'by the session-date rule ("last Saturday" in the quote): the Saturday before 14 March'
    assert rule in text
    assert "*[D1:3] Priya:" in text and "\n[D1:1] Priya:" in text
    assert "--- Session 1 (Thursday, 14 March 2024, 19:15)" in text
    cited, background = text.split("Other retrieved memories (background):")
    # cited turn D1:3 with two neighbours each side; episode E1 with its first 12 turns
    assert "[D1:5]" in cited and "[D1:6]" not in cited
    assert "[D5:12]" in cited and "[D5:13]" not in cited
    assert "[E1]" in cited and "[E1]" not in background
    # the rest of the pool (D1:2 and D1:3 are already shown) as background
    assert "[D2:6]" in background and "[D4:2]" in background and "[D1:2]" not in background
    expected = [f"D1:{n}" for n in range(1, 6)] + ["D2:6", "D4:2"]
    expected += [f"D5:{n}" for n in range(1, 13)]
    assert assembly.shown.turns == expected
    # what the prompt showed, by section: the cited context, then the background
    context = [f"D1:{n}" for n in range(1, 6)] + [f"D5:{n}" for n in range(1, 13)]
    assert assembly.shown.cited_context == context
    assert assembly.shown.background == ["D2:6", "D4:2"] and assembly.shown.background_refs == []
    # citations: D1:3 itself and every turn of the cited episode
    assert assembly.citations == ["D1:3", *(f"D5:{n}" for n in range(1, 14))]


def test_assembly_without_cards_is_the_pool(index: SourceIndex) -> None:
    pool = Pool("demo-1", ["q"], turns=turn_items(index, "D4:4", "D1:11"))
    for assembly in (assemble(index, [], pool), assemble_pool(index, pool)):
        assert assembly.text.startswith("Retrieved memories:")
        assert assembly.shown.turns == assembly.shown.background == ["D1:11", "D4:4"]
        assert assembly.shown.cited_context == []
        assert assembly.citations == []
        assert "Evidence cards" not in assembly.text


def test_memories_render_one_date_header_per_session_and_no_repeated_turns(
    index: SourceIndex,
) -> None:
    covered = turn_items(index, *(f"D5:{n}" for n in range(1, 14)))
    partly = Pool("demo-1", ["q"], episodes=[PoolItem("episode", EPISODE)], turns=covered[:5])
    text = assemble_pool(index, partly).text
    assert text.count("--- Session 5 (Thursday, 29 August 2024, 16:45)") == 2  # E, then U
    assert f"[E1] After the race: {EPISODE.content}" in text
    whole = Pool("demo-1", ["q"], episodes=[PoolItem("episode", EPISODE)], turns=covered)
    text = assemble_pool(index, whole).text
    # every turn of E1 is shown: its narrative would repeat them, its id and title stay
    assert "[E1] After the race (its turns are shown)" in text
    assert EPISODE.content not in text
    # ids in the text resolve to the records they name
    for line in text.splitlines():
        if line.startswith("["):
            assert index.get(line[1 : line.index("]")]) is not None


def test_cited_episode_keeps_its_narrative_and_background_skips_shown_turns(
    index: SourceIndex,
) -> None:
    cards = [
        verify_card(
            CardDraft(claim="Tomas ran.", sources=["D5:3"], quote="", relation="answer"), index
        )
    ]
    other = Episode("E2", "demo-1", 5, "Race day", "Tomas ran.", EPISODE.timestamp, ("D5:2",))
    pool = Pool(
        "demo-1",
        ["q"],
        episodes=[PoolItem("episode", other)],
        turns=turn_items(index, "D5:3", "D4:2"),
    )
    text = assemble(index, cards, pool, neighbours=2).text
    background = text.split("Other retrieved memories (background):")[1]
    # E2's only turn, D5:2, is in the cited context: the background names it without narrative
    assert "[E2] Race day (its turns are shown)" in background
    cited = assemble(
        index, [*cards, verify_card(CardDraft(claim="c", sources=["E1"]), index)], pool
    )
    assert f"[E1] After the race: {EPISODE.content}" in cited.text
