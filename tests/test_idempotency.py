"""Appends with an idempotency key (issue 21, item 8): a retried batch of id-less messages is
stored once and answered with its first response, from any Memory, app or process over the
store; the key with another body is refused; keys expire after the retention."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

import qemem
from qemem import RemoteMemory
from qemem.embed import HashEmbedder
from qemem.errors import ConfigError, InputError, StoreError
from qemem.keys import SQLiteKeyStore, create_key
from qemem.memory import Appended, Memory
from qemem.service import create_app
from qemem.service.mcp_server import create_mcp_server
from qemem.store import SQLiteStore, open_store
from service_helpers import served

BATCH = [  # no ids: only the key makes a retry safe
    {"session_id": "s1", "timestamp": "2024-03-14T19:15:00", "speaker": "Ana", "text": "Hi!"},
    {"session_id": "s1", "timestamp": "2024-03-14T19:16:00", "speaker": "Ben", "text": "Hello."},
]
FIRST = Appended(["D1:1", "D1:2"], 2, 1)


def _memory(url: str, namespace: str = "default", hours: float = 24) -> Memory:
    return Memory(open_store(url), HashEmbedder(), namespace=namespace, idempotency_hours=hours)


@pytest.fixture
def memory(store_url: str) -> Iterator[Memory]:
    with _memory(store_url) as mem:
        yield mem


def _ids(memory: Memory, conversation: str = "c1") -> list[str]:
    return [t.id for t in memory.turns(conversation)]


def test_a_retried_batch_with_its_key_is_stored_once(memory: Memory) -> None:
    assert memory.add_messages("c1", BATCH, idempotency_key="k-1") == FIRST
    assert memory.add_messages("c1", BATCH, idempotency_key="k-1") == FIRST  # the retry
    assert _ids(memory) == ["D1:1", "D1:2"]
    later = memory.add_messages("c1", BATCH[:1], idempotency_key="k-2")  # a new batch
    assert later == Appended(["D1:3"], 1, 0)


def test_without_a_key_a_retry_appends_again(memory: Memory) -> None:
    memory.add_messages("c1", BATCH)
    assert memory.add_messages("c1", BATCH).ids == ["D1:3", "D1:4"]


def test_the_key_with_another_body_is_refused_and_stores_nothing(memory: Memory) -> None:
    memory.add_messages("c1", BATCH, idempotency_key="k-1")
    with pytest.raises(InputError, match="k-1' was already used for a different request"):
        memory.add_messages("c1", [{**BATCH[0], "text": "Bye."}], idempotency_key="k-1")
    with pytest.raises(InputError, match="different request"):
        memory.add_messages("c2", BATCH, idempotency_key="k-1")  # another conversation
    assert _ids(memory) == ["D1:1", "D1:2"]
    assert [c.id for c in memory.conversations()] == ["c1"]


def test_keys_belong_to_their_namespace(store_url: str) -> None:
    with _memory(store_url, "alice") as alice, _memory(store_url, "bob") as bob:
        assert alice.add_messages("c1", BATCH, idempotency_key="k") == FIRST
        assert bob.add_messages("c1", [{**BATCH[0], "text": "Yo."}], idempotency_key="k").ids == [
            "D1:1"
        ]
        assert alice.add_messages("c1", BATCH, idempotency_key="k") == FIRST


@pytest.mark.slow
def test_an_expired_key_is_usable_again_and_purged(store_url: str) -> None:
    with _memory(store_url, hours=0.1 / 3600) as memory:  # kept for 0.1 s
        memory.add_messages("c1", BATCH, idempotency_key="old")
        time.sleep(0.2)
        assert memory.add_messages("c1", BATCH, idempotency_key="old").ids == ["D1:3", "D1:4"]
        time.sleep(0.2)
        memory.add_messages("c1", BATCH[:1], idempotency_key="new")  # purges "old"
        assert memory.store.recorded_response("default", "old", timedelta(days=1)) is None
        assert memory.store.recorded_response("default", "new", timedelta(days=1)) is not None


def test_a_second_memory_on_the_store_replays_the_key(store_url: str) -> None:
    with _memory(store_url) as first:
        first.add_messages("c1", BATCH, idempotency_key="k-1")
    with _memory(store_url) as second:  # another worker, or the process after a restart
        assert second.add_messages("c1", BATCH, idempotency_key="k-1") == FIRST
        assert _ids(second) == ["D1:1", "D1:2"]


def test_concurrent_retries_with_one_key_append_once(store_url: str) -> None:
    workers = [_memory(store_url) for _ in range(4)]  # one store connection each
    out: list[Appended] = []
    lock = threading.Lock()

    def send(memory: Memory) -> None:
        for _ in range(3):
            done = memory.add_messages("c1", BATCH, idempotency_key="k-race")
            with lock:
                out.append(done)

    threads = [threading.Thread(target=send, args=(m,)) for m in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert out == [FIRST] * 12
    assert _ids(workers[0]) == ["D1:1", "D1:2"]
    for memory in workers:
        memory.close()


SCRIPT = """
import json, sys
from qemem.embed import HashEmbedder
from qemem.memory import Memory
from qemem.store import open_store
with Memory(open_store(sys.argv[1]), HashEmbedder()) as memory:
    done = memory.add_messages("c1", json.loads(sys.argv[2]), idempotency_key="k-proc")
