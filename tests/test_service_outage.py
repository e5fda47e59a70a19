"""A PostgreSQL restart under a running two-worker ``qemem serve`` (issue 34): requests during
the outage get a 503 problem+json (never a 500), ``/readyz`` answers not-ready within 2 s, and
requests succeed again within seconds after the database returns, without restarting qemem.

The test runs its own throwaway PostgreSQL (``pgserver``), which it stops and starts again:
the session's server of the other tests is never touched."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from serve_helpers import CONV, Postgres, Server, prepared, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.server, pytest.mark.slow]

RECOVERY_S = 10.0
"""After the database is back, every request must succeed again within this."""


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    server = Postgres.start()
    yield server
    server.remove()


def _search(server: Server, headers: dict[str, str]) -> httpx.Response:
    body = {"query": "pottery", "k": 3}
    return server.call("POST", f"/v1/conversations/{CONV}/search", headers, json=body)


def test_a_postgresql_restart_gives_503s_then_heals_without_restarting_qemem(
    postgres: Postgres, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QEMEM_PG_TIMEOUT", "2")  # a request waits 2 s at most for the database
    url = postgres.database("outage")
    headers = prepared(url, sample_path)
    server = Server(url, "fake", "--workers", "2")
    try:
        assert all(_search(server, headers).status_code == 200 for _ in range(6))
        postgres.stop()

        started = time.monotonic()
        ready = httpx.get(f"{server.base}/readyz", timeout=10)
        assert ready.status_code == 503 and time.monotonic() - started < 2.0
        assert ready.headers["content-type"] == "application/problem+json"
        assert "/" not in ready.json()["detail"]  # no socket path, no store URL
        for _ in range(3):  # both workers, with and without a broken pooled connection
            down = _search(server, headers)
            assert down.status_code == 503, down.text
            assert down.headers["content-type"] == "application/problem+json"
            assert "pgdata" not in down.text and "/tmp" not in down.text

        postgres.start_again()
        back = time.monotonic()
        wait_for(lambda: all(_search(server, headers).status_code == 200 for _ in range(6)), 30)
        assert time.monotonic() - back < RECOVERY_S
        assert httpx.get(f"{server.base}/readyz", timeout=10).status_code == 200
        appended = server.call(
            "POST",
            "/v1/conversations/after/messages",
            headers,
            json={
                "messages": [
                    {
                        "session_id": "s",
                        "timestamp": "2024-01-01T10:00",
                        "speaker": "Ana",
                        "text": "back again",
                        "id": "m1",
                    }
                ]
            },
        )
        assert appended.status_code == 200, appended.text
    finally:
        server.kill()
