"""MCP over streamable HTTP, through the official SDK's client against live servers: ``/mcp`` of
``qemem serve`` (and ``qemem mcp --http``, which serves the same app) checks the bearer key of
every request as ``/v1`` does (401 without one, or with a wrong or revoked one), acts on the
key's namespace and refuses writes to a read-only key; its tools are the operation table's."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

import service_helpers
from qemem.cli import app
from qemem.errors import ConfigError
from qemem.keys import revoke_key
from qemem.memory import Memory
from qemem.operations import tools
from serve_helpers import QEMEM, SRC, Server, free_port, wait_for

PIN = "My bank card PIN is 4417."
SECRET = [
    {"session_id": "s1", "timestamp": "2024-03-14T19:15:00", "speaker": "Ana", "text": PIN},
]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
LOCAL_MCP = "http://127.0.0.1:8765/mcp"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    for name in ("QEMEM_LLM", "QEMEM_API_KEY", "QEMEM_STORE"):
        monkeypatch.delenv(name, raising=False)


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def new_key(store: str, namespace: str, *extra: str) -> tuple[str, str]:
    """A new key of ``namespace`` (and its id)."""
    out = cli("keys", "create", "--store", store, "--namespace", namespace, "--json", *extra)
    created = json.loads(out.splitlines()[-1])
    return str(created["key"]), str(created["id"])


def remember_secret(store: str, namespace: str) -> None:
    with Memory.open(store, embedder="hash", namespace=namespace) as memory:
        memory.add_messages("c1", SECRET)


@asynccontextmanager
async def mcp_client(url: str, key: str | None) -> AsyncIterator[Client]:
    """The SDK's client of ``url``, sending ``key`` as a bearer token (no header for None)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def payload(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def error(result: Any) -> str:
    """The text of a tool call's error."""
    assert result.is_error, result.content
    return str(result.content[0].text)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions an exception group holds (the exception itself when it is none)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def refused(url: str, key: str | None) -> bool:
    """Whether the SDK's client is refused by ``url`` with ``key`` (an error response to its
    first request)."""

    async def connect() -> None:
        async with mcp_client(url, key) as client:
            await client.list_tools()

    try:
        anyio.run(connect)
    except Exception as exc:
        assert any(isinstance(leaf, MCPError) for leaf in leaves(exc)), exc
        return True
    return False


def call(url: str, key: str, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """The results of tool ``calls`` made in order by one client sending ``key``."""

    async def run() -> list[Any]:
        async with mcp_client(url, key) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def post(url: str, key: str | None, **headers: str) -> httpx.Response:
    """A raw initialize request to ``url``."""
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **auth, **headers})


@dataclass
class Served:
    """A live ``qemem serve`` over a store with keys: ``a`` (namespace team-a), ``b`` and
    ``b_read`` (read-only) of team-b, whose conversation c1 holds a PIN."""

    server: Server
    store: str
    url: str
    keys: dict[str, str]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    store = str(tmp_path_factory.mktemp("mcp") / "m.db")
    keys = {
        "a": new_key(store, "team-a")[0],
        "b": new_key(store, "team-b")[0],
        "b_read": new_key(store, "team-b", "--read-only")[0],
    }
    remember_secret(store, "team-b")
    server = Server(store, "fake")
    try:
        yield Served(server, store, f"{server.base}/mcp", keys)
    finally:
        server.kill()


@pytest.mark.slow
@pytest.mark.server
def test_no_key_or_a_wrong_key_gets_401(served: Served) -> None:
    known = served.keys["a"]
    forged = known[: known.rindex("_") + 1] + "x" * 43
    for key in (None, "nope", forged):
        r = post(served.url, key)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.headers["content-type"] == "application/problem+json"
        assert "qemem keys create" in r.json()["detail"] and known not in r.text
        assert refused(served.url, key)
    assert post(served.url, known).status_code == 200
    assert httpx.get(served.url, headers={"Authorization": f"Bearer {known}"}).status_code == 405


