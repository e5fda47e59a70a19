"""Memory that builds itself (``auto_build``): an append schedules the conversation's build
for when it has been quiet that long, a burst of appends makes one job that any worker runs
once, an append during a running build makes it run again, and no LLM means no auto-build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from qemem.embed import HashEmbedder
from qemem.errors import ConfigError
from qemem.memory import Memory
from qemem.memory.worker import JobWorker
from qemem.store import open_store
from qemem.store.jobs import JobTable
from service_helpers import served

QUIET = 0.3
QEMEM = [sys.executable, "-c", "from qemem.cli import main; main()"]


def message(n: int, session: str = "s1") -> dict[str, str]:
    return {
        "session_id": session,
        "timestamp": f"2024-03-14T19:{n:02d}:00",
        "speaker": "Ana" if n % 2 else "Ben",
        "text": f"Message {n}: I adopted a grey cat named Pixel {n} days ago.",
        "id": f"m{n}",
    }


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
def memory(store_url: str) -> Iterator[Memory]:
    store = open_store(store_url)
    with Memory(store, HashEmbedder(), llm="fake", namespace="alice", auto_build=QUIET) as mem:
        yield mem


@pytest.mark.slow
def test_a_burst_of_appends_makes_one_job_pushed_back_by_each_append(memory: Memory) -> None:
    first = memory.add_messages("c1", [message(1)])
    assert first.turns_added == 1
    [job] = memory.jobs()
    assert job.status == "queued" and job.not_before is not None
    for n in range(2, 6):
        time.sleep(QUIET / 3)
        memory.add_messages("c1", [message(n)])
        later = memory.job(job.id)
        assert later.not_before is not None and later.not_before > job.not_before
        job = later
    assert [j.id for j in memory.jobs()] == [job.id]  # one job for the whole burst
    assert table(memory).claim("w", 30.0) is None  # not quiet yet
    memory.add_messages("c1", [message(5)])  # a retry adds nothing: the job is not pushed back
    assert memory.job(job.id).not_before == job.not_before
    time.sleep(QUIET + 0.05)
    claimed = table(memory).claim("w", 30.0)
    assert claimed is not None and claimed.id == job.id and claimed.not_before is None


@pytest.mark.slow
def test_the_worker_builds_the_conversation_once_it_is_quiet(memory: Memory) -> None:
    worker = JobWorker(memory, lambda namespace: memory, lease_s=5.0)
    worker.start()
    try:
        for n in range(1, 5):
            memory.add_messages("c1", [message(n)])
        [job] = memory.jobs()
        wait_for(lambda: memory.job(job.id).status == "done")
        done = memory.job(job.id)
        assert done.attempts == 1 and done.reports[0].episodes > 0
        covered = {t for e in memory.episodes("c1") for t in e.turn_ids}
        assert covered == {t.id for t in memory.turns("c1")}
        time.sleep(QUIET + 1.2)  # more than the wait and a worker's poll: nothing else runs
        assert [j.id for j in memory.jobs()] == [job.id]
    finally:
        worker.close()


@pytest.mark.slow
def test_an_append_during_a_running_build_makes_it_run_again(memory: Memory) -> None:
    memory.add_messages("c1", [message(1)])
    [job] = memory.jobs()
    time.sleep(QUIET + 0.05)
    jobs = table(memory)
    running = jobs.claim("w", 30.0)
    assert running is not None and running.id == job.id
    memory.add_messages("c1", [message(2)])  # the running build may not see it
    assert [j.id for j in memory.jobs()] == [job.id]
    assert jobs.finish(job.id, "w", "done", result="[]")
    again = memory.build_job("c1")
    assert again is not None and again.id != job.id and again.status == "queued"
    assert again.not_before is not None
    assert memory.job(job.id).status == "done"


def test_an_explicit_build_request_starts_a_waiting_auto_build_now(memory: Memory) -> None:
    memory.add_messages("c1", [message(1)])
    job = memory.enqueue_build("c1")
    assert job.not_before is None
    claimed = table(memory).claim("w", 30.0)
    assert claimed is not None and claimed.id == job.id


def test_auto_build_without_an_llm_is_refused(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QEMEM_LLM", raising=False)
    store = open_store(store_url)
    try:
        with pytest.raises(ConfigError, match=r"auto-build needs an LLM.*QEMEM_LLM"):
            Memory(store, HashEmbedder(), auto_build=1.0)
        with pytest.raises(ConfigError, match="more than 0"):
            Memory(store, HashEmbedder(), llm="fake", auto_build=0)
        with (
            pytest.raises(ConfigError, match="auto-build needs an LLM"),
            served(llm=None, auto_build=1.0),
        ):
            pass
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.server
def test_qemem_serve_refuses_auto_build_without_an_llm(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "QEMEM_LLM"}
    done = subprocess.run(
        [*QEMEM, "serve", "--create", "--store", str(tmp_path / "m.db"), "--auto-build", "5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "auto-build needs an LLM" in done.stderr + done.stdout
    assert not (tmp_path / "m.db").exists()  # refused before anything was created


@pytest.mark.slow
def test_the_service_schedules_builds_of_appended_conversations() -> None:
    with served(auto_build=QUIET) as s:
        h = s.auth(s.alice)
        for n in range(1, 4):
            r = s.client.post(
                "/v1/conversations/c1/messages", json={"messages": [message(n)]}, headers=h
            )
            assert r.status_code == 200, r.text
        [job] = s.client.get("/v1/jobs", headers=h).json()
        assert job["not_before"] is not None  # the debounce is visible
        wait_for(
            lambda: s.client.get(f"/v1/jobs/{job['id']}", headers=h).json()["status"] == "done"
        )
        built = Memory(s.store, HashEmbedder(), namespace="alice")
        covered = {t for e in built.episodes("c1") for t in e.turn_ids}
        assert covered == {"m1", "m2", "m3"}


@pytest.mark.slow
def test_later_appends_build_only_the_new_material(memory: Memory) -> None:
    worker = JobWorker(memory, lambda namespace: memory, lease_s=5.0)
    worker.start()
    try:
        memory.add_messages("c1", [message(n) for n in range(1, 9)])
        memory.add_messages("c1", [message(n, "s2") for n in range(20, 28)])
        wait_for(lambda: bool(memory.jobs("done")))
        before = memory.episodes("c1")
        memory.add_messages("c1", [message(n) for n in range(9, 12)])
        wait_for(lambda: len(memory.jobs("done")) == 2)
    finally:
        worker.close()
    after = memory.episodes("c1")
    [two] = {t.session for t in memory.turns("c1", ["m20"])}
    assert [e for e in before if e.session == two]
    assert [e for e in after if e.session == two] == [e for e in before if e.session == two]
    assert len(after) > len([e for e in before if e.session == two])
    covered = [t for e in after for t in e.turn_ids]
    assert sorted(covered) == sorted(t.id for t in memory.turns("c1"))


def _chat_file(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    return path


def test_an_ingest_of_new_turns_schedules_one_build_per_conversation(
    memory: Memory, tmp_path: Path
) -> None:
    records = [{**message(n), "conversation_id": "c1"} for n in range(1, 4)]
    records += [{**message(n), "conversation_id": "c2"} for n in range(1, 3)]
    chat = _chat_file(tmp_path / "chat.jsonl", records)
    report = memory.ingest(chat)
    assert report.added == {"c1": (1, 3), "c2": (1, 2)}
    jobs = memory.jobs()
    assert sorted(j.conversation for j in jobs) == ["c1", "c2"]
    assert all(j.status == "queued" and j.kind == "build" for j in jobs)
    assert all(j.not_before is not None for j in jobs)  # debounced like an append
    assert table(memory).claim("w", 30.0) is None  # not quiet yet
    waits = {j.id: j.not_before for j in jobs}
    again = memory.ingest(chat)  # identical input adds nothing, so schedules nothing
    assert again.added == {"c1": (0, 0), "c2": (0, 0)}
    assert {j.id: j.not_before for j in memory.jobs()} == waits
    more = [*records, {**message(9), "conversation_id": "c1"}]  # the file, one turn longer
    assert memory.ingest(_chat_file(tmp_path / "more.jsonl", more)).added["c1"] == (0, 1)
    [c1] = [j for j in memory.jobs() if j.conversation == "c1"]
    assert c1.id in waits and c1.not_before is not None and c1.not_before > waits[c1.id]
    assert len(memory.jobs()) == 2


def test_an_ingest_into_another_namespace_schedules_that_namespaces_build(
    memory: Memory, tmp_path: Path
) -> None:
    records = [{**message(1), "conversation_id": "c1", "namespace": "bob"}]
    memory.ingest(_chat_file(tmp_path / "chat.jsonl", records))
    assert memory.jobs() == []  # alice's: none
    bob = Memory(memory.store, memory.embedder, namespace="bob")
    [job] = bob.jobs()
    assert (job.conversation, job.status) == ("c1", "queued")


def test_an_ingest_without_auto_build_schedules_nothing(store_url: str, tmp_path: Path) -> None:
    records = [{**message(1), "conversation_id": "c1"}]
    with Memory(open_store(store_url), HashEmbedder(), llm="fake") as plain:
        plain.ingest(_chat_file(tmp_path / "chat.jsonl", records))
        assert plain.jobs() == []
