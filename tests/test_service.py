"""The HTTP API through its real ASGI app: routes, problem+json errors, jobs, body limit."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

from qemem.service.openapi import schema_json
from service_helpers import MESSAGES, Served, served

OPENAPI = Path(__file__).parent.parent / "docs" / "openapi.json"


def _append(s: Served, key: str, messages: list[dict[str, str]], cid: str = "c1") -> dict:
    r = s.client.post(
        f"/v1/conversations/{cid}/messages", json={"messages": messages}, headers=s.auth(key)
    )
    assert r.status_code == 200, r.text
    return r.json()


def _wait(s: Served, job: str) -> dict:
    for _ in range(200):
        body = s.client.get(f"/v1/jobs/{job}", headers=s.auth(s.alice)).json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(0.02)
    raise AssertionError(f"job {job} did not finish")


def test_append_returns_stored_ids_and_is_idempotent_by_id() -> None:
    with served() as s:
        first = _append(s, s.alice, MESSAGES)
        assert first == {"ids": ["m1", "m2", "D2:1"], "turns_added": 3, "sessions_added": 2}
        again = _append(s, s.alice, MESSAGES[:2])
        assert again == {"ids": ["m1", "m2"], "turns_added": 0, "sessions_added": 0}
        more = _append(s, s.alice, [{**MESSAGES[1], "id": "m4", "text": "Pixel is fine."}])
        assert more["ids"] == ["m4"]
        conv = s.client.get("/v1/conversations/c1", headers=s.auth(s.alice)).json()
        assert (conv["turns"], [x["key"] for x in conv["sessions"]]) == (4, ["s1", "s2"])
        assert conv["build"]["unbuilt_sessions"] == [1, 2]


def test_conflicting_and_invalid_messages_are_problems_and_write_nothing() -> None:
    with served() as s:
        _append(s, s.alice, MESSAGES[:1])
        url, h = "/v1/conversations/c1/messages", s.auth(s.alice)
        changed = {**MESSAGES[0], "text": "something else"}
        r = s.client.post(url, json={"messages": [MESSAGES[1], changed]}, headers=h)
        assert r.status_code == 409
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["status"] == 409 and "m1" in r.json()["detail"]
        bad_time = {**MESSAGES[1], "timestamp": "yesterday"}
        r = s.client.post(url, json={"messages": [bad_time]}, headers=h)
        assert r.status_code == 422 and "timestamp" in r.json()["detail"]
        r = s.client.post(url, json={"messages": [{"speaker": "Ana"}]}, headers=h)
        assert r.status_code == 422 and r.json()["title"] == "Unprocessable Entity"
        assert s.client.get("/v1/conversations/c1", headers=h).json()["turns"] == 1


def test_search_pool_and_ask_in_retrieval_mode() -> None:
    with served(llm=None) as s:
        _append(s, s.alice, MESSAGES)
        h = s.auth(s.alice)
        hits = s.client.post(
            "/v1/conversations/c1/search", json={"query": "pottery bowl", "k": 2}, headers=h
        ).json()["results"]
        assert len(hits) == 2 and hits[0]["record"]["id"] == "D2:1"
        pool = s.client.post(
            "/v1/conversations/c1/search", json={"query": "the cat", "pool": True}, headers=h
        ).json()["pool"]
        assert {t["record"]["id"] for t in pool["turns"]} >= {"m1"}
        answer = s.client.post(
            "/v1/conversations/c1/ask",
            json={"question": "What is the cat called?", "mode": "retrieval"},
            headers=h,
        ).json()
        assert answer["mode"] == "retrieval" and answer["evidence"]["pool"]["turns"]
        r = s.client.post("/v1/conversations/c1/ask", json={"question": "Who?"}, headers=h)
        assert r.status_code == 503 and "LLM" in r.json()["detail"]
        assert s.client.post("/v1/conversations/c1/build", headers=h).status_code == 503
        r = s.client.post("/v1/conversations/nope/search", json={"query": "x"}, headers=h)
        assert r.status_code == 404 and r.json()["instance"] == "/v1/conversations/nope/search"


def test_search_across_conversations_names_each_hit_and_refuses_bad_lists() -> None:
    with served(llm=None) as s:
        _append(s, s.alice, MESSAGES)
        _append(s, s.alice, [{**MESSAGES[0], "text": "My grey cat Pixel sleeps all day."}], "c2")
        h = s.auth(s.alice)
        body = {"conversations": ["c1", "c2", "c1"], "query": "grey cat Pixel", "k": None}
        hits = s.client.post("/v1/search", json=body, headers=h).json()["results"]
        assert {(x["conversation"], x["record"]["id"]) for x in hits} >= {
            ("c1", "m1"),
            ("c2", "m1"),
        }
        assert len(hits) == 4 and all(
            x["conversation"] == x["record"]["conversation_id"] for x in hits
        )
        one = s.client.post("/v1/conversations/c1/search", json={"query": "cat"}, headers=h)
        assert {x["conversation"] for x in one.json()["results"]} == {"c1"}
        for conversations, code in (([], 422), ("c1", 422), ([f"c{i}" for i in range(51)], 422)):
            r = s.client.post(
                "/v1/search", json={"conversations": conversations, "query": "x"}, headers=h
            )
            assert r.status_code == code and r.json()["detail"], r.text
        r = s.client.post(
            "/v1/search", json={"conversations": ["c1", "nope"], "query": "x"}, headers=h
        )
        assert r.status_code == 404 and "'nope'" in r.json()["detail"]
        theirs = {"conversations": ["c1"], "query": "cat"}
        assert s.client.post("/v1/search", json=theirs, headers=s.auth(s.bob)).status_code == 404


def test_ask_and_context_across_conversations_over_http() -> None:
    with served(llm=None) as s:
        _append(s, s.alice, MESSAGES)
        _append(s, s.alice, [{**MESSAGES[0], "text": "My grey cat Pixel sleeps all day."}], "c2")
        h = s.auth(s.alice)
        many = {"conversations": ["c1", "c2"], "question": "grey cat Pixel sleeps"}
        block = s.client.post("/v1/context", json=many, headers=h).json()
        assert block["conversations"] == ["c1", "c2"] and "[c2/m1]" in block["text"]
        refs = [item["ref"] for item in block["items"]]
        assert {"space": "turn", "id": "m1", "conversation": "c2"} in refs
        assert {"space": "turn", "id": "m1", "conversation": "c1"} in refs
        body = {**many, "mode": "retrieval"}
        answer = s.client.post("/v1/ask", json=body, headers=h).json()
        assert answer["across"]["conversations"] == ["c1", "c2"]
        assert {t["conversation"] for t in answer["evidence"]["pool"]["turns"]} == {"c1", "c2"}
        r = s.client.post("/v1/ask", json=many, headers=h)
        assert r.status_code == 503 and "LLM" in r.json()["detail"]
        r = s.client.post("/v1/context", json={**many, "mode": "llm"}, headers=h)
        assert r.status_code == 503
        for path, sent in (("/v1/ask", body), ("/v1/context", many)):
            missing = {**sent, "conversations": ["c1", "nope"]}
            r = s.client.post(path, json=missing, headers=h)
            assert r.status_code == 404 and "'nope'" in r.json()["detail"]
            r = s.client.post(path, json={**sent, "conversations": "c1"}, headers=h)
            assert r.status_code == 422
            r = s.client.post(path, json={**sent, "conversations": []}, headers=h)
            assert r.status_code == 422 and "no conversations" in r.json()["detail"]
            assert s.client.post(path, json=sent, headers=s.auth(s.bob)).status_code == 404


def test_ask_full_and_background_build_job() -> None:
    with served() as s:
        _append(s, s.alice, MESSAGES)
        h = s.auth(s.alice)
        answer = s.client.post(
            "/v1/conversations/c1/ask", json={"question": "What is the cat called?"}, headers=h
        ).json()
        assert answer["text"] and answer["evidence"]["cards"] and answer["citations"]
        started = s.client.post("/v1/conversations/c1/build", headers=h)
        assert started.status_code == 202 and started.json()["conversation"] == "c1"
        job = _wait(s, started.json()["id"])
        assert job["status"] == "done" and job["done"] == job["total"] > 0
        assert job["reports"][0]["episodes"] > 0
        conv = s.client.get("/v1/conversations/c1", headers=h).json()
        assert conv["build"] == {"built_sessions": [1, 2], "unbuilt_sessions": [], "job": None}
        assert s.client.get("/v1/jobs/job-0000", headers=h).status_code == 404


def test_delete_then_404() -> None:
    with served() as s:
        _append(s, s.alice, MESSAGES)
        h = s.auth(s.alice)
        assert s.client.delete("/v1/conversations/c1", headers=h).status_code == 204
        assert s.client.delete("/v1/conversations/c1", headers=h).status_code == 404
        assert s.client.get("/v1/conversations", headers=h).json() == []


def test_body_limit_gives_413() -> None:
    with served(max_body=2_000) as s:
        big = [{**MESSAGES[0], "id": f"x{i}"} for i in range(40)]
        r = s.client.post(
            "/v1/conversations/c1/messages", json={"messages": big}, headers=s.auth(s.alice)
        )
        assert r.status_code == 413 and r.json()["status"] == 413

        def chunked() -> Iterator[bytes]:  # no Content-Length: the body is counted as it comes
            yield b'{"messages": ['
            yield b" " * 3_000
            yield b"]}"

        headers = {**s.auth(s.alice), "content-type": "application/json"}
        r = s.client.post("/v1/conversations/c1/messages", content=chunked(), headers=headers)
        assert r.status_code == 413 and r.request.headers["transfer-encoding"] == "chunked"
        small = json.dumps({"messages": MESSAGES[:1]}).encode()
        r = s.client.post(
            "/v1/conversations/c1/messages", content=iter([small[:9], small[9:]]), headers=headers
        )
        assert r.status_code == 200 and r.json()["ids"] == ["m1"]


def test_health_and_readiness_need_no_key() -> None:
    with served() as s:
        assert s.client.get("/healthz").json() == {"status": "ok"}
        assert s.client.get("/readyz").json() == {"status": "ready"}


def test_unknown_route_is_a_problem() -> None:
    with served() as s:
        r = s.client.get("/v2/nothing")
        assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"


def test_openapi_schema_matches_committed_copy() -> None:
    """Run `python -m qemem.service.openapi > docs/openapi.json` after a deliberate change."""
    assert json.loads(schema_json()) == json.loads(OPENAPI.read_text(encoding="utf-8"))


def test_readiness_fails_with_503_when_the_store_is_gone() -> None:
    with served() as s:
        s.store.close()
        r = s.client.get("/readyz")
        assert r.status_code == 503 and "store" in r.json()["detail"]
        assert s.client.get("/healthz").status_code == 200