@pytest.mark.slow
@pytest.mark.server
def test_the_host_header_is_checked(served: Served) -> None:
    r = post(served.url, served.keys["a"], Host="evil.example")
    assert r.status_code == 421


@pytest.mark.slow
@pytest.mark.server
def test_the_tools_are_the_tables(served: Served) -> None:
    async def listed() -> list[Any]:
        async with mcp_client(served.url, served.keys["a"]) as client:
            return list((await client.list_tools()).tools)

    declared = [(t.name, t.description) for t in tools().values()]
    assert [(t.name, t.description) for t in anyio.run(listed)] == declared


@pytest.mark.slow
@pytest.mark.server
def test_a_key_acts_on_its_own_namespace(served: Served) -> None:
    """Key a (team-a) sees nothing of team-b's c1, and its c1 is its own."""
    recall = ("recall", {"conversation": "c1", "query": "bank card PIN"})
    across = ("recall_across", {"conversations": ["c1"], "query": "bank card PIN"})
    listing = ("list_conversations", {})
    before = call(served.url, served.keys["a"], listing, recall, across)
    assert payload(before[0]) == {"conversations": []}
    assert "no conversation" in error(before[1]) and "no conversation" in error(before[2])
    mine = [{**SECRET[0], "text": "Our team meets on Mondays."}]
    a_after = call(
        served.url,
        served.keys["a"],
        ("remember", {"conversation": "c1", "messages": mine}),
        recall,
    )
    assert payload(a_after[0])["turns_added"] == 1
    assert PIN not in json.dumps(payload(a_after[1]))
    [b_recall] = call(served.url, served.keys["b"], recall)
    texts = {t["text"] for t in payload(b_recall)["turns"]}
    assert PIN in texts and "Our team meets on Mondays." not in texts


@pytest.mark.slow
@pytest.mark.server
def test_a_read_only_key_reads_and_cannot_write(served: Served) -> None:
    writes = [
        ("remember", {"conversation": "c1", "messages": SECRET}),
        ("remember", {"conversation": "new", "messages": SECRET}),
        ("forget", {"conversation": "c1"}),
        ("forget_message", {"conversation": "c1", "message": "D1:1"}),
    ]
    read = ("recall", {"conversation": "c1", "query": "bank card PIN"})
    results = call(served.url, served.keys["b_read"], read, *writes)
    assert PIN in {t["text"] for t in payload(results[0])["turns"]}
    assert all("read-only" in error(r) for r in results[1:])
    with Memory.open(served.store, embedder="hash", namespace="team-b", read_only=True) as m:
        assert [c.id for c in m.conversations()] == ["c1"]
        assert [t.text for t in m.turns("c1")] == [PIN]


@pytest.mark.slow
@pytest.mark.server
def test_a_revoked_key_is_refused_at_its_next_request(served: Served) -> None:
    key, key_id = new_key(served.store, "team-b")

    async def revoked_mid_session() -> float:
        async with mcp_client(served.url, key) as client:
            assert not (await client.call_tool("list_conversations", {})).is_error
            cli("keys", "revoke", key_id, "--store", served.store)
            revoked = time.monotonic()
            with pytest.raises(MCPError), anyio.fail_after(30):
                await client.call_tool("recall", {"conversation": "c1", "query": "PIN"})
            return time.monotonic() - revoked

    assert anyio.run(revoked_mid_session) < 3
    assert post(served.url, key).status_code == 401 and refused(served.url, key)


@pytest.mark.slow
def test_mcp_http_without_a_usable_key_or_with_a_namespace_does_not_start(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "m.db")
    remember_secret(store, "default")
    for args, message in (
        (["--namespace", "default"], "drop --namespace"),
        ([], "qemem keys create"),
    ):
        with pytest.raises(ConfigError, match=message):
            CliRunner().invoke(
                app, ["mcp", "--http", "--store", store, *args], catch_exceptions=False
            )
    _, key_id = new_key(store, "default")
    cli("keys", "revoke", key_id, "--store", store)
    with pytest.raises(ConfigError, match="it has none"):
        CliRunner().invoke(app, ["mcp", "--http", "--store", store], catch_exceptions=False)
    fresh = tmp_path / "new.db"
    with pytest.raises(ConfigError, match="it has none"):
        argv = ["mcp", "--http", "--create", "--store", str(fresh)]
        CliRunner().invoke(app, argv, catch_exceptions=False)
    assert not fresh.exists()


