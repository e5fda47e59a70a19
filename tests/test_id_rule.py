"""Every id that can be stored can be addressed (issue 30, finding 5): no id may contain '/'
(refused with a 422 or an error naming the rule wherever an id is created or named in an HTTP
path); ids stored before the rule are listed when the store migrates and the CLI deletes them;
ids with '#', '?', '%', spaces, Unicode and 1,000 characters round-trip through the library,
the CLI, HTTP and MCP."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import numpy as np
import pytest
from mcp import Client
from typer.testing import CliRunner

from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import InputError
from qemem.memory import Memory
from qemem.memory_file import MemoryFile, parse, to_dict
from qemem.models import ID_RULE, Episode, Session, Turn
from qemem.service.mcp_server import create_mcp_server
from qemem.store import Scope, open_store, parse_store_url, postgres_schema, schema
from qemem.store.ddl import IDEMPOTENCY
from service_helpers import served

runner = CliRunner()
ODD_IDS = ["a#b", "what?x=1&y", "100% sure", "two words", "café ☕ 会话", "x" * 1000]
"""Ids that must work everywhere: URL-special characters, spaces, Unicode, 1,000 characters."""


def _message(text: str, mid: str | None = None, n: int = 1) -> dict[str, str]:
    message = {
        "session_id": "s1",
        "timestamp": f"2024-03-14T19:{n:02d}:00",
        "speaker": "Ana",
        "text": text,
    }
    return message | ({"id": mid} if mid is not None else {})


@pytest.fixture
def memory(store_url: str) -> Iterator[Memory]:
    with Memory(open_store(store_url), HashEmbedder()) as mem:
        yield mem


# ------------------------------------------------------------------ the rule, library
def test_the_library_refuses_new_ids_with_a_slash_and_stores_nothing(memory: Memory) -> None:
    with pytest.raises(InputError, match=ID_RULE):
        memory.add_messages("c", [_message("hello", "msg/1")])
    with pytest.raises(InputError, match=ID_RULE):
        memory.add_messages("team/c", [_message("hello", "m1")])
    with pytest.raises(InputError, match=ID_RULE):
        memory.ingest([parse_conversation("a/b")])
    assert memory.conversations() == []


def parse_conversation(cid: str) -> Any:
    from qemem.ingest.generic import parse_generic

    [conv] = parse_generic([{**_message("hi", "m1"), "conversation_id": cid}], "<test>")
    return conv


def test_a_memory_file_with_a_slashed_record_id_is_refused(memory: Memory) -> None:
    memory.add_messages("c", [_message("I adopted a cat.", "m1")])
    turn = memory.turns("c")[0]
    episode = Episode("E/1", "c", 1, "Cat", "Ana adopted a cat.", turn.timestamp, ("m1",))
    written = to_dict(MemoryFile("c", "", (episode,), ()))
    with pytest.raises(InputError, match=ID_RULE):
        parse(written)
    with pytest.raises(InputError, match=ID_RULE):
        memory.import_memory(MemoryFile("c", "", (episode,), ()))
    assert memory.episodes("c") == []


# ------------------------------------------------------------------ the rule, HTTP
def test_http_refuses_slashes_in_ids_with_a_422_naming_the_rule() -> None:
    with served(llm=None) as s:
        auth = s.auth(s.alice)
        body = {"messages": [_message("hello", "msg/1")]}
        created = s.client.post("/v1/conversations/c/messages", json=body, headers=auth)
        assert created.status_code == 422 and ID_RULE in created.json()["detail"]
        first = {"messages": [_message("hi", "m1")]}
        s.client.post("/v1/conversations/c/messages", json=first, headers=auth)
        for method, path in (
            ("DELETE", "/v1/conversations/c/messages/msg%2F1"),
            ("POST", "/v1/conversations/c/messages/msg%2f1/redact"),
            ("DELETE", "/v1/conversations/c/facts/S%2F1"),
            ("GET", "/v1/conversations/team%2Fc"),
            ("POST", "/v1/conversations/team%2Fc/messages"),
        ):
            answer = s.client.request(method, path, headers=auth, json=body)
            assert answer.status_code == 422, (path, answer.text)
            assert ID_RULE in answer.json()["detail"]
            assert answer.headers["content-type"] == "application/problem+json"
        assert [t.id for t in s.app.state.service.memory("alice").turns("c")] == ["m1"]


# ------------------------------------------------------------------ ids stored before
UNDO_ROLES = (
    "DROP TABLE fact_turns; ALTER TABLE turns DROP COLUMN role; ALTER TABLE facts DROP COLUMN kind;"
)
"""Undoes the step that gave turns a role and facts a kind (SQLite 13, PostgreSQL 12)."""


def _slashed_store(url: str) -> None:
    """A store holding a message and a conversation with '/' in their ids (written below the
    library, as qemem wrote them before the rule), at the schema before the rule: the tables of
    the later steps (idempotency's conversation, corrections, roles and fact kinds, history
    items, passages) undone."""
    with closing(open_store(url)) as store, store.transaction():
        for cid, tid in (("c", "msg/1"), ("team/c", "m1")):
            scope = Scope(cid)
            when = Session(1, _stamp(), "s1")
            store.put_conversation(scope, ["Ana"])
            store.add_sessions(scope, [when])
            turn = Turn(tid, cid, 1, 0, "Ana", "a secret said long ago", when.date_time)
            store.add_turns(scope, [turn], np.ones((1, 8), dtype=np.float32) / 8**0.5, "hash-8")
    backend, target = parse_store_url(url)
    if backend == "sqlite":
        with closing(sqlite3.connect(target, isolation_level=None)) as conn:
            conn.executescript(
                f"DROP TABLE idempotency; {IDEMPOTENCY} DROP TABLE corrections; {UNDO_ROLES} "
                "DROP TABLE items; DROP TABLE passages; "
                f"PRAGMA user_version = {schema.SLASH_RULE - 1};"
            )
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("ALTER TABLE idempotency DROP COLUMN conv")
        conn.execute("DROP TABLE corrections")
        conn.execute(UNDO_ROLES)
        conn.execute("DROP TABLE items")
        conn.execute("DROP TABLE passages")
        conn.execute("UPDATE schema_version SET version = %s", (postgres_schema.SLASH_RULE - 1,))


def _stamp() -> Any:
    from datetime import datetime

    return datetime(2024, 3, 14, 19, 15)


def test_migrating_across_the_rule_lists_the_slashed_ids_and_the_cli_deletes_them(
    store_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slashed_store(store_url)
    with caplog.at_level(logging.WARNING, logger="qemem.store"):
        open_store(store_url).close()
    [warning] = [r.getMessage() for r in caplog.records if r.name == "qemem.store"]
    assert "2 id(s) with '/'" in warning and ID_RULE in warning
    assert "message 'msg/1' of conversation 'c'" in warning
    assert "conversation 'team/c'" in warning and "qemem delete-message" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="qemem.store"):
        open_store(store_url).close()  # migrated: said once
    assert not caplog.records
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash:8")
    done = runner.invoke(
        app, ["delete-message", "msg/1", "-c", "c", "--store", store_url, "--json"]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["deleted"] == ["msg/1"]
    gone = runner.invoke(app, ["delete", "team/c", "--store", store_url])
    assert gone.exit_code == 0, gone.output
    with Memory.open(store_url) as memory:
        assert [c.id for c in memory.conversations()] == ["c"] and memory.turns("c") == []


# ------------------------------------------------------------------ odd ids everywhere
def test_odd_ids_round_trip_through_the_library(memory: Memory) -> None:
    for n, odd in enumerate(ODD_IDS, start=1):
        done = memory.add_messages(odd, [_message(f"note {n} about tomatoes", odd, n)])
        assert done.ids == [odd]
        assert [t.id for t in memory.turns(odd, [odd])] == [odd]
        assert memory.search(odd, "tomatoes")[0].record.id == odd
        assert memory.delete_message(odd, odd).deleted == [odd]
        assert memory.delete(odd)
    assert memory.conversations() == []


def test_odd_ids_round_trip_through_http() -> None:
    with served(llm=None) as s:
        auth = s.auth(s.alice)
        for n, odd in enumerate(ODD_IDS, start=1):
            path = f"/v1/conversations/{quote(odd, safe='')}"
            body = {"messages": [_message(f"note {n} about tomatoes", odd, n)]}
            added = s.client.post(f"{path}/messages", json=body, headers=auth)
            assert added.status_code == 200 and added.json()["ids"] == [odd], added.text
            assert s.client.get(path, headers=auth).json()["id"] == odd
            found = s.client.post(f"{path}/search", json={"query": "tomatoes"}, headers=auth)
            assert found.json()["results"][0]["record"]["id"] == odd
            message = f"{path}/messages/{quote(odd, safe='')}"
            redacted = s.client.post(f"{message}/redact", headers=auth)
            assert redacted.status_code == 200 and redacted.json()["redacted"] == [odd]
            deleted = s.client.delete(message, headers=auth)
            assert deleted.status_code == 200 and deleted.json()["deleted"] == [odd]
            assert s.client.delete(path, headers=auth).status_code == 204
        assert s.client.get("/v1/conversations", headers=auth).json() == []


def test_odd_ids_round_trip_through_mcp_which_refuses_a_slash() -> None:
    async def session(memory: Memory) -> list[Any]:
        out = []
        async with Client(create_mcp_server(memory)) as client:
            slashed = {"conversation": "c", "messages": [_message("hi", "msg/1")]}
            refused = await client.call_tool("remember", slashed)
            assert refused.is_error and ID_RULE in refused.content[0].text
            for n, odd in enumerate(ODD_IDS, start=1):
                message = _message(f"note {n} about tomatoes", odd, n)
                for tool, args in (
                    ("remember", {"conversation": odd, "messages": [message]}),
                    ("recall", {"conversation": odd, "query": "tomatoes", "pool": False}),
                    ("forget_message", {"conversation": odd, "message": odd}),
                    ("forget", {"conversation": odd}),
                ):
                    result = await client.call_tool(tool, args)
                    assert not result.is_error, result.content
                    out.append(json.loads(result.content[0].text))
        return out

    with Memory(open_store(None), HashEmbedder()) as memory:
        results = anyio.run(session, memory)
        assert memory.conversations() == []
    for n, odd in enumerate(ODD_IDS):
        remembered, recalled, forgotten, deleted = results[4 * n : 4 * n + 4]
        assert remembered["ids"] == [odd] and recalled["turns"][0]["id"] == odd
        assert forgotten["deleted"] == [odd] and deleted == {"deleted": True}


def test_odd_ids_round_trip_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.setenv("COLUMNS", "200")
    store = str(tmp_path / "m.db")
    records = [
        {**_message(f"note {n} about tomatoes", odd, n), "conversation_id": odd}
        for n, odd in enumerate(ODD_IDS, start=1)
    ]
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(records), "utf-8")

    def run(*args: str) -> str:
        result = runner.invoke(app, [*args, "--store", store])
        assert result.exit_code == 0, result.output
        return result.output

    run("ingest", str(source), "--quiet")
    listed = json.loads(run("conversations", "--json").splitlines()[-1])
    assert sorted(c["id"] for c in listed) == sorted(ODD_IDS)
    for odd in ODD_IDS:
        hits = json.loads(run("search", "tomatoes", "-c", odd, "--json").splitlines()[-1])
        assert hits[0]["id"] == odd
        assert json.loads(run("redact-message", odd, "-c", odd, "--json"))["redacted"] == [odd]
        assert json.loads(run("delete-message", odd, "-c", odd, "--json"))["deleted"] == [odd]
        run("delete", odd)
    assert json.loads(run("conversations", "--json")) == []
