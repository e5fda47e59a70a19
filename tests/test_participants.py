"""Participants and the kind of conversation, from the data: prompts name them, and never say
"people" for a user's conversation with an assistant."""

from __future__ import annotations

import re
import string
from datetime import datetime

import pytest

from qemem.models import Role, Turn
from qemem.participants import Participants
from qemem.prompts import load_prompt, render

WHEN = datetime(2024, 3, 14, 10, 0)


def turn(speaker: str, role: Role | None) -> Turn:
    return Turn("D1:1", "c", 1, 0, speaker, "hello", WHEN, role)


ASSISTANT = Participants.of(
    ["User", "Assistant"], [turn("User", "user"), turn("Assistant", "assistant")]
)
NAMED = Participants.of(["Ana", "Claude"], [turn("Ana", "user"), turn("Claude", "assistant")])
PEOPLE = Participants.of(["Caroline", "Melanie"], [turn("Caroline", None), turn("Melanie", None)])

# the prompts of the query-time stages and the build, and the templates inserted into them;
# judge, audit, check and the NEMORI baseline reproduce other setups and are not named here
NAMED_PROMPTS = (
    "answer",
    "respond",
    "construct",
    "plan",
    "role",
    "shared_memories",
    "build_system",
    "build_episode",
    "build_calibrate",
    "build_predict",
    "build_segment",
    "standing",
)


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _rendered(name: str, who: Participants) -> str:
    fields = who.prompt_fields()
    given = {f: f"<{f}>" for f in _fields(load_prompt(name)) if f not in fields}
    given["purpose"] = "answer one question about it"
    return render(name, **{**given, **fields})


def test_a_conversation_with_an_assistant_names_the_user_and_the_assistant() -> None:
    assert ASSISTANT.with_assistant and ASSISTANT.names == "the user and the assistant"
    assert ASSISTANT.conversation == (
        "a long conversation between the user and the assistant "
        "(the user's chat with an AI assistant)"
    )
    assert NAMED.names == "the user (Ana) and the assistant (Claude)"
    assert NAMED.user == "the user (Ana)"


def test_people_are_named_by_their_names() -> None:
    assert not PEOPLE.with_assistant
    assert PEOPLE.conversation == "a long conversation between Caroline and Melanie"
    assert PEOPLE.subjects == "the people"


def test_a_speaker_keeps_the_first_role_its_messages_give() -> None:
    found = Participants.of(["Ana"], [turn("Ana", "user"), turn("Ana", "other"), turn("Bo", None)])
    assert found.speakers == ("Ana", "Bo") and found.roles == {"Ana": "user"}
    assert found.names == "the user (Ana) and Bo"


@pytest.mark.parametrize("name", NAMED_PROMPTS)
def test_no_prompt_says_people_for_a_conversation_with_an_assistant(name: str) -> None:
    text = _rendered(name, ASSISTANT)
    assert not re.search(r"\bpeople\b", text, re.IGNORECASE), text


@pytest.mark.parametrize("name", ["answer", "construct", "plan", "role", "build_system"])
def test_the_prompts_name_the_participants_and_the_kind_of_conversation(name: str) -> None:
    assert "the user and the assistant (the user's chat with an AI assistant)" in _rendered(
        name, ASSISTANT
    )
    assert "Caroline and Melanie" in _rendered(name, PEOPLE)


def test_only_a_conversation_with_an_assistant_types_facts_and_says_what_each_side_is() -> None:
    calibrate = _rendered("build_calibrate", ASSISTANT)
    assert '"kind": "instruction"' in calibrate and "facts about the user" in calibrate
    assert "those of the assistant are what it advised or produced" in calibrate
    people = _rendered("build_calibrate", PEOPLE)
    assert '"kind"' not in people and "about the people" in people
    episode = _rendered("build_episode", ASSISTANT)
    assert 'Call the participants the user and the assistant, never "I" or "you".' in episode