def rpc(s: service_helpers.Served, key: str | None, name: str, **args: Any) -> httpx.Response:
    """A ``tools/call`` of tool ``name`` posted to ``/mcp`` of the in-process app (by a
    loopback Host: the app serves 127.0.0.1), with ``key`` as the bearer token."""
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    params = {"name": name, "arguments": args}
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
    return s.client.post(LOCAL_MCP, json=body, headers={**MCP_HEADERS, **auth})


def tool_text(response: httpx.Response) -> tuple[bool, str]:
    """Whether a tools/call answer is a tool error, and its text."""
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    return bool(result.get("isError")), str(result["content"][0]["text"])


def test_mcp_of_the_app_checks_the_key_of_every_request(store_url: str) -> None:
    """In process, on both backends: each tool call is checked and acts as its key may."""
    with service_helpers.served(store_url=store_url) as s:
        listing = s.client.post(LOCAL_MCP, json=INITIALIZE, headers=MCP_HEADERS)
        assert listing.status_code == 401 and listing.headers["www-authenticate"] == "Bearer"
        assert rpc(s, "qm_0_nope", "list_conversations").status_code == 401
        failed, text = tool_text(rpc(s, s.bob, "remember", conversation="c1", messages=SECRET))
        assert not failed and json.loads(text) == {"ids": ["D1:1"], "turns_added": 1}
        failed, text = tool_text(rpc(s, s.alice, "recall", conversation="c1", query="PIN"))
        assert failed and "no conversation" in text and PIN not in text
        assert PIN in tool_text(rpc(s, s.bob, "recall", conversation="c1", query="PIN"))[1]
        failed, text = tool_text(rpc(s, s.reader, "remember", conversation="c9", messages=SECRET))
        assert failed and "read-only" in text
        assert not tool_text(rpc(s, s.reader, "list_conversations"))[0]
        [record] = s.keys.list("bob")
        revoke_key(s.keys, record.id)
        assert rpc(s, s.bob, "list_conversations").status_code == 401
        # another Host (the app serves 127.0.0.1): 401 without a key, 421 with one
        assert s.client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS).status_code == 401
        host = {**MCP_HEADERS, "Authorization": f"Bearer {s.alice}"}
        assert s.client.post("/mcp", json=INITIALIZE, headers=host).status_code == 421
        assert s.client.get("/v1/conversations", headers=s.auth(s.alice)).json() == []


@pytest.mark.slow
@pytest.mark.server
def test_mcp_http_does_not_serve_a_client_without_the_key(tmp_path: Path) -> None:
    """Finding 1: with QEMEM_API_KEY set, ``qemem mcp --http`` gave a client sending no header
    the key's namespace (a stored PIN)."""
    store = str(tmp_path / "m.db")
    key, _ = new_key(store, "team-a")
    remember_secret(store, "team-a")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC, "QEMEM_API_KEY": key, "COLUMNS": "200"}
    log = tmp_path / "stderr.txt"
    with log.open("w") as stderr:
        server = subprocess.Popen(
            [*QEMEM, "mcp", "--http", "--port", str(port), "--store", store],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for(lambda: _listening(url), 60)

        async def recall(key: str | None) -> Any:
            async with mcp_client(url, key) as client:
                return await client.call_tool("recall", {"conversation": "c1", "query": "PIN"})

        assert post(url, None).status_code == 401
        assert refused(url, None)
        turns = payload(anyio.run(recall, key))["turns"]
        assert PIN in {t["text"] for t in turns}
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert "QEMEM_API_KEY is not used over --http" in log.read_text(encoding="utf-8")


def _listening(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
    except httpx.TransportError:
        return False
    return True
