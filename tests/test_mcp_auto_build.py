"""``qemem mcp --auto-build SECONDS``: refused without an LLM (before a store is created), and
otherwise the MCP server runs the store's build jobs while it is up, over stdio and over
streamable HTTP: a conversation remembered through it is built once it has been quiet."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from qemem.cli import app
from qemem.errors import ConfigError
from qemem.memory import Memory
from qemem.memory.jobs import Job
from service_helpers import MESSAGES

QEMEM = [sys.executable, "-c", "from qemem.cli import main; main()"]
QUIET = "0.3"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    for name in ("QEMEM_LLM", "QEMEM_API_KEY", "QEMEM_STORE"):
        monkeypatch.delenv(name, raising=False)


def wait_for(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def jobs(store: str) -> list[Job]:
    with Memory.open(store, embedder="hash", read_only=True) as memory:
        return memory.jobs()


def built(store: str) -> set[str]:
    """The turn ids the episodes of conversation c1 cover."""
    with Memory.open(store, embedder="hash", read_only=True) as memory:
        return {t for e in memory.episodes("c1") for t in e.turn_ids}


@pytest.mark.slow
@pytest.mark.server
def test_auto_build_without_an_llm_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    runner = CliRunner()
    for extra, message in (([], "auto-build needs an LLM"), (["--llm", "fake"], "more than 0")):
        seconds = "5" if not extra else "0"
        args = ["mcp", "--create", "--store", str(store), "--auto-build", seconds, *extra]
        with pytest.raises(ConfigError, match=message):
            runner.invoke(app, args, catch_exceptions=False)
        assert not store.exists()
    done = subprocess.run(
        [*QEMEM, "mcp", "--create", "--store", str(store), "--auto-build", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "auto-build needs an LLM" in done.stderr and "QEMEM_LLM" in done.stderr
    assert not store.exists()


async def _remember_and_wait(client: Client, store: str) -> dict[str, Any]:
    result = await client.call_tool("remember", {"conversation": "c1", "messages": MESSAGES})
    assert not result.is_error, result.content
    [job] = jobs(store)
    assert job.not_before is not None  # debounced (its quiet time may be over by now)
    deadline = time.monotonic() + 60
    while (job := jobs(store)[0]).status in ("queued", "running"):
        assert time.monotonic() < deadline, "the build never ran"
        await anyio.sleep(0.05)
    listed = await client.call_tool("list_conversations", {})  # the server is still up
    return {"job": job, "listed": json.loads(listed.content[0].text)}


async def _over_stdio(store: str) -> dict[str, Any]:
    argv = ["mcp", "--store", store, "--auto-build", QUIET, "--llm", "fake"]
    params = StdioServerParameters(command=QEMEM[0], args=[*QEMEM[1:], *argv])
    params.env = dict(os.environ)
    async with Client(params) as client:
        return await _remember_and_wait(client, store)


def _new_store(tmp_path: Path) -> str:
    store = str(tmp_path / "m.db")
    with Memory.open(store, embedder="hash"):
        pass
    return store


@pytest.mark.slow
def test_the_stdio_server_builds_what_it_remembers(tmp_path: Path) -> None:
    store = _new_store(tmp_path)
    got = anyio.run(_over_stdio, store)
    assert got["job"].status == "done", got["job"].error
    assert got["job"].attempts == 1 and got["job"].reports[0].episodes > 0
    assert [c["id"] for c in got["listed"]["conversations"]] == ["c1"]
    with Memory.open(store, embedder="hash", read_only=True) as memory:
        assert built(store) == {t.id for t in memory.turns("c1")}


@pytest.mark.slow
def test_without_auto_build_the_mcp_server_runs_no_jobs(tmp_path: Path) -> None:
    store = _new_store(tmp_path)
    with Memory.open(store, embedder="hash", llm="fake") as memory:
        memory.add_messages("c1", MESSAGES)
        queued = memory.enqueue_build("c1")

    async def run() -> None:
        argv = ["mcp", "--store", store, "--llm", "fake"]
        params = StdioServerParameters(command=QEMEM[0], args=[*QEMEM[1:], *argv])
        params.env = dict(os.environ)
        async with Client(params) as client:
            await client.call_tool("remember", {"conversation": "c2", "messages": MESSAGES})
            await anyio.sleep(1.5)  # more than a worker's poll

    anyio.run(run)
    assert [(j.id, j.status) for j in jobs(store)] == [(queued.id, "queued")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.server
def test_the_http_server_builds_what_it_remembers(tmp_path: Path) -> None:
    store = _new_store(tmp_path)
    created = CliRunner().invoke(
        app, ["keys", "create", "--store", store, "--namespace", "default", "--json"]
    )
    key = json.loads(created.output.splitlines()[-1])["key"]
    port = _free_port()
    argv = ["mcp", "--http", "--port", str(port), "--store", store]
    server = subprocess.Popen(
        [*QEMEM, *argv, "--auto-build", QUIET, "--llm", "fake"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for(lambda: _answers(url))

        async def run() -> dict[str, Any]:
            headers = {"Authorization": f"Bearer {key}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                return await _remember_and_wait(client, store)

        got = anyio.run(run)
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert got["job"].status == "done", got["job"].error
    with Memory.open(store, embedder="hash", read_only=True) as memory:
        assert built(store) == {t.id for t in memory.turns("c1")}


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
    except httpx.TransportError:
        return False
    return True
