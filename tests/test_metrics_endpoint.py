"""``GET /metrics`` (issue 22, item 7): requests and latency per route template, jobs by
status, LLM calls and tokens, in Prometheus text format, without auth or tenant data."""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from qemem.embed import HashEmbedder
from qemem.keys import SQLiteKeyStore
from qemem.service import create_app
from qemem.store import SQLiteStore
from service_helpers import MESSAGES, served


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.slow
def test_requests_jobs_and_llm_usage_are_counted() -> None:
    with served() as s:
        auth = s.auth(s.alice)
        s.client.post("/v1/conversations/c1/messages", json={"messages": MESSAGES}, headers=auth)
        s.client.get("/v1/conversations/secret-name", headers=auth)  # 404
        s.client.post("/v1/conversations/c1/ask", json={"question": "cat?"}, headers=auth)
        job = s.client.post("/v1/conversations/c1/build", headers=auth).json()
        for _ in range(200):
            if s.client.get(f"/v1/jobs/{job['id']}", headers=auth).json()["status"] == "done":
                break
            time.sleep(0.02)
        response = s.client.get("/metrics")  # no key needed
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        found = samples(response.text)
    route = "/v1/conversations/{conversation}"
    key = ("qemem_requests_total", (("method", "GET"), ("route", route), ("status", "404")))
    assert found[key] == 1
    append = (("method", "POST"), ("route", f"{route}/messages"), ("status", "200"))
    assert found[("qemem_requests_total", append)] == 1
    assert found[("qemem_request_seconds_count", append)] == 1
    assert "secret-name" not in response.text and "c1" not in response.text
    assert found[("qemem_jobs", (("status", "done"),))] == 1
    assert found[("qemem_llm_calls_total", ())] > 1
    assert found[("qemem_llm_input_tokens_total", ())] > 0
    assert ("qemem_llm_cache_read_tokens_total", ()) in found  # 0 offline: no prompt cache


@pytest.mark.slow
def test_an_unknown_path_is_one_label_and_metrics_can_be_off() -> None:
    with served() as s:
        for n in range(3):
            s.client.get(f"/nothing/{n}")
        found = samples(s.client.get("/metrics").text)
    unmatched = (("method", "GET"), ("route", "unmatched"), ("status", "404"))
    assert found[("qemem_requests_total", unmatched)] == 3
    store = SQLiteStore(":memory:")
    app = create_app(store, keys=SQLiteKeyStore(":memory:"), embedder=HashEmbedder(), metrics=False)
    assert "/metrics" not in {getattr(r, "path", "") for r in app.routes}
