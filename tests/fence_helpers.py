"""Helpers of the fencing and id tests: tagged messages, what a conversation stores, a memory
whose LLM waits at a ``BlockingLLM`` gate, and a call run in a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from qemem.embed import HashEmbedder
from qemem.llm import LLMClient
from qemem.memory import Memory
from qemem.store import open_store
from qemem.testing import BlockingLLM


def messages(tag: str, sessions: int = 2, per_session: int = 4) -> list[dict[str, Any]]:
    """Id-less messages whose texts all carry ``tag`` (to find them in whatever is stored)."""
    return [
        {
            "session_id": f"s{s}",
            "timestamp": f"2024-0{s}-01T10:0{n}:00",
            "speaker": ("Ana", "Ben")[n % 2],
            "text": f"{tag} message {n} of session {s}: the {tag} cat sleeps on the {tag} mat.",
        }
        for s in range(1, sessions + 1)
        for n in range(per_session)
    ]


def stored_text(memory: Memory, conversation: str) -> str:
    """Every text the conversation's records hold (turns, episodes, facts)."""
    parts = [t.text for t in memory.turns(conversation)]
    parts += [f"{e.title} {e.content}" for e in memory.episodes(conversation)]
    parts += [f.content for f in memory.facts(conversation, include_superseded=True)]
    return "\n".join(parts)


@contextmanager
def gated_memory(store_url: str, stage: str) -> Iterator[tuple[Memory, BlockingLLM]]:
    """A memory over the store ``store_url`` names whose LLM calls of ``stage`` wait at the
    gate (opened at the end, so no thread is left waiting)."""
    llm = BlockingLLM(stages={stage})
    memory = Memory(open_store(store_url), HashEmbedder(), llm=LLMClient(llm))
    try:
        yield memory, llm
    finally:
        llm.open()
        memory.close()


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    """``call`` running in a started thread, and the list its exception lands in."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors
