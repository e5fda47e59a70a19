"""Fencing: a build (and a re-embedding) is pinned to the life of the conversation it started
in. Deleted meanwhile (and created again under its id), or a message of it forgotten meanwhile,
it writes nothing more; deleting a conversation cancels its jobs. Both backends; every
interleaving is held by the gate of ``BlockingLLM`` (no sleeps) or by a hook."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from fence_helpers import gated_memory, in_thread, messages, stored_text
from qemem.embed import HashEmbedder
from qemem.errors import ConversationChangedError, ConversationGoneError
from qemem.llm import LLMCache, LLMClient
from qemem.memory import Memory
from qemem.memory.reembed import reembed
from qemem.memory.worker import JobWorker
from qemem.models import REDACTED, search_text
from qemem.store import Scope, open_store
from qemem.testing import BlockingLLM


@pytest.mark.parametrize("stage", ["build.segment", "build.episode"])
def test_a_build_outliving_its_conversation_writes_nothing_into_the_new_one(
    store_url: str, stage: str
) -> None:
    """Finding 1 of issue 30: delete a conversation while its build runs, create it again
    under the same id with new texts (the same automatic message ids): the build fails with
    ConversationGoneError and the new conversation holds nothing of the old text."""
    with gated_memory(store_url, stage) as (memory, llm):
        memory.add_messages("c1", messages("old"))
        build, errors = in_thread(lambda: memory.build("c1"))
        llm.wait_for_calls(1)
        assert memory.delete("c1")
        again = memory.add_messages("c1", messages("new"))
        assert again.ids[:2] == ["D1:1", "D1:2"]  # a new life counts its ids anew
        llm.open()
        build.join()
        [error] = errors
        assert isinstance(error, ConversationGoneError)
        assert "deleted while it was being built" in str(error)
        assert memory.episodes("c1") == [] and memory.facts("c1") == []
        assert "old" not in stored_text(memory, "c1")
        [report] = memory.build("c1")  # the new life builds as any conversation does
        assert report.episodes > 0 and "old" not in stored_text(memory, "c1")


FORGET: dict[str, Callable[[Memory], object]] = {
    "delete_message": lambda memory: memory.delete_message("c1", "D2:1"),
    "redact_message": lambda memory: memory.redact_message("c1", "D2:1"),
    "delete_fact": lambda memory: memory.delete_fact("c1", "S1"),
}


@pytest.mark.parametrize("forget", sorted(FORGET))
def test_a_build_writes_nothing_after_a_record_is_forgotten_meanwhile(
    store_url: str, forget: str
) -> None:
    """A message or fact forgotten while a build runs (its build lock abandoned, as when the
    build's lease ran out): the build stops with ConversationChangedError before writing an
    episode or fact (which might derive from the forgotten text, or bring a deleted fact
    back); the next build builds what is left."""
    with gated_memory(store_url, "build.episode") as (memory, llm):
        llm.open()
        memory.add_messages("c1", messages("kept", sessions=1))
        memory.build("c1")
        llm.shut()
        secret = messages("secret", sessions=2)[4:]  # session 2: D2:1 .. D2:4
        memory.add_messages("c1", secret)
        build, errors = in_thread(lambda: memory.build("c1"))
        llm.wait_for_calls(1)
        memory.store.set_state(Scope("c1"), "lock.build", "{}")  # the lock taken over
        FORGET[forget](memory)
        llm.open()
        build.join()
        [error] = errors
        assert isinstance(error, ConversationChangedError)
        assert [e for e in memory.episodes("c1") if e.session == 2] == []
        [report] = memory.build("c1")
        assert report.episodes > 0
        if forget == "delete_fact":
            assert "S1" not in {f.id for f in memory.facts("c1", include_superseded=True)}
        else:
            assert secret[0]["text"] not in stored_text(memory, "c1")


class _RedactingEmbedder(HashEmbedder):
    """A HashEmbedder that redacts a message of ``c1`` at its first call: while a re-embedding
    has read the message's text and not yet staged its vector."""

    def __init__(self, memory: Memory, message: str) -> None:
        super().__init__(dim=64)
        self.memory, self.message, self.calls = memory, message, 0

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        self.calls += 1
        if self.calls == 1:
            self.memory.redact_message("c1", self.message)
        return super().embed(texts, query=query)


def test_a_re_embedding_never_stages_a_vector_of_text_redacted_meanwhile(store_url: str) -> None:
    with Memory(open_store(store_url), HashEmbedder()) as memory:
        memory.add_messages("c1", messages("secret", sessions=1))
        [original] = memory.turns("c1", ["D1:1"])
        reembed(memory.store, _RedactingEmbedder(memory, "D1:1"), batch=100)
        [turn] = memory.turns("c1", ["D1:1"])
        ids, _ = memory.store.vectors(Scope("c1"), "turn")
        assert turn.text == REDACTED and "D1:1" not in ids  # a redacted turn is in no index
        # the vector stored for it is the marker's, never its former text's
        [(blob,)] = memory.store._query(  # type: ignore[attr-defined]
            "SELECT vector FROM vectors WHERE space = 'turn' AND id = ?", ("D1:1",)
        )
        stored = (
            np.frombuffer(blob, dtype=np.float32) if isinstance(blob, bytes) else blob.to_numpy()
        )
        embed = HashEmbedder(dim=64).embed
        assert np.allclose(stored, embed([search_text(turn)])[0])
        assert not np.allclose(stored, embed([search_text(original)])[0])


def test_deleting_a_conversation_cancels_its_queued_and_running_jobs(store_url: str) -> None:
    with gated_memory(store_url, "build.segment") as (memory, llm):
        memory.add_messages("busy", messages("old"))
        memory.add_messages("waiting", messages("other"))
        worker = JobWorker(memory, lambda namespace: memory, threads=1)
        running = memory.enqueue_build("busy")
        worker.start()
        try:
            llm.wait_for_calls(1)  # the worker's one thread runs the build of "busy"
            queued = memory.enqueue_build("waiting")
            assert memory.job(running.id).status == "running"
            assert memory.delete("waiting") and memory.delete("busy")
            memory.add_messages("busy", messages("new"))
            llm.open()
        finally:
            worker.close()
        for job, why in ((running, "while it was being built"), (queued, "before it was built")):
            ended = memory.job(job.id)
            assert ended.status == "cancelled" and why in (ended.error or ""), ended
        assert memory.episodes("busy") == [] and "old" not in stored_text(memory, "busy")
        fresh = memory.enqueue_build("busy")  # the new life's build is a new job
        assert fresh.id != running.id and fresh.status == "queued"


def test_a_pinned_scope_never_reaches_a_re_created_conversation(store_url: str) -> None:
    """The store key of a deleted conversation is never given again (SQLite: AUTOINCREMENT;
    without it the one conversation of a store would get its key back), so a pin holds."""
    with Memory(open_store(store_url), HashEmbedder()) as memory:
        memory.add_messages("only", messages("first", sessions=1))
        pinned = memory.store.pin(Scope("only"))
        assert memory.store.turns(pinned)
        memory.delete("only")
        memory.add_messages("only", messages("second", sessions=1))
        with pytest.raises(ConversationGoneError):
            memory.store.turns(pinned)
        with pytest.raises(ConversationGoneError):
            memory.store.set_state(pinned, "k", "v")
        assert memory.store.get_state(Scope("only"), "k") is None


def test_blocking_llm_lets_calls_through_one_by_one() -> None:
    llm = BlockingLLM(stages={"build.segment"}, wait_s=5)
    with Memory(open_store(None), HashEmbedder(), llm=LLMClient(llm, concurrency=2)) as memory:
        memory.add_messages("c1", messages("tag", sessions=2))
        build, errors = in_thread(lambda: memory.build("c1"))
        llm.wait_for_calls(2)  # both sessions are segmented at once
        assert llm.waiting == 2 and {r.stage for r in llm.waited} == {"build.segment"}
        llm.release(1)
        llm.wait_for_calls(1)  # one still waits: the gate lets exactly one through
        assert llm.waiting == 1
        llm.release(1)
        build.join()
        assert errors == [] and llm.waiting == 0 and memory.episodes("c1")
    unreleased = BlockingLLM(wait_s=0.01)
    with pytest.raises(RuntimeError, match="never released"):
        unreleased.complete(llm.waited[0])
    with pytest.raises(RuntimeError, match="expected at the gate"):
        unreleased.wait_for_calls(1)


def test_a_fenced_build_leaves_no_exchange_of_the_removed_text_in_the_llm_cache(
    store_url: str, tmp_path: Path
) -> None:
    """Found by the state machine: deleting a conversation forgets the LLM cache's exchanges
    about it, but its build, waiting at a fact extraction, made that call afterwards and the
    cache recorded it (quoting the deleted text) before the build was fenced."""
    cache = LLMCache(tmp_path / "llm.db")
    llm = BlockingLLM(stages={"build.calibrate"})
    client = LLMClient(llm, cache=cache, concurrency=1)
    with Memory(open_store(store_url), HashEmbedder(), llm=client) as memory:
        memory.add_messages("c1", messages("secret", sessions=1))
        build, errors = in_thread(lambda: memory.build("c1"))
        llm.wait_for_calls(1)
        assert memory.delete("c1")
        llm.open()
        build.join()
        assert [type(e) for e in errors] == [ConversationGoneError]
        assert cache.count() == 0
