"""Durable jobs across real ``qemem serve`` processes (issue 22): ``--workers 2`` on SQLite and
two servers on one PostgreSQL see the same jobs, store appends once, and a job whose process
is killed is picked up by another after its lease. Hash embedder; the offline LLM, or a
``cmd:sleep`` LLM that keeps a build running until its process is killed."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from serve_helpers import CONV, SLOW_LLM, Server, prepared, wait_for


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.delenv("QEMEM_LLM", raising=False)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Collects the servers a test starts; kills them all at its end."""
    started: list[Server] = []
    yield started
    for server in started:
        server.kill()


def _pid(job: dict[str, Any]) -> int:
    return int(str(job["worker"]).split(":")[1])


@pytest.mark.slow
@pytest.mark.server
def test_workers_2_on_sqlite_all_answer_for_a_job_and_one_picks_up_the_other_s_job(
    tmp_path: Path, sample_path: Path, servers: list[Server]
) -> None:
    """The bug of issue 22: a job lived in the memory of the worker that started it, so about
    half the polls of ``GET /v1/jobs/{id}`` reached the other worker and answered 404. Now
    every poll answers, and when the worker running the job is killed, another one starts
    it again once its lease has expired."""
    store = str(tmp_path / "m.db")
    headers = prepared(store, sample_path)
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
    headers = prepared(pg_url, sample_path)
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


@pytest.mark.slow
@pytest.mark.server
def test_a_job_of_a_killed_server_is_picked_up_by_the_other_and_finishes(
    pg_url: str, sample_path: Path, servers: list[Server]
) -> None:
    """Two servers whose LLM never answers in time: the one running the job is killed, the
    other starts it again after the lease; that one is killed too, and a third server (the
    offline LLM) runs the job's last attempt to its end."""
    headers = prepared(pg_url, sample_path)
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
