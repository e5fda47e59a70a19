"""Regression tests of issue 34 ("every input is bounded"), each failing on the main it was
filed against: dates at the ends of the calendar, a session dated wrongly that blocked every
later append, unbounded requests, ids no store can keep (5xx), server paths and channel-blind
advice in error bodies, route labels of /metrics, the conversation of a context across
conversations, and ``qemem build`` over conversations another process is building."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import HIDDEN, BusyError, StoreError, without_paths
from qemem.evidence.times import resolve_times
from qemem.memory import Memory
from qemem.memory.jobs import job_table
from qemem.memory.searching import MAX_CONVERSATIONS, MAX_SEARCH_QUERIES
from qemem.memory.worker import JobWorker
from qemem.operations.schemas import MAX_ID_CHARS, MAX_K, MAX_MESSAGES
from qemem.store import Scope
from qemem.store.jobs import Lease
from service_helpers import MESSAGES, Served, served

runner = CliRunner()
CALENDAR_ENDS = [
    "0001-01-01T00:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59",
    "9999-12-31T23:00-05:00",
    "1899-12-31T23:59",
    "2201-01-01T00:00",
]


@pytest.fixture(params=["sqlite", "postgresql"])
def http(request: pytest.FixtureRequest) -> Iterator[Served]:
    """The app with the sample messages in conversation c1 of alice, on each backend."""
    url = ":memory:" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    with served(llm=None, store_url=url) as s:
        _append(s, MESSAGES)
        yield s


def _append(s: Served, messages: list[dict[str, Any]], conversation: str = "c1") -> Any:
    body = json.dumps({"messages": messages})  # a lone surrogate travels as \ud800
    headers = {**s.auth(s.alice), "Content-Type": "application/json"}
    return s.client.post(
        f"/v1/conversations/{conversation}/messages", content=body, headers=headers
    )


def _post(s: Served, path: str, body: object) -> Any:
    return s.client.post(path, json=body, headers=s.auth(s.alice))


def _refused(response: Any, field: str) -> None:
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"], response.text


# ---------------------------------------------------------------- 3. dates


def test_dates_outside_1900_to_2200_are_refused_naming_the_field(http: Served) -> None:
    for stamp in CALENDAR_ENDS:
        message = {**MESSAGES[0], "id": "late", "session_id": "s9", "timestamp": stamp}
        _refused(_append(http, [message], "ends"), "timestamp")
        facts = http.client.get(
            f"/v1/conversations/c1/facts?as_of={stamp[:10]}", headers=http.auth(http.alice)
        )
        _refused(facts, "as_of")
    body = {"conversations": ["c1"], "question": "what happened last year?"}
    assert _post(http, "/v1/context", body).status_code == 200


def test_relative_times_at_the_ends_of_the_range_and_huge_counts_never_fail(http: Served) -> None:
    said = "5000 years ago, 999999999 days ago, last winter and next year, in 99999 months' time"
    for stamp in ("1900-01-01T00:00", "2200-12-31T23:59"):
        edge = f"edge{stamp[:4]}"
        message = {**MESSAGES[0], "id": "e", "session_id": "s1", "timestamp": stamp, "text": said}
        assert _append(http, [message], edge).status_code == 200
        for path, body in [
            (f"/v1/conversations/{edge}/context", {"question": "when was last winter?"}),
            (f"/v1/conversations/{edge}/ask", {"question": "when?", "mode": "retrieval"}),
            ("/v1/context", {"conversations": [edge, "c1"], "question": "winter?"}),
        ]:
            assert _post(http, path, body).status_code == 200


def test_relative_times_resolve_or_stay_as_said_for_any_count_in_the_range() -> None:
    for anchor in ("1900-01-01", "1900-03-01", "2023-05-08", "2200-12-31"):
        for count in ("1", "150", "5000", "99999999999"):
            for unit in ("day", "week", "weekend", "month", "year"):
                for form in ("{n} {u}s ago", "{n} {u}s from now", "in {n} {u}s' time"):
                    resolve_times(form.format(n=count, u=unit), anchor)


def test_a_session_dated_wrongly_goes_with_its_last_message_and_its_number_is_not_reused(
    http: Served,
) -> None:
    future = {
        **MESSAGES[0],
        "id": "typo",
        "session_id": "s-future",
        "timestamp": "2199-01-01T10:00",
    }
    assert _append(http, [future]).status_code == 200
    later = {**MESSAGES[2], "session_id": "s3", "timestamp": "2024-05-01T10:00", "text": "later"}
    _refused(_append(http, [later]), "before the latest stored session")
    auth = http.auth(http.alice)
    gone = http.client.delete("/v1/conversations/c1/messages/typo", headers=auth).json()
    assert gone["deleted"] == ["typo"] and gone["sessions"] == [3]
    appended = _append(http, [later])
    assert appended.status_code == 200 and appended.json()["ids"] == ["D4:1"]
    sessions = http.client.get("/v1/conversations/c1", headers=auth).json()["sessions"]
    assert [(s["index"], s["key"]) for s in sessions] == [(1, "s1"), (2, "s2"), (4, "s3")]


# ---------------------------------------------------------------- 4. bounds


def test_every_list_and_size_a_request_controls_is_bounded_before_work_starts(
    http: Served,
) -> None:
    many = ["cat"] * (MAX_SEARCH_QUERIES + 1)
    _refused(_post(http, "/v1/conversations/c1/search", {"query": ["cat"] * 90_000}), "query")
    _refused(_post(http, "/v1/conversations/c1/search", {"query": many}), "query")
    _refused(_post(http, "/v1/conversations/c1/search", {"query": "cat " * 600}), "query")
    _refused(_post(http, "/v1/conversations/c1/search", {"query": "cat", "k": MAX_K + 1}), "k")
    conversations = [f"c{n}" for n in range(MAX_CONVERSATIONS + 1)]
    for path, body in [
        ("/v1/search", {"conversations": conversations, "query": "cat"}),
        ("/v1/context", {"conversations": conversations, "question": "cat"}),
        ("/v1/ask", {"conversations": conversations, "question": "cat", "mode": "retrieval"}),
    ]:
        _refused(_post(http, path, body), "conversations")
    body = {"question": "cat", "budget_tokens": 200_001}
    _refused(_post(http, "/v1/conversations/c1/context", body), "budget_tokens")
    _refused(_append(http, [MESSAGES[0]] * (MAX_MESSAGES + 1)), "messages")
    for field in ("id", "session_id", "speaker"):
        _refused(_append(http, [{**MESSAGES[0], field: "x" * (MAX_ID_CHARS + 1)}]), field)
    assert _append(http, [{**MESSAGES[0], "id": "i" * MAX_ID_CHARS}]).status_code == 200
    found = _post(http, "/v1/conversations/c1/search", {"query": ["cat", "pottery"], "k": None})
    assert found.status_code == 200 and 0 < len(found.json()["results"]) <= MAX_K


@pytest.mark.slow
def test_the_openapi_schema_states_the_bounds() -> None:
    with served(llm=None) as s:
        schemas = s.client.get("/openapi.json").json()["components"]["schemas"]
    query = schemas["SearchIn"]["properties"]["query"]["anyOf"]
    assert {"type": "string", "maxLength": 2000} in query
    assert any(q.get("maxItems") == MAX_SEARCH_QUERIES for q in query)
    k = schemas["SearchIn"]["properties"]["k"]["anyOf"][0]
    assert (k["minimum"], k["maximum"]) == (1, MAX_K)
    assert schemas["SearchManyIn"]["properties"]["conversations"]["maxItems"] == MAX_CONVERSATIONS
    assert schemas["MessagesIn"]["properties"]["messages"]["maxItems"] == MAX_MESSAGES
    assert schemas["MessageIn"]["properties"]["session_id"]["maxLength"] == MAX_ID_CHARS


# ---------------------------------------------------------------- 5. ids no store can keep


def test_an_id_no_store_can_keep_gets_a_422_on_both_backends(http: Served) -> None:
    """A lone surrogate in a message id reached the SQL store of an existing conversation
    (UnicodeEncodeError, 500, both backends); a NUL did on PostgreSQL."""
    for bad in ("\ud800x", "a\x00b"):
        _refused(_append(http, [{**MESSAGES[0], "id": bad}]), "id")
        _refused(_append(http, [{**MESSAGES[0], "id": "new", "session_id": bad}]), "session_id")


# ---------------------------------------------------------------- 6, 7. what errors say


@pytest.mark.slow
def test_error_bodies_name_no_server_path_and_speak_the_channel_s_words(tmp_path: Path) -> None:
    with served(llm=None, store_url=str(tmp_path / "memory.db")) as s:
        _append(s, MESSAGES)
        auth = s.auth(s.alice)
        for path in (
            "/v1/conversations/nope",
            "/v1/conversations/c1/facts/S9",
            "/v1/conversations/c1/messages/nope",
        ):
            response = s.client.delete(path, headers=auth)
            assert response.status_code == 404
            detail = response.json()["detail"]
            assert str(tmp_path) not in detail and "qemem " not in detail, detail
        advice = s.client.delete("/v1/conversations/c1/facts/S9", headers=auth).json()["detail"]
        assert "GET /v1/conversations/{conversation}/facts" in advice


def test_a_failed_job_s_error_names_no_server_path(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "memory.db", embedder=HashEmbedder(), llm="fake") as memory:
        job = job_table(memory.store).enqueue("default", "build", "never-stored")
        claimed = job_table(memory.store).claim("w", 30.0)
        assert claimed is not None and claimed.id == job.id
        JobWorker(memory, lambda namespace: memory).run(claimed, Lease(job.id, "w"))
        error = memory.job(job.id).error or ""
    assert "never-stored" in error and str(tmp_path) not in error and HIDDEN in error


def test_without_paths_hides_paths_of_this_machine_and_keeps_routes() -> None:
    said = 'store /tmp/x/m.db stayed locked; socket "/tmp/pg/.s.PGSQL.5432"; GET /v1/jobs'
    assert without_paths(said) == (f'store {HIDDEN} stayed locked; socket "{HIDDEN}"; GET /v1/jobs')
    url = "postgresql://u:***@db.internal/qemem"
    assert without_paths(f"store {url} is unreachable", [url]) == f"store {HIDDEN} is unreachable"


@pytest.mark.slow
def test_mcp_errors_advise_the_tools_not_the_command_line(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    from qemem.service.mcp_server import create_mcp_server

    with Memory.open(tmp_path / "m.db", embedder=HashEmbedder()) as memory:
        memory.add_messages("c1", MESSAGES)
        server = create_mcp_server(memory)

        async def errors() -> list[str]:
            async with Client(server) as client:
                calls = [
                    ("recall", {"conversation": "nope", "query": "cat"}),
                    ("forget_fact", {"conversation": "c1", "fact": "S9"}),
                    ("forget_message", {"conversation": "c1", "message": "nope"}),
                ]
                return [(await client.call_tool(n, a)).content[0].text for n, a in calls]

        said = anyio.run(errors)
    assert all("qemem " not in s and str(tmp_path) not in s for s in said), said
    assert "list_conversations" in said[0] and "facts tool" in said[1]


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_serve_and_mcp_say_create_when_the_store_is_missing(tmp_path: Path, command: str) -> None:
    result = runner.invoke(app, [command, "--store", str(tmp_path / "typo.db")])
    assert isinstance(result.exception, StoreError) and "--create" in str(result.exception)


# ---------------------------------------------------------------- 8. metrics, null conversation


@pytest.mark.slow
def test_every_served_path_has_a_route_label_and_context_across_names_no_conversation() -> None:
    with served(llm=None) as s:
        _append(s, MESSAGES)
        for path in ("/docs", "/openapi.json", "/docs-assets/swagger-ui.css"):
            assert s.client.get(path).status_code == 200, path
        block = _post(s, "/v1/context", {"conversations": ["c1"], "question": "cat"}).json()
        assert block["conversation"] is None and block["conversations"] == ["c1"]
        labels = {
            line.split('route="')[1].split('"')[0]
            for line in s.client.get("/metrics").text.splitlines()
            if line.startswith("qemem_requests_total")
        }
    assert {"/docs", "/openapi.json", "/docs-assets"} <= labels
    assert "unmatched" not in labels


# ---------------------------------------------------------------- 9. builds of several


@pytest.mark.slow
def test_build_of_several_conversations_leaves_one_another_process_builds_and_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.setenv("COLUMNS", "300")  # one line per message
    store = str(tmp_path / "m.db")
    with Memory.open(store, embedder=HashEmbedder()) as memory:
        memory.add_messages("busy", MESSAGES)
        memory.add_messages("free", MESSAGES)
    other = subprocess.Popen(["sleep", "60"])  # a live process of this host holds the lock
    try:
        owner = {"pid": other.pid, "host": socket.gethostname(), "since": time.time()}
        with Memory.open(store, embedder=HashEmbedder()) as memory:
            memory.store.set_state(Scope("busy", "default"), "lock.build", json.dumps(owner))
        result = runner.invoke(app, ["build", "--store", store, "--llm", "fake"])
        single = runner.invoke(app, ["build", "--store", store, "-c", "busy", "--llm", "fake"])
    finally:
        other.kill()
        other.wait()
    assert result.exit_code == 0, result.output
    assert "busy: not built here: another build" in result.output
    assert f"process {other.pid}" in result.output
    assert isinstance(single.exception, BusyError) and "another build" in str(single.exception)
    with Memory.open(store, embedder=HashEmbedder()) as memory:
        assert memory.episodes("free") and not memory.episodes("busy")
