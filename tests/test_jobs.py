"""Durable background jobs on both backends: the jobs table (enqueue, claim under a lease,
heartbeat, retry after an expired lease, cancel, list), the worker that runs builds, the build
lock that lives as long as the job's lease, and the job routes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from qemem.embed import HashEmbedder
from qemem.errors import InputError, JobStoppedError, NotFoundError, StoreError
from qemem.llm import LLMClient
from qemem.llm.types import LLMRequest
from qemem.locks import writer_lock
from qemem.memory import Memory
from qemem.memory.worker import JobWorker
from qemem.store import jobs as store_jobs
from qemem.store import open_store
from qemem.store.jobs import JobTable, Lease
from qemem.testing import OfflineLLM
from qemem.testing.offline import offline_answer
from service_helpers import MESSAGES, served

CONV = "demo-1"


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def table(memory: Memory) -> JobTable:
    jobs = getattr(memory.store, "jobs")  # noqa: B009 - the SQL stores' job table
    assert isinstance(jobs, JobTable)
    return jobs


@pytest.fixture
def memory(store_url: str, sample_path: Path) -> Iterator[Memory]:
    """The sample conversation in a store of each backend, with the offline LLM."""
    with Memory(open_store(store_url), HashEmbedder(), llm="fake", namespace="alice") as mem:
        mem.ingest(sample_path)
        yield mem


def test_enqueue_claim_progress_done_and_list(memory: Memory) -> None:
    jobs = table(memory)
    first = jobs.enqueue("alice", "build", "c1")
    assert jobs.enqueue("alice", "build", "c1").id == first.id  # one active job per conversation
    other = jobs.enqueue("bob", "build", "c1")
    assert other.id != first.id and first.status == "queued" and first.attempts == 0
    claimed = jobs.claim("w1", 30.0)
    assert claimed is not None and claimed.id == first.id  # the oldest first
    assert claimed.status == "running" and claimed.attempts == 1 and claimed.lease_owner == "w1"
    assert jobs.heartbeat(first.id, "w1", 30.0, (3, 10))
    assert jobs.get(first.id) is not None and (
        jobs.get(first.id).done,
        jobs.get(first.id).total,
    ) == (3, 10)  # type: ignore[union-attr]
    assert jobs.finish(first.id, "w1", "done", result="[]")
    assert not jobs.finish(first.id, "w1", "failed", error="late")  # ended once
    again = jobs.enqueue("alice", "build", "c1")
    assert again.id != first.id  # a finished job does not hold the conversation
    assert [j.id for j in jobs.list("alice")] == [again.id, first.id]  # newest first
    assert [j.id for j in jobs.list("alice", "done")] == [first.id]
    assert jobs.get(first.id, "bob") is None and jobs.list("bob")[0].id == other.id


@pytest.mark.slow
def test_an_expired_lease_is_claimed_again_then_failed_after_the_last_attempt(
    memory: Memory,
) -> None:
    jobs = table(memory)
    job = jobs.enqueue("alice", "build", "c1", max_attempts=2)
    assert jobs.claim("dead", 1.0) is not None
    assert jobs.claim("w2", 30.0) is None  # still leased
    time.sleep(1.1)
    retried = jobs.claim("w2", 0.05)
    assert retried is not None and retried.id == job.id and retried.attempts == 2
    assert not jobs.heartbeat(job.id, "dead", 30.0)  # the dead worker lost it
    assert not jobs.finish(job.id, "dead", "done")
    time.sleep(0.1)
    assert jobs.claim("w3", 30.0) is None
    failed = jobs.get(job.id)
    assert failed is not None and failed.status == "failed"
    assert failed.error is not None and "each of its 2 attempts" in failed.error


def test_concurrent_claims_take_each_job_once(memory: Memory) -> None:
    jobs = table(memory)
    queued = {jobs.enqueue("alice", "build", f"c{n}").id for n in range(8)}
    claimed: list[str] = []
    lock = threading.Lock()

    def claim_all(worker: int) -> None:
        while (job := jobs.claim(f"w{worker}", 30.0)) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=claim_all, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(queued)


def test_cancel_queued_running_and_finished_jobs(memory: Memory) -> None:
    jobs = table(memory)
    queued = jobs.enqueue("alice", "build", "c1")
    cancelled = jobs.cancel("alice", queued.id)
    assert cancelled is not None and cancelled.status == "cancelled"
    assert jobs.claim("w1", 30.0) is None
    running = jobs.enqueue("alice", "build", "c1")
    assert jobs.claim("w1", 30.0) is not None
    assert jobs.cancel("bob", running.id) is None  # another namespace's job
    assert jobs.cancel("alice", running.id).status == "cancelled"  # type: ignore[union-attr]
    assert not jobs.heartbeat(running.id, "w1", 30.0)  # the worker learns it must stop
    done = jobs.enqueue("alice", "build", "c1")
    jobs.claim("w1", 30.0)
    jobs.finish(done.id, "w1", "done", result="[]")
    assert jobs.cancel("alice", done.id).status == "done"  # type: ignore[union-attr]


def _worker(memory: Memory, lease_s: float = 5.0) -> JobWorker:
    worker = JobWorker(memory, lambda namespace: memory, lease_s=lease_s)
    worker.start()
    return worker


def test_worker_runs_a_build_job_to_its_reports(memory: Memory) -> None:
    job = memory.enqueue_build(CONV)
    assert memory.build_job(CONV) == job and memory.jobs() == [job]
    worker = _worker(memory)
    try:
        wait_for(lambda: memory.job(job.id).status == "done")
    finally:
        worker.close()
    done = memory.job(job.id)
    assert done.attempts == 1 and done.done == done.total == len(memory.turns(CONV))
    assert done.reports[0].conversation == CONV and done.reports[0].episodes > 0
    assert len(memory.episodes(CONV)) == done.reports[0].episodes
    assert memory.build_job(CONV) is None and memory.jobs("done") == [done]
    assert memory.store.get_state(memory.scope(CONV), "lock.build") == "{}"
    with pytest.raises(NotFoundError):
        memory.enqueue_build("nope")
    with pytest.raises(InputError, match="unknown job status"):
        memory.jobs("finished")


def test_a_restart_resumes_a_queued_job(store_url: str, sample_path: Path) -> None:
    with Memory(open_store(store_url), HashEmbedder(), llm="fake") as before:
        before.ingest(sample_path)
        job = before.enqueue_build(CONV)
    with Memory(open_store(store_url), HashEmbedder(), llm="fake") as after:
        worker = _worker(after)
        try:
            wait_for(lambda: after.job(job.id).status == "done")
        finally:
            worker.close()
        assert after.episodes(CONV)


@pytest.mark.slow
def test_a_job_whose_worker_died_is_retried_and_its_build_lock_abandoned(
    memory: Memory,
) -> None:
    """A dead worker on another host held the job and its build lock: once the lease has
    expired, another worker runs the job, taking the lock over at once (not after hours)."""
    jobs = table(memory)
    job = memory.enqueue_build(CONV)
    assert jobs.claim("otherhost:1:dead", 3.0) is not None
    dead = {"pid": 1, "host": "otherhost", "since": time.time(), "job": job.id}
    lock = json.dumps(dead | {"lease": "otherhost:1:dead"})
    memory.store.set_state(memory.scope(CONV), "lock.build", lock)
    with (  # while the lease holds
        pytest.raises(StoreError, match="another build"),
        writer_lock(memory.store, memory.scope(CONV), "build"),
    ):
        pass
    worker = _worker(memory)
    try:
        wait_for(lambda: memory.job(job.id).status == "done")
    finally:
        worker.close()
    assert memory.job(job.id).attempts == 2 and memory.episodes(CONV)


def test_a_build_lock_lasts_as_long_as_its_lease(memory: Memory) -> None:
    jobs, scope = table(memory), memory.scope(CONV)
    job = jobs.enqueue("alice", "build", CONV)
    jobs.claim("w1", 0.2)
    with writer_lock(memory.store, scope, "build", lease=Lease(job.id, "w1")):
        time.sleep(0.3)  # the lease expired while the lock was held: another may take it
        with writer_lock(memory.store, scope, "build"):
            taken = json.loads(memory.store.get_state(scope, "lock.build") or "{}")
    assert "job" not in taken
    assert memory.store.get_state(scope, "lock.build") == "{}"


def _cancelling_llm(memory: Memory, job: list[str]) -> LLMClient:
    """The offline LLM, which cancels ``job[0]`` at its first call."""

    def handler(request: LLMRequest) -> object:
        if job:
            memory.cancel_job(job.pop())
        return offline_answer(request)

    return LLMClient(OfflineLLM(handler), concurrency=1)


@pytest.mark.slow
def test_cancelling_a_running_build_stops_it_and_a_later_build_resumes(
    store_url: str, sample_path: Path
) -> None:
    with Memory(open_store(store_url), HashEmbedder(), namespace="alice") as memory:
        memory.ingest(sample_path)
        pending: list[str] = []
        cancelling = Memory(
            memory.store, HashEmbedder(), llm=_cancelling_llm(memory, pending), namespace="alice"
        )
        job = cancelling.enqueue_build(CONV)
        pending.append(job.id)
        worker = JobWorker(cancelling, lambda namespace: cancelling, lease_s=5.0)
        worker.start()
        try:
            wait_for(lambda: not pending and memory.job(job.id).status == "cancelled")
            time.sleep(0.3)  # the build stops at its next progress step
            stopped = len(memory.episodes(CONV))
            assert memory.job(job.id).status == "cancelled" and memory.job(job.id).done < 65
            again = cancelling.enqueue_build(CONV)
            wait_for(lambda: memory.job(again.id).status == "done")
        finally:
            worker.close()
        assert len(memory.episodes(CONV)) >= stopped
        assert memory.job(again.id).reports[0].sessions  # it built what was missing


def test_job_routes_list_get_cancel_and_keep_namespaces_apart() -> None:
    with served() as s:
        h, bob = s.auth(s.alice), s.auth(s.bob)
        s.client.post("/v1/conversations/c1/messages", json={"messages": MESSAGES}, headers=h)
        job = s.client.post("/v1/conversations/c1/build", headers=h).json()
        wait_for(
            lambda: s.client.get(f"/v1/jobs/{job['id']}", headers=h).json()["status"] == "done"
        )
        listed = s.client.get("/v1/jobs", headers=h).json()
        assert [j["id"] for j in listed] == [job["id"]] and listed[0]["reports"]
        assert s.client.get("/v1/jobs?status=queued", headers=h).json() == []
        assert s.client.get("/v1/jobs?status=bogus", headers=h).status_code == 422
        assert s.client.get("/v1/jobs", headers=bob).json() == []
        assert s.client.delete(f"/v1/jobs/{job['id']}", headers=bob).status_code == 404
        assert s.client.get(f"/v1/jobs/{job['id']}", headers=bob).status_code == 404
        r = s.client.delete(f"/v1/jobs/{job['id']}", headers=h)
        assert r.status_code == 200 and r.json()["status"] == "done"  # finished: unchanged
        assert s.client.delete(f"/v1/jobs/{job['id']}", headers=s.auth(s.reader)).status_code == 403


def test_a_worker_shutting_down_gives_its_running_job_back_to_the_queue(
    store_url: str, sample_path: Path
) -> None:
    started, closing = threading.Event(), threading.Event()

    def handler(request: LLMRequest) -> object:
        started.set()
        closing.wait(10)
        return offline_answer(request)

    llm = LLMClient(OfflineLLM(handler), concurrency=1)
    with Memory(open_store(store_url), HashEmbedder(), llm=llm) as memory:
        memory.ingest(sample_path)
        job = memory.enqueue_build(CONV)
        worker = _worker(memory)
        assert started.wait(10)
        closing.set()
        worker.close()  # the build stops at its next step
        back = memory.job(job.id)
        assert back.status == "queued" and back.attempts == 0 and back.worker is None
        assert memory.store.get_state(memory.scope(CONV), "lock.build") == "{}"


def test_finished_jobs_are_removed_after_a_week(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = table(memory)
    eight_days_ago = time.time() - 8 * 86400
    monkeypatch.setattr(store_jobs, "time", SimpleNamespace(time=lambda: eight_days_ago))
    old = jobs.enqueue("alice", "build", "c1")
    jobs.claim("w1", 30.0)
    jobs.finish(old.id, "w1", "done", result="[]")
    stuck = jobs.enqueue("alice", "build", "c2")  # queued a week ago: kept
    monkeypatch.undo()
    new = jobs.enqueue("alice", "build", "c1")
    assert [j.id for j in jobs.list("alice")] == [new.id, stuck.id]


@pytest.mark.slow
def test_a_server_without_an_llm_leaves_builds_to_servers_with_one() -> None:
    with served(llm=None) as s:
        h = s.auth(s.alice)
        s.client.post("/v1/conversations/c1/messages", json={"messages": MESSAGES}, headers=h)
        job = Memory(s.store, HashEmbedder(), llm="fake", namespace="alice").enqueue_build("c1")
        time.sleep(1.5)  # more than a worker's poll
        assert s.client.get(f"/v1/jobs/{job.id}", headers=h).json()["status"] == "queued"


def test_a_bad_llm_spec_does_not_stop_the_server_from_starting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with served(llm="nosuch:model") as s:
        assert s.client.get("/healthz").status_code == 200
    assert "runs no background builds" in caplog.text and "nosuch" in caplog.text


class _Unreachable:
    """A job table whose store cannot be reached."""

    def heartbeat(self, *args: object) -> bool:
        raise StoreError("store unreachable")


@pytest.mark.slow
def test_a_job_that_cannot_renew_its_lease_stops_once_the_lease_is_over() -> None:
    from qemem.memory.worker import _Run

    with _Run(_Unreachable(), Lease("job-1", "w1"), 0.3, threading.Event()) as run:  # type: ignore[arg-type]
        run.progress(1, 10)  # the lease may still be ours
        time.sleep(0.4)
        with pytest.raises(JobStoppedError, match="its lease ran out"):
            run.progress(2, 10)