print(json.dumps(done.ids))
"""


@pytest.mark.slow
def test_two_processes_sending_one_key_append_once(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    SQLiteStore(store).close()
    env = {**os.environ, "PYTHONPATH": str(Path(qemem.__file__).parent.parent)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, store, json.dumps(BATCH)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(3)
    ]
    results = [proc.communicate(timeout=120) for proc in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert json.loads(out) == ["D1:1", "D1:2"]
    with _memory(store) as memory:
        assert _ids(memory) == ["D1:1", "D1:2"]


def test_turns_and_key_are_written_together(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise StoreError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(memory.store, "record_response", broken)
        with pytest.raises(StoreError, match="disk full"):
            memory.add_messages("c1", BATCH, idempotency_key="k-1")
    assert memory.conversations() == []  # no turns without their key
    with monkeypatch.context() as patch:
        patch.setattr(memory.store, "add_turns", broken)
        with pytest.raises(StoreError, match="disk full"):
            memory.add_messages("c1", BATCH, idempotency_key="k-1")
    assert memory.add_messages("c1", BATCH, idempotency_key="k-1") == FIRST  # no key alone


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "caf\u00e9"])
def test_a_malformed_key_is_refused(empty_memory: Memory, key: str) -> None:
    with pytest.raises(InputError, match="1 to 255 printable ASCII characters"):
        empty_memory.add_messages("c1", BATCH, idempotency_key=key)
    assert empty_memory.conversations() == []


def test_the_retention_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="idempotency_hours must be more than 0"):
        Memory(SQLiteStore(), HashEmbedder(), idempotency_hours=0)


# ------------------------------------------------------------------ HTTP, remote and MCP
def _post(client: TestClient, auth: dict[str, str], key: str | None, body: Any) -> Any:
    headers = auth | ({"Idempotency-Key": key} if key is not None else {})
    return client.post("/v1/conversations/c1/messages", json=body, headers=headers)


def test_http_replays_the_first_response() -> None:
    with served(llm=None) as s:
        first = _post(s.client, s.auth(s.alice), "k-1", {"messages": BATCH})
        again = _post(s.client, s.auth(s.alice), "k-1", {"messages": BATCH})
        assert first.status_code == again.status_code == 200
        assert (
            first.json()
            == again.json()
            == {"ids": ["D1:1", "D1:2"], "turns_added": 2, "sessions_added": 1}
        )
        other = _post(s.client, s.auth(s.alice), "k-1", {"messages": BATCH[:1]})
        assert other.status_code == 422
        assert "already used for a different request" in other.json()["detail"]
        for bad in ("x" * 256, " " * 0):
            assert _post(s.client, s.auth(s.alice), bad, {"messages": BATCH}).status_code == 422
        bob = _post(s.client, s.auth(s.bob), "k-1", {"messages": BATCH[:1]})
        assert bob.status_code == 200 and bob.json()["ids"] == ["D1:1"]  # bob's own keys
        plain = _post(s.client, s.auth(s.alice), None, {"messages": BATCH})
        assert plain.json()["ids"] == ["D1:3", "D1:4"]


@pytest.mark.slow
def test_a_second_app_on_the_store_file_replays_the_key(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with closing(SQLiteKeyStore(path)) as keys:
        alice, _ = create_key(keys, "alice")
    auth = {"Authorization": f"Bearer {alice}"}
    responses = []
    for _ in range(2):  # two workers of `qemem serve --workers 2`
        app = create_app(path, embedder=HashEmbedder())
        with TestClient(app) as client:
            responses.append(_post(client, auth, "k-1", {"messages": BATCH}).json())
    assert responses == [{"ids": ["D1:1", "D1:2"], "turns_added": 2, "sessions_added": 1}] * 2
    with _memory(path, "alice") as memory:
        assert _ids(memory) == ["D1:1", "D1:2"]


def test_remote_memory_sends_the_key() -> None:
    with served(llm=None) as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        assert remote.add_messages("c1", BATCH, idempotency_key="k-1") == FIRST
        assert remote.add_messages("c1", BATCH, idempotency_key="k-1") == FIRST
        with pytest.raises(InputError, match="different request"):
            remote.add_messages("c1", BATCH[:1], idempotency_key="k-1")
        with pytest.raises(InputError, match="printable ASCII"):
            remote.add_messages("c1", BATCH, idempotency_key="new\nline")
        assert [len(c.sessions) for c in remote.conversations()] == [1]
        assert s.app.state.service.memory("alice").turns("c1")[-1].id == "D1:2"


async def _remember_twice(memory: Memory) -> list[Any]:
    async with Client(create_mcp_server(memory)) as client:
        args = {"conversation": "c1", "messages": BATCH, "idempotency_key": "k-1"}
        return [await client.call_tool("remember", args) for _ in range(2)]


def test_mcp_remember_takes_the_key(empty_memory: Memory) -> None:
    results = anyio.run(_remember_twice, empty_memory)
    payloads = [json.loads(r.content[0].text) for r in results]
    assert payloads == [{"ids": ["D1:1", "D1:2"], "turns_added": 2}] * 2
    assert _ids(empty_memory) == ["D1:1", "D1:2"]
