"""Keys and tenants: every /v1 route needs a valid key, the key decides the namespace, tenant B
cannot read, change or delete anything of tenant A (404, never 403), read-only keys cannot write."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from qemem.errors import AuthError, NotFoundError
from qemem.keys import (
    SQLiteKeyStore,
    create_key,
    hash_secret,
    open_key_store,
    revoke_key,
    verify_key,
)
from service_helpers import MESSAGES, Served, served

# One request per /v1 route (method, path template) -> JSON body; the walk fails on a new route
# until it is added here.
BODIES: dict[tuple[str, str], object] = {
    ("GET", "/v1/conversations"): None,
    ("GET", "/v1/conversations/{conversation}"): None,
    ("DELETE", "/v1/conversations/{conversation}"): None,
    ("POST", "/v1/conversations/{conversation}/messages"): {"messages": MESSAGES[:1]},
    ("POST", "/v1/conversations/{conversation}/search"): {"query": "cat", "pool": True},
    ("POST", "/v1/search"): {"conversations": ["c1"], "query": "cat"},
    ("POST", "/v1/ask"): {"conversations": ["c1"], "question": "cat?", "mode": "retrieval"},
    ("POST", "/v1/context"): {"conversations": ["c1"], "question": "cat?"},
    ("POST", "/v1/conversations/{conversation}/ask"): {"question": "cat?", "mode": "retrieval"},
    ("POST", "/v1/conversations/{conversation}/context"): {"question": "cat?"},
    ("POST", "/v1/conversations/{conversation}/check"): {"text": "Ana has a cat."},
    ("POST", "/v1/conversations/{conversation}/audit"): {"sample": 2, "seed": 1},
    ("POST", "/v1/conversations/{conversation}/build"): None,
    ("GET", "/v1/conversations/{conversation}/episodes"): None,
    ("GET", "/v1/conversations/{conversation}/facts"): None,
    ("GET", "/v1/conversations/{conversation}/supersessions"): None,
    ("DELETE", "/v1/conversations/{conversation}/messages/{message}"): None,
    ("POST", "/v1/conversations/{conversation}/messages/{message}/redact"): None,
    ("DELETE", "/v1/conversations/{conversation}/facts/{fact}"): None,
    ("POST", "/v1/conversations/{conversation}/facts/{fact}/correct"): {"content": "Ana."},
    ("GET", "/v1/jobs"): None,
    ("GET", "/v1/jobs/{job_id}"): None,
    ("DELETE", "/v1/jobs/{job_id}"): None,
}


def _routes(s: Served) -> list[tuple[str, str]]:
    found = [
        (method, route.path)
        for route in s.app.routes
        if isinstance(route, APIRoute) and route.path.startswith("/v1")
        for method in sorted(route.methods)
    ]
    assert sorted(found) == sorted(BODIES), "add the new route to BODIES"
    return found


def _call(s: Served, key: str | None, method: str, template: str, job: str = "job-x"):
    path = template.replace("{conversation}", "c1").replace("{job_id}", job)
    path = path.replace("{message}", "m1").replace("{fact}", "S1")
    headers = s.auth(key) if key else {}
    return s.client.request(method, path, json=BODIES[(method, template)], headers=headers)


def _alice_view(s: Served) -> dict:
    h = s.auth(s.alice)
    return {
        "conv": s.client.get("/v1/conversations/c1", headers=h).json(),
        "hits": s.client.post(
            "/v1/conversations/c1/search", json={"query": "pottery"}, headers=h
        ).json(),
    }


def _alice_with_job(s: Served) -> str:
    h = s.auth(s.alice)
    assert s.client.post("/v1/conversations/c1/messages", json={"messages": MESSAGES}, headers=h)
    job = s.client.post("/v1/conversations/c1/build", headers=h).json()["id"]
    for _ in range(200):
        if s.client.get(f"/v1/jobs/{job}", headers=h).json()["status"] == "done":
            return str(job)
        time.sleep(0.02)
    raise AssertionError("build did not finish")


def test_tenant_b_cannot_read_change_or_delete_tenant_a() -> None:
    with served() as s:
        job = _alice_with_job(s)
        before = _alice_view(s)
        ordered = sorted(_routes(s), key=lambda r: r[1].endswith("/messages"))  # writes last
        for method, template in ordered:
            r = _call(s, s.bob, method, template, job)
            body = r.json() if r.content else None
            if template in ("/v1/conversations", "/v1/jobs"):
                assert r.status_code == 200 and body == []
            elif template.endswith("/messages"):
                # bob's key writes to bob's own namespace: a new conversation of his
                assert r.status_code == 200, r.text
            else:
                assert r.status_code == 404, (method, template, r.text)
                assert "Pixel" not in r.text and "alice" not in r.text
        assert _alice_view(s) == before
        bob = s.client.get("/v1/conversations", headers=s.auth(s.bob)).json()
        assert [(c["namespace"], c["turns"]) for c in bob] == [("bob", 1)]


@pytest.mark.slow
def test_every_v1_route_needs_a_valid_key(caplog: pytest.LogCaptureFixture) -> None:
    with served() as s, caplog.at_level(logging.WARNING, logger="qemem.service"):
        revoked, record = create_key(s.keys, "alice")
        revoke_key(s.keys, record.id)
        forged = s.alice[:-4] + "AAAA"
        for method, template in _routes(s):
            for key in (None, "not-a-key", forged, revoked):
                r = _call(s, key, method, template)
                assert r.status_code == 401, (method, template, key)
                assert r.headers["www-authenticate"] == "Bearer"
                assert r.headers["content-type"] == "application/problem+json"
        assert "revoked" in caplog.text and "refused" in caplog.text
        for secret in (forged, revoked, s.alice):
            assert secret not in caplog.text
            assert secret.split("_", 2)[2] not in caplog.text


@pytest.mark.slow
def test_read_only_key_reads_but_cannot_write() -> None:
    with served() as s:
        _alice_with_job(s)
        before = _alice_view(s)
        for method, template in _routes(s):
            r = _call(s, s.reader, method, template)
            writes = method == "DELETE" or template.endswith(
                ("/messages", "/build", "/redact", "/correct")
            )
            if writes:
                assert r.status_code == 403, (method, template, r.text)
                assert "read-only" in r.json()["detail"]
            else:
                assert r.status_code in (200, 404), (method, template, r.text)
        assert _alice_view(s) == before


def test_keys_store_only_a_salted_hash_and_verify(tmp_path: Path) -> None:
    keys = SQLiteKeyStore(tmp_path / "keys.db")
    key, record = create_key(keys, "team-a", read_only=True, label="ci")
    other, _ = create_key(keys, "team-a")
    secret = key.split("_", 2)[2]
    stored = keys.get(record.id)
    assert stored is not None and stored.hash == hash_secret(secret, stored.salt)
    twin = keys.get(other.split("_")[1])
    assert twin is not None and twin.salt != stored.salt
    assert secret.encode() not in (tmp_path / "keys.db").read_bytes()
    assert verify_key(keys, key) == record and record.read_only
    assert [k.label for k in keys.list("team-a")] == ["ci", ""]
    revoke_key(keys, record.id)
    with pytest.raises(AuthError, match="revoked"):
        verify_key(keys, key)
    with pytest.raises(AuthError, match="invalid"):
        verify_key(keys, "qm_unknown_secret")
    with pytest.raises(NotFoundError):
        revoke_key(keys, "nope")
    keys.close()


def test_both_backends_keep_keys_in_the_store(store_url: str) -> None:
    keys = open_key_store(store_url)
    key, record = create_key(keys, "team-b", label="agent")
    assert verify_key(keys, key) == record
    assert [k.id for k in keys.list("team-b")] == [record.id] and keys.list("other") == []
    revoke_key(keys, record.id)
    revoke_key(keys, record.id)  # revoking twice is fine
    with pytest.raises(AuthError, match="revoked"):
        verify_key(keys, key)
    keys.close()
    reopened = open_key_store(store_url)
    stored = reopened.get(record.id)
    assert stored is not None and stored.key.revoked is not None
    reopened.close()


@pytest.mark.slow
def test_a_key_revoked_after_use_is_refused_and_a_forged_twin_never_passes() -> None:
    with served() as s:
        key, record = create_key(s.keys, "alice")
        assert s.client.get("/v1/conversations", headers=s.auth(key)).status_code == 200
        forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
        assert s.client.get("/v1/conversations", headers=s.auth(forged)).status_code == 401
        revoke_key(s.keys, record.id)
        r = s.client.get("/v1/conversations", headers=s.auth(key))
        assert r.status_code == 401 and "revoked" in r.json()["detail"]
