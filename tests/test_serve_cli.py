"""`qemem keys`, `qemem serve` and `qemem mcp` as a user runs them (real processes for serve and
the stdio MCP server; hash embedder)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from typer.testing import CliRunner

from qemem.cli import app
from qemem.errors import AuthError, ConfigError
from qemem.service.app import app_from_env
from service_helpers import MCP_TOOLS, MESSAGES

runner = CliRunner()
QEMEM = [sys.executable, "-c", "from qemem.cli import main; main()"]


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.delenv("QEMEM_LLM", raising=False)
    monkeypatch.delenv("QEMEM_API_KEY", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def new_key(store: str, namespace: str, *extra: str) -> str:
    out = invoke("keys", "create", "--store", store, "--namespace", namespace, "--json", *extra)
    created = json.loads(out.splitlines()[-1])
    assert created["namespace"] == namespace and created["key"].startswith("qm_")
    return str(created["key"])


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    key = new_key(store, "team-a", "--read-only", "--label", "ci")
    [listed] = json.loads(invoke("keys", "list", "--store", store, "--json").splitlines()[-1])
    assert listed["namespace"] == "team-a" and listed["read_only"] and listed["label"] == "ci"
    assert key not in invoke("keys", "list", "--store", store)
    invoke("keys", "revoke", listed["id"], "--store", store)
    os.environ["QEMEM_API_KEY"] = key
    try:
        with pytest.raises(AuthError, match="revoked"):
            runner.invoke(app, ["mcp", "--store", store], catch_exceptions=False)
    finally:
        del os.environ["QEMEM_API_KEY"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.server
def test_serve_answers_on_localhost(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    key = new_key(store, "team-a")
    port = _free_port()
    server = subprocess.Popen(
        [*QEMEM, "serve", "--store", store, "--port", str(port), "--idempotency-hours", "0.5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(150):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        headers = {"Authorization": f"Bearer {key}"}
        r = httpx.post(
            f"{base}/v1/conversations/c1/messages", json={"messages": MESSAGES}, headers=headers
        )
        assert r.status_code == 200 and r.json()["turns_added"] == 3
        retried = [
            httpx.post(
                f"{base}/v1/conversations/c1/messages",
                json={"messages": MESSAGES[2:]},
                headers={**headers, "Idempotency-Key": "batch-7"},
            ).json()
            for _ in range(2)
        ]
        assert retried == [{"ids": ["D2:2"], "turns_added": 1, "sessions_added": 0}] * 2
        assert httpx.get(f"{base}/v1/conversations").status_code == 401
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.slow
def test_serve_takes_the_idempotency_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(tmp_path / "m.db")
    new_key(store, "team-a")
    with pytest.raises(ConfigError, match="--idempotency-hours must be more than 0"):
        runner.invoke(
            app, ["serve", "--store", store, "--idempotency-hours", "0"], catch_exceptions=False
        )
    monkeypatch.setenv("QEMEM_STORE", store)
    monkeypatch.setenv("QEMEM_IDEMPOTENCY_HOURS", "2.5")
    served = app_from_env()
    assert served.state.service.memory("team-a").idempotency_hours == 2.5
    served.state.service.close()
    monkeypatch.setenv("QEMEM_IDEMPOTENCY_HOURS", "a day")
    with pytest.raises(ConfigError, match="QEMEM_IDEMPOTENCY_HOURS must be a number"):
        app_from_env()


async def _stdio_tools(store: str, key: str) -> tuple[set[str], str]:
    env = {**os.environ, "QEMEM_API_KEY": key}
    params = StdioServerParameters(command=QEMEM[0], args=[*QEMEM[1:], "mcp", "--store", store])
    params.env = env
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        listed = await client.call_tool("list_conversations", {})
        return tools, listed.content[0].text


@pytest.mark.slow
def test_mcp_over_stdio_serves_the_keys_namespace(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    key = new_key(store, "team-a")
    records = [{**m, "conversation_id": "c1", "namespace": "team-a"} for m in MESSAGES]
    (tmp_path / "chat.json").write_text(json.dumps(records), encoding="utf-8")
    invoke("ingest", str(tmp_path / "chat.json"), "--store", store, "--quiet")
    tools, listed = anyio.run(_stdio_tools, store, key)
    assert tools == MCP_TOOLS
    assert [c["id"] for c in json.loads(listed)["conversations"]] == ["c1"]
