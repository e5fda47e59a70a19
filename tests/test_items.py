"""History items through the library (``Memory.add_items``, ``items``, ``pop_item``,
``clear_items``) on both backends: exact round trip, validation before anything is written,
one transaction with the messages, ids never reused, and what forgetting a message or the
conversation removes. The Agents SDK adapter built on them: test_integration_openai_agents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from qemem.embed import HashEmbedder
from qemem.errors import InputError, NotFoundError
from qemem.memory import MAX_ITEMS, Memory
from qemem.store import open_store

ODD = {"z": [1, 2.5, None, True], "a": {"é": "\x1b[31mred\x00", "n": -0.0}, "": "emoji 😀"}


def said(text: str, session: str = "s1") -> dict[str, str]:
    return {"session_id": session, "timestamp": "2026-12-03T10:00:00+01:00", "speaker": "Ana"} | {
        "text": text,
        "role": "user",
    }


@pytest.fixture
def memory(store_url: str) -> Iterator[Memory]:
    with Memory(open_store(store_url), HashEmbedder()) as mem:
        yield mem


def test_items_read_back_exactly_in_order(memory: Memory) -> None:
    stored = memory.add_items(
        "c", [ODD, {"role": "user", "content": "hi"}], messages=[None, said("hi")]
    )
    assert [i.id for i in stored] == ["I1", "I2"]
    assert [i.data for i in memory.items("c")] == [ODD, {"role": "user", "content": "hi"}]
    assert list(memory.items("c")[0].data) == ["z", "a", ""]  # key order kept
    assert [i.turn for i in stored] == [None, memory.turns("c")[0].id]
    assert memory.items("c", 1) == stored[1:] and memory.items("c", 0) == []
    assert memory.turns("c")[0].role == "user"


@pytest.mark.parametrize(
    ("items", "messages", "says"),
    [
        (["not an object"], (), "is a str"),
        ([{"x": float("nan")}], (), "not plain JSON"),
        ([{"x": object()}], (), "not plain JSON"),
        ([{"x": "\ud800"}], (), "lone surrogate"),
        ([{"x": 1}], [None, None], "2 messages for 1 items"),
        ([{"x": 1}] * (MAX_ITEMS + 1), (), "split it"),
        ([{"x": 1}, {"y": 2}], [None, said("")], "text"),  # a message refused: nothing stored
    ],
)
def test_a_bad_call_is_refused_and_stores_nothing(
    memory: Memory, items: list[Any], messages: Any, says: str
) -> None:
    memory.add_items("c", [{"first": True}], messages=[said("first")])
    with pytest.raises(InputError, match=says):
        memory.add_items("c", items, messages=messages)
    assert [i.data for i in memory.items("c")] == [{"first": True}]
    assert [t.text for t in memory.turns("c")] == ["first"]


def test_pop_clear_and_forgetting(memory: Memory) -> None:
    with pytest.raises(NotFoundError):
        memory.items("absent")
    assert memory.add_items("c", []) == [] and memory.conversations() == []
    memory.add_items(
        "c", [{"n": 1}, {"n": 2}, {"n": 3}], messages=[said("one"), None, said("three")]
    )
    popped = memory.pop_item("c")
    assert popped is not None and popped.data == {"n": 3}
    assert [t.text for t in memory.turns("c")] == ["one"]  # its message went with it
    assert memory.pop_item("c") is not None and memory.clear_items("c") == 1
    assert memory.pop_item("c") is None and [t.text for t in memory.turns("c")] == ["one"]
    again = memory.add_items("c", [{"n": 4}], messages=[said("four")])
    assert again[0].id == "I4"  # ids never reused
    forgotten = memory.delete_message("c", str(again[0].turn))
    assert forgotten.items == ["I4"] and memory.items("c") == []
    memory.add_items("c", [{"n": 5}])
    assert memory.delete("c")
    memory.add_items("c", [{"n": 6}])  # a new life counts anew
    assert [i.id for i in memory.items("c")] == ["I1"]
