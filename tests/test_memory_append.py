"""Memory.add_messages: append after stored turns, retry-safe by id, all or nothing, and exactly
once under concurrent writers."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from qemem.errors import ConflictError, InputError
from qemem.memory import Memory
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


def test_import_qemem_needs_no_server_extra() -> None:
    code = "import qemem, sys; print(sorted({'fastapi', 'mcp', 'uvicorn'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
