"""Durable jobs across real ``qemem serve`` processes (issue 22): ``--workers 2`` on SQLite and
two servers on one PostgreSQL see the same jobs, store appends once, and a job whose process
is killed is picked up by another after its lease. Hash embedder; the offline LLM, or a
``cmd:sleep`` LLM that keeps a build running until its process is killed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from qemem.cli import app

QEMEM = [sys.executable, "-c", "from qemem.cli import main; main()"]
SRC = str(Path(__file__).resolve().parents[1] / "src")
SLOW_LLM = "cmd:sleep 4"
"""Every call takes 4 s (then fails): a build stays running until its server is killed."""
CONV = "demo-1"


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.delenv("QEMEM_LLM", raising=False)


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _prepared(store: str, sample_path: Path) -> dict[str, str]:
    """The sample conversation ingested into ``store``; auth headers of a key for it."""
    _cli("ingest", str(sample_path), "--store", store, "--quiet")
    out = _cli("keys", "create", "--store", store, "--namespace", "default", "--json")
    return {"Authorization": f"Bearer {json.loads(out.splitlines()[-1])['key']}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One ``qemem serve`` (its own process group, killed whole at the end)."""

    def __init__(self, store: str, llm: str, *extra: str) -> None:
        self.base = f"http://127.0.0.1:{_free_port()}"
        env = {**os.environ, "PYTHONPATH": SRC, "QEMEM_EMBEDDER": "hash", "QEMEM_LLM": llm}
        port = self.base.rsplit(":", 1)[1]
        self.process = subprocess.Popen(
            [*QEMEM, "serve", "--store", store, "--port", port, "--job-lease", "1", *extra],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for(self._up, 60)

    def _up(self) -> bool:
        assert self.process.poll() is None, "the server exited"
        try:
            return httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def call(self, method: str, path: str, headers: dict[str, str], **kw: Any) -> httpx.Response:
        return httpx.request(method, self.base + path, headers=headers, timeout=10, **kw)

    def job(self, job_id: str, headers: dict[str, str]) -> dict[str, Any]:
        r = self.call("GET", f"/v1/jobs/{job_id}", headers)
        assert r.status_code == 200, r.text
        return dict(r.json())

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Collects the servers a test starts; kills them all at its end."""
    started: list[Server] = []
    yield started
    for server in started:
        server.kill()


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _pid(job: dict[str, Any]) -> int:
    return int(str(job["worker"]).split(":")[1])


def test_workers_2_on_sqlite_all_answer_for_a_job_and_one_picks_up_the_other_s_job(
    tmp_path: Path, sample_path: Path, servers: list[Server]
) -> None:
    """The bug of issue 22: a job lived in the memory of the worker that started it, so about
    half the polls of ``GET /v1/jobs/{id}`` reached the other worker and answered 404. Now
    every poll answers, and when the worker running the job is killed, another one starts
    it again once its lease has expired."""
    store = str(tmp_path / "m.db")
    headers = _prepared(store, sample_path)
    servers.append(server := Server(store, SLOW_LLM, "--workers", "2"))
    job = server.call("POST", f"/v1/conversations/{CONV}/build", headers).json()
    polls = [server.call("GET", f"/v1/jobs/{job['id']}", headers) for _ in range(30)]
    assert [r.status_code for r in polls] == [200] * 30
    wait_for(lambda: server.job(job["id"], headers)["status"] == "running")
    first = server.job(job["id"], headers)
    os.kill(_pid(first), signal.SIGKILL)
    wait_for(lambda: server.job(job["id"], headers)["attempts"] == 2)
    taken = server.job(job["id"], headers)
    assert taken["status"] == "running" and _pid(taken) != _pid(first)
    cancelled = server.call("DELETE", f"/v1/jobs/{job['id']}", headers).json()
    assert cancelled["status"] == "cancelled"
    assert [j["status"] for j in server.call("GET", "/v1/jobs", headers).json()] == ["cancelled"]


def test_two_servers_on_one_postgresql_share_jobs_and_appends(
    pg_url: str, sample_path: Path, servers: list[Server]
) -> None:
    headers = _prepared(pg_url, sample_path)
    servers.extend([one := Server(pg_url, "fake"), two := Server(pg_url, "fake")])
    job = one.call("POST", f"/v1/conversations/{CONV}/build", headers).json()
    assert two.job(job["id"], headers)["id"] == job["id"]  # visible through the other at once
    wait_for(lambda: two.job(job["id"], headers)["status"] == "done")
    assert two.job(job["id"], headers)["reports"][0]["episodes"] > 0
    messages = [
        {
            "session_id": "s1",
            "timestamp": f"2024-03-14T19:{n:02d}:00",
            "speaker": "Ana" if n % 2 else "Ben",
            "text": f"message number {n}",
            "id": f"m{n}",
        }
        for n in range(20)
    ]

    def append(server: Server, n: int) -> int:
        body = {"messages": messages[n : n + 5]}
        return server.call("POST", "/v1/conversations/c2/messages", headers, json=body).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(append, [one, two] * 8, [0, 5, 10, 15] * 4))
    assert codes == [200] * 16
    for server in (one, two):
        conv = server.call("GET", "/v1/conversations/c2", headers).json()
        assert conv["turns"] == 20


def test_a_job_of_a_killed_server_is_picked_up_by_the_other_and_finishes(
    pg_url: str, sample_path: Path, servers: list[Server]
) -> None:
    """Two servers whose LLM never answers in time: the one running the job is killed, the
    other starts it again after the lease; that one is killed too, and a third server (the
    offline LLM) runs the job's last attempt to its end."""
    headers = _prepared(pg_url, sample_path)
    servers.extend([one := Server(pg_url, SLOW_LLM), two := Server(pg_url, SLOW_LLM)])
    job = one.call("POST", f"/v1/conversations/{CONV}/build", headers).json()
    wait_for(lambda: two.job(job["id"], headers)["status"] == "running")
    runner = {s.process.pid: s for s in (one, two)}
    first = _pid(one.job(job["id"], headers))
    runner.pop(first).kill()
    [survivor] = runner.values()
    wait_for(lambda: survivor.job(job["id"], headers)["attempts"] == 2)
    assert _pid(survivor.job(job["id"], headers)) == survivor.process.pid
    survivor.kill()
    servers.append(fast := Server(pg_url, "fake"))
    wait_for(lambda: fast.job(job["id"], headers)["status"] == "done")
    done = fast.job(job["id"], headers)
    assert done["attempts"] == 3 == done["max_attempts"] and done["reports"][0]["episodes"] > 0
