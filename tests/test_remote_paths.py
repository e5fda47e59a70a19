"""Ids that are not URL-safe reach a live ``qemem serve`` as they are, through ``RemoteMemory``
and ``AsyncRemoteMemory`` (each path segment is percent-encoded whole): ``delete('proj#old')``
deletes ``proj#old``, not ``proj``; ``search('proj?x=1')`` searches that conversation."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import pytest

from qemem import AsyncRemoteMemory, RemoteMemory
from qemem.errors import NotFoundError
from serve_helpers import Server, cli

pytestmark = [pytest.mark.server, pytest.mark.slow]

IDS = [
    "proj#old",
    "proj?x=1",
    "50% off",
    "%2F%41",
    "with space",
    "a+b&c=d;e",
    ".",
    "..",
    "über 日本語 😀 \u202eRTL",
    "x" * 1000,
]
"""Conversation and message ids, each also the prefix of another (``proj`` for ``proj#old``)."""


def _message(mid: str, text: str) -> dict[str, str]:
    return {"session_id": "s1", "timestamp": "2024-03-14T19:15:00", "speaker": "Ana"} | {
        "text": text,
        "id": mid,
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    store = str(tmp_path_factory.mktemp("paths") / "memory.db")
    out = cli("keys", "create", "--store", store, "--namespace", "default", "--json")
    key = json.loads(out.splitlines()[-1])["key"]
    live = Server(store, "fake")
    try:
        yield live, key
    finally:
        live.kill()


def _round_trip(memory: RemoteMemory, cid: str) -> None:
    """Every operation naming ``cid`` (and a message of it with the same id) reaches it and
    only it."""
    memory.add_messages("proj", [_message("m", "The prefix conversation.")])
    memory.add_messages(cid, [_message(cid, "I adopted a grey cat."), _message("m2", "Hi.")])
    assert memory.conversation(cid).id == cid
    [hit, *_] = memory.search(cid, "grey cat", k=1)
    assert (hit.conversation, hit.record.id) == (cid, cid)
    assert memory.context(cid, "Which cat?").items
    assert memory.redact_message(cid, "m2").redacted == ["m2"]
    assert memory.delete_message(cid, cid).deleted == [cid]
    with pytest.raises(NotFoundError):
        memory.delete_fact(cid, cid)
    assert memory.delete(cid) and not memory.delete(cid)
    assert [c.id for c in memory.conversations()] == ["proj"]
    assert memory.delete("proj")


@pytest.mark.parametrize("cid", IDS, ids=range(len(IDS)))
def test_remote_memory_sends_each_id_whole(server: tuple[Server, str], cid: str) -> None:
    live, key = server
    with RemoteMemory(live.base, key) as memory:
        _round_trip(memory, cid)


async def _async_round_trip(memory: AsyncRemoteMemory, cid: str) -> None:
    await memory.add_messages("proj", [_message("m", "The prefix conversation.")])
    await memory.add_messages(cid, [_message(cid, "I adopted a grey cat.")])
    assert (await memory.conversation(cid)).id == cid
    [hit] = await memory.search(cid, "grey cat", k=1)
    assert (hit.conversation, hit.record.id) == (cid, cid)
    assert (await memory.delete_message(cid, cid)).deleted == [cid]
    assert await memory.delete(cid) and not await memory.delete(cid)
    assert [c.id for c in await memory.conversations()] == ["proj"]
    assert await memory.delete("proj")


def test_async_remote_memory_sends_each_id_whole(server: tuple[Server, str]) -> None:
    live, key = server

    async def run() -> None:
        async with AsyncRemoteMemory(live.base, key) as memory:
            for cid in IDS:
                await _async_round_trip(memory, cid)

    anyio.run(run)
