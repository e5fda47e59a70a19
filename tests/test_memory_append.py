"""Memory.add_messages: append after stored turns, retry-safe by id, all or nothing, and exactly
once under concurrent writers."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from qemem.embed import HashEmbedder
from qemem.errors import ConflictError, InputError, NotFoundError
from qemem.memory import Memory
from qemem.models import search_text
from qemem.store.sqlite import SQLiteStore
from service_helpers import MESSAGES


def test_append_assigns_ids_and_acknowledges_retries(empty_memory: Memory) -> None:
    done = empty_memory.add_messages("c1", MESSAGES)
    assert (done.ids, done.turns_added, done.sessions_added) == (["m1", "m2", "D2:1"], 3, 2)
    later = {**MESSAGES[2], "text": "Pixel is fine now."}
    again = empty_memory.add_messages("c1", [MESSAGES[1], later, MESSAGES[0]])
    assert again.ids == ["m2", "D2:2", "m1"] and again.turns_added == 1
    assert [t.id for t in empty_memory.turns("c1")] == ["m1", "m2", "D2:1", "D2:2"]
    assert empty_memory.add_messages("c1", []).ids == []


def test_bad_or_conflicting_batches_write_nothing(empty_memory: Memory) -> None:
    empty_memory.add_messages("c1", MESSAGES[:1])
    with pytest.raises(ConflictError, match="m1"):
        empty_memory.add_messages("c1", [MESSAGES[1], {**MESSAGES[0], "speaker": "Eve"}])
    with pytest.raises(InputError, match="speaker"):
        empty_memory.add_messages("c1", [MESSAGES[1], {**MESSAGES[2], "speaker": " "}])
    with pytest.raises(InputError, match="duplicate"):
        empty_memory.add_messages("c1", [MESSAGES[1], MESSAGES[1]])
    assert [t.id for t in empty_memory.turns("c1")] == ["m1"]


def test_concurrent_appends_store_each_message_once(empty_memory: Memory) -> None:
    def writer(n: int) -> None:
        for i in range(10):
            message = {**MESSAGES[0], "id": f"w{n}-{i}", "text": f"{n}/{i}", "session_id": "s"}
            empty_memory.add_messages("c1", [message])
            empty_memory.add_messages("c1", [message])  # a retry

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    turns = empty_memory.turns("c1")
    assert sorted(t.id for t in turns) == sorted(f"w{n}-{i}" for n in range(4) for i in range(10))
    assert [t.position for t in turns] == list(range(40))


@pytest.mark.slow
@pytest.mark.server
def test_import_qemem_needs_no_server_extra() -> None:
    code = "import qemem, sys; print(sorted({'fastapi', 'mcp', 'uvicorn'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _in_s2(text: str, **extra: object) -> dict[str, object]:
    """A message of session s2 (the session of ``MESSAGES[2]``), without a caption."""
    return {
        "session_id": "s2",
        "timestamp": "2024-04-02T10:05:00",
        "speaker": "Ben",
        "text": text,
        **extra,
    }


def test_store_turns_of_reads_sessions_and_ids(store_url: str) -> None:
    with Memory.open(store_url, embedder=HashEmbedder()) as mem:
        mem.add_messages("c1", [*MESSAGES, _in_s2("And a vase.", id="m4")])
        scope = mem.scope("c1")
        assert [t.id for t in mem.store.turns_of(scope, sessions=[2])] == ["D2:1", "m4"]
        got = mem.store.turns_of(scope, sessions=[2], ids=["m2", "m4", "nope"])
        assert [t.id for t in got] == ["m2", "D2:1", "m4"]  # conversation order, no repeats
        assert got == mem.turns("c1", ["m2", "D2:1", "m4"])
        assert mem.store.turns_of(scope) == []
        with pytest.raises(NotFoundError):
            mem.store.turns_of(mem.scope("absent"), sessions=[1])


class _Watched(HashEmbedder):
    """A HashEmbedder that records, per call, whether the store was inside its write
    transaction, and can run a hook on its first document embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.memory: Memory | None = None
        self.in_transaction: list[bool] = []
        self.hook: Callable[[], None] | None = None

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        if not query and self.memory is not None:
            self.in_transaction.append(self.memory.store._in_transaction())  # type: ignore[attr-defined]
            hook, self.hook = self.hook, None
            if hook:
                hook()
        return super().embed(texts, query=query)


