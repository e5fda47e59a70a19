"""Forget means forget (issue 30, findings 6 and 7, and beyond the rows), on both backends: an
Idempotency-Key goes with its conversation and never acknowledges what is not stored; a
redacted message is in no search index and no evidence; SQLite overwrites what a delete removes
(``secure_delete``, the log checkpointed); the LLM cache's exchanges about a conversation go
when it, or one of its messages, is forgotten."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from qemem.embed import HashEmbedder
from qemem.errors import ConflictError, InputError
from qemem.llm import LLMCache, LLMClient
from qemem.memory import Memory
from qemem.models import REDACTED
from qemem.store import open_store
from qemem.testing import OfflineLLM
from service_helpers import served

BATCH = [  # no ids: only the key makes a retry safe
    {"session_id": "s1", "timestamp": "2024-03-14T19:15:00", "speaker": "Ana", "text": "Hi!"},
    {"session_id": "s1", "timestamp": "2024-03-14T19:16:00", "speaker": "Ben", "text": "Hello."},
]
DAY = timedelta(days=1)
SECRET = "zanzibarite"
"""A word said once, in the message that is then redacted."""
TALK = [
    "I adopted a grey cat named Pixel last week.",
    "Lovely! What does Pixel eat?",
    f"My bank password is {SECRET} but keep it quiet.",
    "I will not tell anyone.",
    "Pixel eats tuna every morning.",
    "Cats love tuna.",
]


def _talk(texts: list[str] = TALK) -> list[dict[str, str]]:
    return [
        {
            "id": f"D1:{n}",
            "session_id": "s1",
            "timestamp": f"2024-03-14T19:{n:02d}:00",
            "speaker": "Ana" if n % 2 else "Ben",
            "text": text,
        }
        for n, text in enumerate(texts, start=1)
    ]


@pytest.fixture
def memory(store_url: str) -> Iterator[Memory]:
    with Memory(open_store(store_url), HashEmbedder(), llm="fake") as mem:
        yield mem


# ------------------------------------------------------------------ 6. idempotency keys
def test_a_key_goes_with_its_conversation(memory: Memory) -> None:
    first = memory.add_messages("c1", BATCH, idempotency_key="k-1")
    assert memory.store.recorded_response("default", "k-1", DAY) is not None
    assert memory.delete("c1")
    assert memory.store.recorded_response("default", "k-1", DAY) is None
    again = memory.add_messages("c1", BATCH, idempotency_key="k-1")  # a new request now
    assert again == first and [t.text for t in memory.turns("c1")] == ["Hi!", "Hello."]


def test_a_retried_key_whose_messages_were_deleted_is_a_conflict(memory: Memory) -> None:
    memory.add_messages("c1", BATCH, idempotency_key="k-1")
    memory.delete_message("c1", "D1:2")
    with pytest.raises(ConflictError, match="D1:2 were deleted since"):
        memory.add_messages("c1", BATCH, idempotency_key="k-1")
    assert [t.id for t in memory.turns("c1")] == ["D1:1"]  # and nothing appended
    added = memory.add_messages("c1", BATCH[:1], idempotency_key="k-2")
    memory.redact_message("c1", added.ids[0])  # a redacted message is still stored
    assert memory.add_messages("c1", BATCH[:1], idempotency_key="k-2") == added


def test_http_answers_409_for_a_key_whose_messages_were_deleted() -> None:
    with served(llm=None) as s:
        auth = s.auth(s.alice) | {"Idempotency-Key": "k-1"}
        url = "/v1/conversations/c1/messages"
        assert s.client.post(url, json={"messages": BATCH}, headers=auth).status_code == 200
        deleted = s.client.delete(f"{url}/D1:1", headers=s.auth(s.alice))
        assert deleted.status_code == 200
        retried = s.client.post(url, json={"messages": BATCH}, headers=auth)
        assert retried.status_code == 409 and "deleted since" in retried.json()["detail"]
        assert s.client.delete("/v1/conversations/c1", headers=auth).status_code == 204
        fresh = s.client.post(url, json={"messages": BATCH}, headers=auth)
        assert fresh.status_code == 200 and fresh.json()["turns_added"] == 2


# ------------------------------------------------------------------ 7. redacted messages
def test_a_redacted_message_is_in_no_index_and_no_evidence(memory: Memory) -> None:
    memory.add_messages("c", _talk())
    memory.build("c")
    memory.redact_message("c", "D1:3")
    memory.build("c")  # episodes of the turns around it are built again
    assert len(memory.turns("c")) == len(TALK)  # still counted
    for query in (SECRET, "bank password", REDACTED, "message redacted"):
        for space in ("turn", "episode", "fact"):
            found = memory.search("c", query, k=None, space=space)  # type: ignore[arg-type]
            assert all(r.record.id != "D1:3" for r in found), (query, space)
        pool = memory.retrieve("c", f"What is the {query}?")
        assert "D1:3" not in {i.record.id for i in pool.turns}
        block = memory.context("c", f"What did Ana say about the {query}?", budget_tokens=4000)
        assert "D1:3" not in block.text and REDACTED not in block.text
        assert all(item.ref.id != "D1:3" for item in block.items)
        answer = memory.ask("c", f"What is the {query}?", mode="retrieval")
        assert "D1:3" not in {i.record.id for i in answer.pool.turns}
    across = memory.context_many(["c"], "What is the bank password?", budget_tokens=4000)
    assert REDACTED not in across.text and SECRET not in across.text


# ------------------------------------------------------------------ beyond the rows
def _residue(path: Path, marker: bytes) -> bool:
    """Whether the marker is still readable in the store's files (database and log)."""
    files = (path, Path(f"{path}-wal"))
    return any(marker in file.read_bytes() for file in files if file.exists())


