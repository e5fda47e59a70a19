"""The rules of ``qemem.statements``: standing instructions and preferences in a user's message,
and how a later statement that disagrees with an earlier one relates to it."""

from __future__ import annotations

import pytest

from qemem.statements import Standing, denies_the_past, relation_between, standing_statements


@pytest.mark.parametrize(
    "text",
    [
        "Always format all code snippets with syntax highlighting when I ask about "
        "implementation details.",
        "Please always include version numbers when I ask about libraries.",
        "Never use emojis in your answers.",
        "From now on, answer in British English.",
        "Include error status codes when I ask about API error handling.",
        "Make sure to always cite the docs.",
    ],
)
def test_an_instruction_is_the_whole_sentence(text: str) -> None:
    assert standing_statements(text) == [Standing("instruction", text)]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "This app is for my family, so I prefer simple, minimal dependencies, how can I "
            "ensure that my Flask app stays minimal?",
            "I prefer simple, minimal dependencies",
        ),
        (
            "I'm trying to keep my app lightweight, so I prefer few dependencies, can you help?",
            "I'm trying to keep my app lightweight, so I prefer few dependencies",
        ),
        ("I'd rather use Excel than an app.", "I'd rather use Excel than an app."),
        (
            "I've chosen to keep human interviews for the final round, but is it right?",
            "I've chosen to keep human interviews for the final round",
        ),
        ("My preference is tabs over spaces.", "My preference is tabs over spaces."),
    ],
)
def test_a_preference_is_the_clause_that_states_it(text: str, said: str) -> None:
    assert standing_statements(text) == [Standing("preference", said)]


@pytest.mark.parametrize(
    "text",
    [
        "Can you help me when I ask about deployment?",  # a question
        "I always forget the syntax.",  # about the user, not an instruction
        "How do I monitor each job in the workflow?",
        "```python\n# always close the file\nprint('x')\n```",  # code states nothing
        "We went hiking this weekend.",
    ],
)
def test_other_sentences_state_nothing(text: str) -> None:
    assert standing_statements(text) == []


def test_several_statements_of_one_message_in_text_order() -> None:
    text = "Never use tabs. I prefer black for formatting. Thanks!"
    assert standing_statements(text) == [
        Standing("instruction", "Never use tabs."),
        Standing("preference", "I prefer black for formatting."),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "I've never written any Flask routes in this project",
        "I have not used Bootstrap before",
        "I haven't tested it with any API before",
        "I haven't ever been there",
    ],
)
def test_denials_of_the_past(text: str) -> None:
    assert denies_the_past(text)


@pytest.mark.parametrize(
    "text", ["Never mind, it works now", "I implemented the homepage route", "I haven't yet"]
)
def test_not_denials(text: str) -> None:
    assert not denies_the_past(text)


def test_a_changed_value_is_an_update_and_a_denial_a_contradiction() -> None:
    assert relation_between("the deadline is April 1", "the new deadline is April 5") == "update"
    assert relation_between("I have 150 commits merged", "it has now reached 165") == "update"
    earlier = "I implemented the basic homepage route with Flask"
    later = "I've never written any Flask routes in this project"
    assert relation_between(earlier, later) == "contradiction"
    assert relation_between(later, earlier) == "contradiction"
