"""Paging through the jobs of a namespace: ``Memory.jobs(limit=, before=)`` on both backends
(newest first, a stable order by creation time then id, ties included), ``GET /v1/jobs`` with
``limit`` and ``cursor`` and its ``X-Next-Cursor``/``Link`` headers, and both remote clients."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from qemem.embed import HashEmbedder
from qemem.errors import InputError, NotFoundError
from qemem.memory import Memory
from qemem.memory.jobs import Job
from qemem.remote import AsyncRemoteMemory, RemoteMemory
from qemem.store import open_store
from qemem.store.jobs import JobTable
from service_helpers import Served, served

JOBS = 11


def table(memory: Memory) -> JobTable:
    jobs = getattr(memory.store, "jobs")  # noqa: B009 - the SQL stores' job table
    assert isinstance(jobs, JobTable)
    return jobs


def make_jobs(jobs: JobTable, namespace: str = "alice", n: int = JOBS) -> list[str]:
    """``n`` jobs of ``namespace``, five of them created at the very same time (ties), and
    every third one done; their ids newest first in the order the listing must follow."""
    ids = [jobs.enqueue(namespace, "build", f"c{k}").id for k in range(n)]
    ties = ids[3:8]
    with jobs._transaction():  # the same creation time: the order between them is the id's
        if ties:
            marks = ", ".join("?" for _ in ties)
            jobs._exec(f"UPDATE jobs SET created = 1000.0 WHERE id IN ({marks})", ties)
        for job_id in ids[::3]:
            jobs._exec("UPDATE jobs SET status = 'done' WHERE id = ?", (job_id,))
    rows = [jobs.get(i) for i in ids]
    return [r.id for r in sorted(rows, key=lambda r: (r.created, r.id), reverse=True) if r]


def pages(list_page: object, limit: int, status: str | None = None) -> list[list[Job]]:
    """Every page, following ``before`` = the last job of the previous one."""
    out: list[list[Job]] = []
    before = None
    while True:
        page = list_page(status, limit=limit, before=before)  # type: ignore[operator]
        if not page:
            return out
        out.append(page)
        before = page[-1].id


@pytest.fixture
def memory(store_url: str) -> Iterator[Memory]:
    with Memory(open_store(store_url), HashEmbedder(), namespace="alice") as mem:
        yield mem


def test_pages_list_every_job_once_newest_first_on_both_backends(memory: Memory) -> None:
    order = make_jobs(table(memory))
    table(memory).enqueue("bob", "build", "c1")  # another namespace's: never listed
    everything = memory.jobs(limit=500)
    assert [j.id for j in everything] == order
    assert [j.id for j in memory.jobs()] == order  # the default page (50) holds them all
    for limit in (1, 3, 4, JOBS, JOBS + 1):
        got = pages(memory.jobs, limit)
        assert all(len(p) == limit for p in got[:-1]) and 1 <= len(got[-1]) <= limit
        assert [j.id for p in got for j in p] == order, limit
    done = [j.id for j in everything if j.status == "done"]
    assert len(done) == 4
    assert [j.id for p in pages(memory.jobs, 3, "done") for j in p] == done
    assert memory.jobs(limit=2, before=order[-1]) == []


def test_a_bad_page_is_refused(memory: Memory) -> None:
    order = make_jobs(table(memory), n=2)
    assert len(order) == 2
    for bad in (0, 501, -1, True, 2.5):
        with pytest.raises(InputError, match="limit must be a whole number from 1 to 500"):
            memory.jobs(limit=bad)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError, match="no job 'job-nope' to list the jobs after"):
        memory.jobs(before="job-nope")
    bob = Memory(memory.store, memory.embedder, namespace="bob")
    with pytest.raises(NotFoundError):  # another namespace's job is no cursor
        bob.jobs(before=order[0])
    with pytest.raises(InputError, match="unknown job status"):
        memory.jobs("finished", limit=5)


def _next(response: httpx.Response) -> str | None:
    return response.headers.get("X-Next-Cursor")


def test_the_http_route_pages_with_a_next_cursor() -> None:
    with served() as s:
        order = make_jobs(table(Memory(s.store, HashEmbedder())))
        h = s.auth(s.alice)
        first = s.client.get("/v1/jobs", params={"limit": 4}, headers=h)
        assert first.status_code == 200, first.text
        assert [j["id"] for j in first.json()] == order[:4]  # the body is still a list
        assert _next(first) == order[3]
        link = first.headers["Link"]
        assert link.startswith("</v1/jobs?") and link.endswith('>; rel="next"')
        assert f"cursor={order[3]}" in link and "limit=4" in link
        seen, response = [], first
        while (cursor := _next(response)) is not None:
            seen += [j["id"] for j in response.json()]
            response = s.client.get("/v1/jobs", params={"limit": 4, "cursor": cursor}, headers=h)
        seen += [j["id"] for j in response.json()]
        assert seen == order and len(response.json()) == JOBS - 8
        assert "Link" not in response.headers
        exact = s.client.get("/v1/jobs", params={"limit": JOBS}, headers=h)
        assert len(exact.json()) == JOBS and _next(exact) is None  # nothing follows a full page
        assert [j["id"] for j in s.client.get("/v1/jobs", headers=h).json()] == order
        done = s.client.get("/v1/jobs", params={"status": "done", "limit": 3}, headers=h)
        assert _next(done) is not None and {j["status"] for j in done.json()} == {"done"}
        for bad in ({"limit": 0}, {"limit": 501}, {"limit": "x"}):
            assert s.client.get("/v1/jobs", params=bad, headers=h).status_code == 422
        gone = s.client.get("/v1/jobs", params={"cursor": "job-nope"}, headers=h)
        assert gone.status_code == 404 and "list from the start" in gone.json()["detail"]
        assert s.client.get("/v1/jobs", headers=s.auth(s.bob)).json() == []


async def _async_pages(s: Served, limit: int) -> list[list[Job]]:
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=s.app), base_url="http://testserver"
    )
    async with AsyncRemoteMemory("http://testserver", s.alice, client=client) as remote:
        out, before = [], None
        while page := await remote.jobs(limit=limit, before=before):
            out.append(page)
            before = page[-1].id
        return out


@pytest.mark.slow
def test_both_remote_clients_page_like_the_library() -> None:
    with served() as s:
        local = Memory(s.store, HashEmbedder(), namespace="alice")
        order = make_jobs(table(local))
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        got = pages(remote.jobs, 3)
        assert [[j.id for j in p] for p in got] == [[j.id for j in p] for p in pages(local.jobs, 3)]
        assert [j.id for p in got for j in p] == order
        assert [j.id for j in remote.jobs("done", limit=500)] == [
            j.id for j in local.jobs("done", limit=500)
        ]
        with pytest.raises(InputError):
            remote.jobs(limit=501)
        with pytest.raises(NotFoundError):
            remote.jobs(before="job-nope")
        asynced = anyio.run(_async_pages, s, 4)
        assert [j.id for p in asynced for j in p] == order and len(asynced) == 3


@pytest.mark.slow
def test_the_cli_lists_pages_shows_and_cancels_jobs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from qemem.cli import app

    runner = CliRunner()

    def qemem(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, [*args, "--store", store, "--namespace", "alice"])
        assert result.exit_code == code, result.output
        return result.output + (str(result.exception) if code else "")

    store = str(tmp_path / "m.db")
    with Memory(open_store(store), HashEmbedder(), namespace="alice") as memory:
        order = make_jobs(table(memory))
    first = json.loads(qemem("jobs", "list", "--limit", "4", "--json").splitlines()[0])
    assert [j["id"] for j in first] == order[:4]
    assert f"more jobs follow: add --before {order[3]}" in qemem("jobs", "list", "--limit", "4")
    seen, before = [], None
    while True:
        extra = ["--before", before] if before else []
        page = json.loads(qemem("jobs", "list", "--limit", "5", "--json", *extra).splitlines()[0])
        if not page:
            break
        seen += [j["id"] for j in page]
        before = page[-1]["id"]
    assert seen == order
    done = json.loads(qemem("jobs", "list", "--status", "done", "--json").splitlines()[0])
    assert {j["status"] for j in done} == {"done"} and len(done) == 4
    table_out = qemem("jobs", "list")
    assert all(job_id in table_out for job_id in order) and "more jobs" not in table_out
    assert "limit must be a whole number" in qemem("jobs", "list", "--limit", "0", code=1)
    assert "unknown job status" in qemem("jobs", "list", "--status", "nope", code=1)
    queued = next(j for j in first if j["status"] == "queued")
    shown = json.loads(qemem("jobs", "show", queued["id"], "--json"))
    assert shown == queued
    assert "queued" in qemem("jobs", "show", queued["id"])
    assert f"cancelled {queued['id']} (it was queued)" in qemem("jobs", "cancel", queued["id"])
    assert "cancelled already: nothing to cancel" in qemem("jobs", "cancel", queued["id"])
    assert json.loads(qemem("jobs", "show", queued["id"], "--json"))["status"] == "cancelled"
    assert "no job 'job-nope'" in qemem("jobs", "show", "job-nope", code=1)