def test_sqlite_overwrites_what_a_delete_removes(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(open_store(str(path)), HashEmbedder()) as memory:
        [row] = memory.store._conn.execute("PRAGMA secure_delete").fetchall()  # type: ignore[attr-defined]
        assert row == (1,)
        memory.add_messages("gone", _talk())
        memory.add_messages("kept", _talk(["The quokkawood fence is green."]))
        memory.add_messages("edited", _talk(["Keep this.", "Forget the velvetorium."]))
        assert _residue(path, SECRET.encode()) and _residue(path, b"velvetorium")
        memory.delete("gone")
        memory.delete_message("edited", "D1:2")
        # while the store is open, as a server holds it
        assert not _residue(path, SECRET.encode()) and not _residue(path, b"velvetorium")
        assert _residue(path, b"quokkawood")  # what was not deleted stays
    assert not _residue(path, SECRET.encode())


def _cached_memory(url: str, cache: Path) -> Memory:
    return Memory(
        open_store(url), HashEmbedder(), llm=LLMClient(OfflineLLM(), cache=LLMCache(cache))
    )


def _exchanges(cache: Path, word: str) -> int:
    with closing(sqlite3.connect(cache)) as conn:
        return int(
            conn.execute(
                "SELECT count(*) FROM llm_cache WHERE request LIKE ?", (f"%{word}%",)
            ).fetchone()[0]
        )


def test_the_llm_cache_forgets_a_deleted_conversation_or_message(
    store_url: str, tmp_path: Path
) -> None:
    cache = tmp_path / "llm.db"
    other = [t.replace("Pixel", "Mochi") for t in TALK[:2]] + ["Mochi naps at noon.", "Cute."]
    with _cached_memory(store_url, cache) as memory:
        memory.add_messages("c", _talk())
        memory.add_messages("d", _talk(other))
        memory.build()
        memory.ask("c", "What does Pixel eat?")
        assert _exchanges(cache, SECRET) > 0 and _exchanges(cache, "Mochi") > 0
        memory.delete("c")
        assert _exchanges(cache, SECRET) == 0 and _exchanges(cache, "Pixel") == 0
        assert _exchanges(cache, "Mochi") > 0  # another conversation's exchanges stay
        memory.delete_message("d", "D1:3")
        assert _exchanges(cache, "Mochi naps") == 0
    assert b"Mochi naps" not in cache.read_bytes() + _wal(cache)  # overwritten in the file


def _wal(path: Path) -> bytes:
    wal = Path(f"{path}-wal")
    return wal.read_bytes() if wal.exists() else b""


def test_a_memory_without_an_llm_still_forgets_the_cache_it_would_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, url = tmp_path / "llm.db", str(tmp_path / "m.db")
    with _cached_memory(url, cache) as memory:
        memory.add_messages("c", _talk())
        memory.build("c")
    assert _exchanges(cache, SECRET) > 0
    monkeypatch.setenv("QEMEM_LLM_CACHE", str(cache))
    monkeypatch.delenv("QEMEM_LLM", raising=False)
    with Memory.open(url, embedder=HashEmbedder()) as plain:  # as `qemem delete` opens it
        assert plain.delete("c")
    assert _exchanges(cache, SECRET) == 0


def test_a_memory_file_never_brings_a_redacted_message_back(memory: Memory, tmp_path: Path) -> None:
    """Found by the state machine: a memory file exported before a message was redacted
    imported the episodes quoting it again (their turn ids are still stored)."""
    memory.add_messages("c", _talk())
    memory.build("c")
    memory.export_memory("c", tmp_path / "c.mem.json")
    memory.redact_message("c", "D1:3")
    with pytest.raises(InputError, match="D1:3 were redacted after this file was written"):
        memory.import_memory(tmp_path / "c.mem.json")
    assert all("D1:3" not in e.turn_ids for e in memory.episodes("c"))
    assert SECRET not in " ".join(e.content for e in memory.episodes("c"))
    memory.build("c")
    memory.export_memory("c", tmp_path / "again.mem.json")
    assert memory.import_memory(tmp_path / "again.mem.json").episodes_added == 0