def test_append_embeds_before_the_transaction_and_reads_no_whole_conversation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    embedder = _Watched()
    with Memory(SQLiteStore(":memory:"), embedder) as mem:
        embedder.memory = mem
        mem.add_messages("c1", MESSAGES)
        embedder.in_transaction.clear()

        def whole(*args: object, **kwargs: object) -> None:
            raise AssertionError("an append read every turn of the conversation")

        monkeypatch.setattr(mem.store, "turns", whole)
        done = mem.add_messages("c1", [_in_s2("New one.")])
        monkeypatch.undo()
        assert done.ids == ["D2:2"]
        assert embedder.in_transaction == [False]  # embedded once, outside the transaction
        [stored] = mem.turns("c1", ["D2:2"])
        assert stored.text == "New one."


def test_append_planned_again_when_another_writer_came_first() -> None:
    embedder = _Watched()
    with Memory(SQLiteStore(":memory:"), embedder) as mem:
        embedder.memory = mem
        mem.add_messages("c1", MESSAGES)
        other, mine = _in_s2("Someone else's message."), _in_s2("My message.")
        # while this append embeds ahead, another writer appends to the same session
        embedder.hook = lambda: mem.add_messages("c1", [other])
        done = mem.add_messages("c1", [mine])
        turns = mem.turns("c1")
        assert done.ids == ["D2:3"]
        assert [(t.id, t.text) for t in turns[-2:]] == [
            ("D2:2", "Someone else's message."),
            ("D2:3", "My message."),
        ]
        vectors = dict(zip(*mem.store.vectors(mem.scope("c1"), "turn"), strict=True))
        expected = embedder.embed([search_text(turns[-1])])[0]
        assert np.allclose(vectors["D2:3"], expected)


def test_a_new_id_skips_one_given_in_another_session(empty_memory: Memory) -> None:
    empty_memory.add_messages("c1", MESSAGES[:2])
    empty_memory.add_messages("c1", [{**MESSAGES[0], "id": "D2:1", "text": "odd id"}])
    assert empty_memory.add_messages("c1", [_in_s2("a first message of session 2")]).ids == ["D2:2"]
    assert [t.id for t in empty_memory.turns("c1")] == ["m1", "m2", "D2:1", "D2:2"]


def test_concurrent_appends_of_two_writers_take_turns(store_url: str) -> None:
    """Two writers (each its own connection) append overlapping batches with ids, and
    messages without ids, to one session at once: every message is stored exactly once and
    no batch is refused (each append plans under the conversation's write lock)."""
    memories = [Memory.open(store_url, embedder=HashEmbedder()) for _ in range(2)]
    memories[0].add_messages("c2", [_in_s2("first")])
    with_ids = [_in_s2(f"message {n}", id=f"m{n}") for n in range(12)]
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        memory = memories[n % 2]
        try:
            for start in (0, 4, 8):
                memory.add_messages("c2", with_ids[start : start + 4])
            memory.add_messages("c2", [_in_s2(f"no id from writer {n}")])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    turns = memories[0].turns("c2")
    for memory in memories:
        memory.close()
    assert errors == []
    texts = sorted(t.text for t in turns)
    expected = ["first", *(f"message {n}" for n in range(12))]
    assert texts == sorted([*expected, *(f"no id from writer {n}" for n in range(4))])
    assert [t.position for t in turns] == list(range(len(turns)))
