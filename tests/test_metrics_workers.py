"""``GET /metrics`` of ``qemem serve --workers 2``: one scrape, whichever worker answers it,
counts the requests of all workers (prometheus-client's multiprocess mode in a temporary
folder ``serve`` makes and removes), the LLM calls of all of them, and the store's jobs."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from qemem.errors import ConfigError
from qemem.service.metrics import MULTIPROC_ENV, multiprocess_dir
from serve_helpers import CONV, Server, prepared, wait_for
from test_metrics_endpoint import samples

HEALTH = (("method", "GET"), ("route", "/healthz"), ("status", "200"))
REQUESTS = ("qemem_requests_total", HEALTH)


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    for name in ("QEMEM_LLM", MULTIPROC_ENV, "QEMEM_METRICS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.kill()


def per_worker(folder: Path, scratch: Path) -> dict[str, float]:
    """The /healthz count each worker wrote to the multiprocess folder (its own files read
    alone, through prometheus-client's own reader)."""
    counts = {}
    for file in sorted(folder.glob("counter_*.db")):
        pid = file.stem.removeprefix("counter_")
        alone = scratch / pid
        alone.mkdir(parents=True, exist_ok=True)
        shutil.copy(file, alone / file.name)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, str(alone))
        counts[pid] = samples(generate_latest(registry).decode()).get(REQUESTS, 0.0)
    return counts


def scrape(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with httpx.Client() as fresh:  # a new connection: any worker may answer
        response = fresh.get(f"{server.base}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    return samples(response.text)


@pytest.mark.slow
@pytest.mark.server
def test_one_scrape_sums_the_requests_and_llm_calls_of_every_worker(
    tmp_path: Path, sample_path: Path, servers: list[Server]
) -> None:
    store = str(tmp_path / "m.db")
    headers = prepared(store, sample_path)
    temp = tmp_path / "tmp"
    temp.mkdir()
    servers.append(server := Server(store, "fake", "--workers", "2", env={"TMPDIR": str(temp)}))
    [folder] = temp.glob("qemem-metrics-*")  # made by serve, shared by its workers
    sent = 0
    while True:  # until both workers have answered some (the kernel picks one per connection)
        for _ in range(20):
            with httpx.Client() as fresh:
                assert fresh.get(f"{server.base}/healthz", timeout=10).status_code == 200
            sent += 1
        counts = per_worker(folder, tmp_path / "scratch")
        if (len(counts) == 2 and all(counts.values())) or sent >= 1000:
            break
    assert len(counts) == 2 and all(counts.values()), counts  # spread over both workers
    assert sum(counts.values()) == sent
    for _ in range(6):  # every scrape, whichever worker answers it, sees them all
        assert scrape(server)[REQUESTS] == sent

    job = server.call("POST", f"/v1/conversations/{CONV}/build", headers).json()
    wait_for(lambda: server.job(job["id"], headers)["status"] == "done", 120)
    done = server.job(job["id"], headers)
    calls = sum(t["calls"] for r in done["reports"] for t in r["llm"].values())
    assert calls > 0
    # the report counts its last attempt's calls; on a starved machine a job whose lease
    # lapsed runs again, and the metrics rightly count the calls of every attempt
    exact = done["attempts"] == 1
    llm_calls = ("qemem_llm_calls_total", ())
    wait_for(lambda: scrape(server).get(llm_calls, 0.0) >= calls, 10)
    for _ in range(6):
        found = scrape(server)
        assert found[llm_calls] == calls if exact else found[llm_calls] >= calls
        assert found[("qemem_jobs", (("status", "done"),))] == 1  # from the store

    server.process.send_signal(signal.SIGTERM)  # a clean stop removes the folder
    assert server.process.wait(timeout=60) == 0
    assert not folder.exists()


@pytest.mark.slow
@pytest.mark.server
def test_one_worker_counts_in_memory(
    tmp_path: Path, sample_path: Path, servers: list[Server]
) -> None:
    store = str(tmp_path / "m.db")
    prepared(store, sample_path)
    temp = tmp_path / "tmp"
    temp.mkdir()
    servers.append(server := Server(store, "fake", env={"TMPDIR": str(temp)}))
    for _ in range(3):
        httpx.get(f"{server.base}/healthz", timeout=10)
    assert scrape(server)[REQUESTS] == 3
    assert list(temp.iterdir()) == []  # no multiprocess folder for one process


def test_a_multiprocess_folder_set_too_late_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert multiprocess_dir() is None
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))  # prometheus_client counts in memory here
    with pytest.raises(ConfigError, match="set it in the environment before the process starts"):
        multiprocess_dir()
