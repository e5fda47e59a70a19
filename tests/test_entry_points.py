"""Every entry point with arbitrary Unicode, on both backends (issue 21, "systematic").

Each ``Memory`` method, HTTP route, MCP tool and CLI command has a driver in one of the tables
below, and the enumeration tests fail when one has none. The operations of the operation
table (``qemem.operations``) get theirs from their declaration (``op_driver``,
``route_driver``, ``tool_driver``: the text in each text slot, the others filled), so an
operation added later joins the property test by its declaration alone; an entry point whose
slots these cannot fill, or that needs a sharper check, has a hand-written driver, which
takes precedence. Each driver puts the text into every text slot the entry point has
(conversation id, speaker, message text, message id, query, question, namespace, label, key
id, file path; record and job ids looked up) and the outcome must be one of two:

- accepted, and what was stored reads back byte-exact (then the test deletes it again);
- refused with a clear error: a ``QememError`` (library, CLI), a 4xx (HTTP) or an MCP tool
  error with a message; never a traceback, a 5xx or an MCP crash. A refused input leaves the
  store (its conversations and turns) unchanged.

Text no store can keep (lone surrogates, C0 controls but tab, newline and carriage return) is
always refused; everything else (DEL, C1, combining marks, RTL, emoji shortcodes, Rich markup,
100k characters) is stored as it is. Bounded and deterministic: the special strings below plus
a few derandomized Hypothesis examples per entry point and backend.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import shutil
import tempfile
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.main import get_command
from typer.testing import CliRunner

from conftest import database_url
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import QememError
from qemem.keys import open_key_store
from qemem.memory import Memory, MemoryAPI
from qemem.memory_file import MemoryFile
from qemem.operations import OPERATIONS, Operation, tools
from qemem.operations.schemas import MAX_ID_CHARS
from qemem.store import parse_store_url
from service_helpers import Served, served

EXAMPLES = 2
SPECIAL = [
    "caf\udce9",  # a shell argument in another encoding (surrogate escape)
    "\ud800 lone",
    "a\x00b bell\x07 esc\x1b[31m",
    "tab\tnew\nline\r\n",
    # kept as they are: DEL, C1, combining marks, RTL, emoji shortcodes, Rich markup
    "del\x7f c1\x85\x9f e\u0301\u0301\u20dd \u202eRTL \u05e9\u05dc\u05d5\u05dd "
    ":smile: :thumbs_up: 😀 [bold red]x[/] [link=http://x]y[/link] [/]",
    "é" * 100_000,
    " ",  # and "", Hypothesis's first example
]
TEXTS = st.text(st.characters(exclude_categories=()), max_size=24)
SETTINGS = settings(
    derandomize=True,
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
BASE = [
    {"session_id": "s1", "timestamp": "2024-03-14T19:15:00", "speaker": "Ana", "text": t}
    for t in ("I adopted a grey cat named Pixel.", "I started pottery classes.")
]
SLOTS = ("conversation", "speaker", "text", "id")
runner = CliRunner()
CLI_ENV = {"QEMEM_EMBEDDER": "hash", "QEMEM_LLM": None, "QEMEM_STORE": None, "COLUMNS": "200"}


def refusable(text: str) -> bool:
    """Whether no store can keep ``text`` (lone surrogates, C0 controls but \\t\\n\\r)."""
    return any(0xD800 <= ord(c) <= 0xDFFF or (ord(c) < 0x20 and c not in "\t\n\r") for c in text)


# ---------------------------------------------------------------- the world of one backend


@dataclass
class World:
    url: str
    memory: Memory  # namespace "default": the library, the CLI and MCP
    alice: Memory  # namespace "alice": the HTTP tenant
    http: Served
    mcp: Callable[[str, dict[str, Any]], Any]
    folder: Path  # the CLI's working folder: paths made of the text land here
    counter: Iterator[int]

    def fresh(self) -> str:
        return f"w{next(self.counter)}"

    def snapshot(self) -> list[object]:
        return [
            (c.id, len(c.sessions), [(t.id, t.speaker, t.text) for t in m.turns(c.id)])
            for m in (self.memory, self.alice)
            for c in m.conversations()
        ]


@pytest.fixture(scope="module")
def backend_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The store of one backend's world; the commits of the test need not reach the disk
    (SQLite in memory-backed /dev/shm when there is one, PostgreSQL without synchronous
    commits), which makes the property test several times quicker."""
    if request.param == "sqlite":
        shm = Path("/dev/shm")
        folder = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path_factory.mktemp("s")
        yield str(folder / "memory.db")
        shutil.rmtree(folder, ignore_errors=True)
        return
    import psycopg

    server = request.getfixturevalue("pg_server")
    name = f"qemem_entry_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
        conn.execute(f"ALTER DATABASE {name} SET synchronous_commit = off")
    yield database_url(server, name)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def world(backend_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    import anyio.from_thread
    from mcp import Client

    from qemem.service.mcp_server import create_mcp_server

    memory = Memory.open(backend_url, embedder=HashEmbedder(), llm="fake")
    alice = Memory(memory.store, HashEmbedder(), namespace="alice")
    memory.add_messages("base", BASE)
    alice.add_messages("base", BASE)
    server = create_mcp_server(memory)
    command = get_command(app)  # built once: typer builds it anew for each invoke otherwise
    with (
        pytest.MonkeyPatch.context() as patch,
        served(store_url=backend_url) as http,
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(server)) as client,
    ):
        patch.setattr("typer.testing._get_command", lambda typer_app: command)

        def call(name: str, arguments: dict[str, Any]) -> Any:
            return portal.call(client.call_tool, name, arguments)

        folder = tmp_path_factory.mktemp("cwd")
        yield World(backend_url, memory, alice, http, call, folder, itertools.count())
    memory.close()


# ---------------------------------------------------------------- shared checks


def message(world: World, text: str, slot: str) -> tuple[str, dict[str, str]]:
    """A fresh conversation id and one message, with ``text`` in ``slot``; a message id goes
    to a new session of the stored conversation ``base`` (its id is looked up among the
    stored turns before it is stored)."""
    cid = text if slot == "conversation" else "base" if slot == "id" else world.fresh()
    record = {"session_id": "s1", "timestamp": "2024-03-14T19:15:00", "id": "m1"}
    record |= {"speaker": "Ana", "text": "hello"} | ({slot: text} if slot != "conversation" else {})
    return cid, record | ({"session_id": "s-id"} if slot == "id" else {})


def check_stored(
    memory: Memory,
    cid: str,
    record: dict[str, str],
    text: str,
    refusal: str,
    limit: int | None = None,
) -> None:
    """After an append of ``record`` to ``cid`` (``refusal``: the error, or "" when accepted):
    refused exactly when no store can keep ``text`` (or it is longer than ``limit``, the
    bound of the entry point), else stored byte-exact (then deleted)."""
    if refusable(text):
        assert refusal, f"accepted {text[:80]!r}"
        return
    if refusal:  # an id or text that is blank, or a conversation id the URL cannot carry
        too_long = limit is not None and len(text) > limit
        assert too_long or not text.strip() or "/" in text or text in (".", ".."), refusal
        return
    [conversation] = [c for c in memory.conversations() if c.id == cid]
    base = [t.id for t in memory.turns(cid) if t.text in [m["text"] for m in BASE]]
    [turn] = [t for t in memory.turns(cid) if t.id not in base]
    # two normalizations of ingest, kept: a speaker's name on one line, a text without
    # surrounding whitespace (qemem.models.fold_caption); everything else byte-exact; a
    # message with an empty id gets one of the store's
    speaker, said = " ".join(record["speaker"].split()), record["text"].strip()
    assert (conversation.id, turn.speaker, turn.text) == (cid, speaker, said)
    assert turn.id == record["id"] or (record["id"] == "" and turn.id.startswith("D"))
    if cid == "base":  # the message (and the session it made) go, the conversation stays
        assert memory.delete_message(cid, turn.id).sessions
    else:
        assert memory.delete(cid)


def bound(slot: str) -> int | None:
    """The most characters the HTTP API and the MCP server take in a message's ``slot`` (a
    conversation id travels in the URL, cut to ``URL_CHARS``)."""
    return {"speaker": MAX_ID_CHARS, "id": MAX_ID_CHARS}.get(slot)


def library(call: Callable[[], object], text: str, checked: bool = True) -> str:
    """Run a library call: "" when it succeeded, else its QememError's message (any other
    exception fails the test). ``checked``: ``text`` reaches a text check, so text no store
    can keep must be refused."""
    try:
        call()
    except QememError as exc:
        assert str(exc).strip() and "Traceback" not in str(exc)
        return str(exc)
    assert not (checked and refusable(text)), f"accepted {text[:80]!r}"
    return ""


def status(response: Any, text: str, checked: bool = True) -> str:
    """An HTTP response's outcome as for ``library``: a 4xx with a detail, or a 2xx."""
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.json()["detail"], response.text
        return response.text
    assert not (checked and refusable(text)), f"accepted {text[:80]!r}"
    return ""


def tool(world: World, name: str, text: str, checked: bool = True, /, **arguments: Any) -> str:
    """An MCP tool call's outcome as for ``library``: a tool error with a message, never a
    crash (whose error text names the tool only)."""
    result = world.mcp(name, arguments)
    message = result.content[0].text if result.content else ""
    if result.is_error:
        assert message.startswith(f"Error executing tool {name}: "), message
        return message
    assert not (checked and refusable(text)), f"accepted {text[:80]!r}"
    return ""


def cli(world: World, args: list[str], text: str, checked: bool = True) -> str:
    """A CLI command's outcome: "" on exit status 0, else its error, which must be a
    QememError (``qemem`` prints it on one line) or a usage error, never a traceback."""
    return cli_run(world, args, text, checked)[0]


def cli_run(world: World, args: list[str], text: str, checked: bool = True) -> tuple[str, str]:
    """``cli``'s outcome and the command's output."""
    with contextlib.chdir(world.folder):
        result = runner.invoke(app, args, env=CLI_ENV)
    if result.exit_code == 0:
        assert not (checked and refusable(text)), f"accepted {text[:80]!r}: {result.output[:300]}"
        return "", result.output
    error = result.exception
    detail = "".join(traceback.format_exception(error)) if error else ""
    assert error is None or isinstance(error, QememError | SystemExit), detail
    assert "Traceback" not in result.output, result.output
    return (str(error) if isinstance(error, QememError) else result.output or "usage error"), ""


URL_CHARS = 5000
"""Text in a URL is cut to this: a longer URL is refused by the HTTP client (httpx) itself."""


def quoted(text: str) -> str:
    """``text`` as a URL path segment: UTF-8 (a lone surrogate as the bytes a client sends),
    cut to what a client can send."""
    from urllib.parse import quote

    return quote(text[:URL_CHARS].encode("utf-8", "surrogatepass"), safe="")


# ---------------------------------------------------------------- drivers from the operation table

Driver = Callable[[World, str], None]
TEXT = (str, str | None)
"""The annotations of a text slot (an optional one is not checked: a lookup may ignore it)."""


def placeholder(name: str) -> object:
    """What a slot holds while the text is in another: the world's conversation, else an id
    no record has."""
    return {"conversation": "base", "conversations": ["base"]}.get(name, "x9")


def text_slots(method: Callable[..., object]) -> tuple[list[str], dict[str, object]]:
    """A method's text parameters, and the value of each required parameter while the text
    is elsewhere (a required parameter of another type needs a hand-written driver)."""
    hints = get_type_hints(method)
    params = [p for p in inspect.signature(method).parameters.values() if p.name != "self"]
    required = [p for p in params if p.default is inspect.Parameter.empty]
    untyped = [p.name for p in required if hints[p.name] not in TEXT and p.name != "conversations"]
    assert not untyped, f"{method.__qualname__}: write a driver filling {untyped}"
    return [p.name for p in params if hints[p.name] in TEXT], {
        p.name: placeholder(p.name) for p in required
    }


def op_driver(name: str) -> Driver:
    """A ``Memory`` method of the table: the text in each of its text parameters."""
    slots, filled = text_slots(getattr(MemoryAPI, name))

    def drive(world: World, text: str) -> None:
        method = getattr(world.memory, name)
        for slot in slots:
            library(partial(method, **(filled | {slot: text})), text, checked=slot in filled)

    return drive


def tool_driver(name: str) -> Driver:
    """An MCP tool made from its operation: the text in each of its text parameters (each
    but the conversation may be an id looked up, which needs not refuse it)."""
    [op] = tools()[name].operations
    slots, filled = text_slots(getattr(MemoryAPI, op.name))

    def drive(world: World, text: str) -> None:
        for slot in slots:
            tool(world, name, text, slot == "conversation", **(filled | {slot: text}))

    return drive


def route_driver(op: Operation) -> Driver:
    """An operation's route: the text in each path parameter (a URL carries no lone
    surrogate: not checked), then in each text field of its body; a route with neither
    answers a request carrying the text in a query parameter it ignores."""
    assert op.route is not None
    route = op.route
    fields = route.body.model_fields if route.body else {}
    texts = [f for f, info in fields.items() if info.annotation is str]
    others = [f for f, info in fields.items() if info.is_required() and f not in texts]
    assert not others, f"{route.path}: write a driver filling {others}"

    def send(world: World, path: str, body: dict[str, object] | None) -> Any:
        auth = world.http.auth(world.http.alice)
        return world.http.client.request(route.method, path, json=body, headers=auth)

    def drive(world: World, text: str) -> None:
        body = {f: placeholder(f) for f in texts} if route.body else None
        for slot in route.params:
            named = {p: quoted(text) if p == slot else placeholder(p) for p in route.params}
            status(send(world, route.path.format(**named), body), text, checked=False)
        path = route.path.format(**{p: placeholder(p) for p in route.params})
        for field in texts:
            status(send(world, path, (body or {}) | {field: text}), text)
        if not route.params and not texts:
            assert status(send(world, f"{path}?probe={quoted(text)}", body), text, False) == ""

    return drive


# ---------------------------------------------------------------- Memory methods


def _append(world: World, text: str, ingest: bool) -> None:
    for slot in SLOTS:
        cid, record = message(world, text, slot)
        if ingest:
            path = world.folder / f"{world.fresh()}.jsonl"
            path.write_text(json.dumps({**record, "conversation_id": cid}) + "\n", "utf-8")
            refusal = library(partial(world.memory.ingest, path), text, checked=False)
        else:
            add = partial(world.memory.add_messages, cid, [record])
            refusal = library(add, text, checked=False)
        check_stored(world.memory, cid, record, text, refusal)


def _items(world: World, text: str) -> None:
    """``add_items``: the text in an item alone (kept exactly, control characters too; only a
    lone surrogate is refused), then in an item and the message it is stored as (refused as
    a message's text is, else stored, then deleted with the conversation or the message)."""
    surrogate = any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    for item in ({"type": "function_call_output", "output": text}, {text: 1}):
        cid = world.fresh()
        add = partial(world.memory.add_items, cid, [item])
        refusal = library(add, text, checked=False)
        assert bool(refusal) == surrogate, refusal
        if not refusal:
            assert [i.data for i in world.memory.items(cid)] == [item]
            assert world.memory.delete(cid)
    for slot in SLOTS:
        cid, record = message(world, text, slot)
        add = partial(world.memory.add_items, cid, [{"content": text}], messages=[record])
        check_stored(world.memory, cid, record, text, library(add, text, checked=False))


def _both(
    call: Callable[[Memory, str, str], object], question: str = "pottery", checked: bool = True
) -> Callable[[World, str], None]:
    """A driver putting the text first in the question (of conversation base), then in the
    conversation id. ``checked``: the question must refuse text no store can keep (an id
    looked up needs not: no record has it)."""

    def drive(world: World, text: str) -> None:
        library(lambda: call(world.memory, "base", text), text, checked)
        library(lambda: call(world.memory, text, question), text)

    return drive


def _memory_file(world: World, text: str) -> None:
    for conversation, note in ((text, "note"), ("base", text)):
        file = MemoryFile(conversation=conversation, note=note, episodes=(), facts=())
        library(partial(world.memory.import_memory, file), text, checked=conversation == text)


def _open(world: World, text: str) -> None:
    folder = world.folder / world.fresh()
    folder.mkdir()
    with contextlib.chdir(folder):
        library(lambda: Memory.open(text, read_only=True).close(), text, checked=False)
    assert list(folder.iterdir()) == []  # a reader creates nothing


def _embed(world: World, text: str) -> None:
    [turn] = world.memory.turns("base")[:1]
    library(lambda: world.memory.embed_documents([replace(turn, text=text)]), text, False)


def _namespace(world: World, text: str) -> None:
    library(
        lambda: Memory(world.memory.store, HashEmbedder(), namespace=text).conversations(), text
    )


def _nemori(world: World, text: str) -> None:
    empty = world.folder / "nemori-empty"
    empty.mkdir(exist_ok=True)
    library(lambda: world.memory.import_nemori(empty, text), text)
    with contextlib.chdir(world.folder):
        library(lambda: world.memory.import_nemori(text, "base"), text, checked=False)


def _audit(world: World, text: str) -> None:
    library(lambda: world.memory.audit_memory(text, sample=1), text)
    library(lambda: world.memory.audit_memory("base", sample=1, judge=text), text, False)


HAND_MEMORY: dict[str, Driver] = {
    "add_messages": lambda w, t: _append(w, t, ingest=False),
    "add_items": _items,
    "ask": _both(lambda m, c, q: m.ask(c, q, mode="retrieval")),
    "check": _both(lambda m, c, q: m.check(c, q)),
    "audit_memory": _audit,
    "context": _both(lambda m, c, q: m.context(c, q, budget_tokens=200)),
    "context_many": _both(lambda m, c, q: m.context_many([c, "base"], q, budget_tokens=200)),
    "ask_many": _both(lambda m, c, q: m.ask_many([c, "base"], q, mode="retrieval")),
    "build": lambda w, t: library(lambda: w.memory.build(t), t),
    "build_job": lambda w, t: library(lambda: w.memory.build_job(t), t),
    "jobs": lambda w, t: (
        library(lambda: w.memory.jobs(t), t),
        library(lambda: w.memory.jobs(before=t), t),
    ),
    "close": _namespace,  # a Memory of namespace TEXT: listed, then closed with its store
    "ping": lambda w, t: library(w.memory.ping, t, checked=False),
    "conversations": _namespace,
    "embed_documents": _embed,
    "episode_turns": _both(lambda m, c, e: m.episode_turns(c, e), "e1", False),
    "episodes": lambda w, t: library(lambda: w.memory.episodes(t, [t]), t),
    "export_memory": lambda w, t: library(lambda: w.memory.export_memory(t), t),
    "fact_episodes": _both(lambda m, c, f: m.fact_episodes(c, f), "f1", False),
    "facts": lambda w, t: (
        library(lambda: w.memory.facts(t, [t]), t),
        library(lambda: w.memory.facts("base", as_of=t), t, False),
    ),
    "correct_fact": lambda w, t: (
        library(lambda: w.memory.correct_fact("base", "S9", t), t),
        library(lambda: w.memory.correct_fact("base", t, "Ana has a cat."), t),
        library(lambda: w.memory.correct_fact(t, "S9", "Ana has a cat."), t),
        library(lambda: w.memory.correct_fact("base", "S9", "Ana.", turns=[t]), t, False),
    ),
    "import_memory": _memory_file,
    "import_nemori": _nemori,
    "ingest": lambda w, t: _append(w, t, ingest=True),
    "open": _open,
    "plan": _both(lambda m, c, q: m.plan(c, q)),
    "records": _both(lambda m, c, i: m.records(c, "turn", [i]), "D1:1", False),
    "retrieve": _both(lambda m, c, q: m.retrieve(c, q)),
    "scope": lambda w, t: library(lambda: w.memory.scope(t), t),
    "search": _both(lambda m, c, q: m.search(c, [q, "cat"] if c == "base" else q)),
    "search_many": _both(lambda m, c, q: m.search_many([c, "base"], q)),
    "turns": lambda w, t: library(lambda: w.memory.turns(t, [t]), t),
    "passages": lambda w, t: library(lambda: w.memory.passages(t), t),
}
MEMORY_DRIVERS = {
    op.name: op_driver(op.name) for op in OPERATIONS if op.name not in HAND_MEMORY
} | HAND_MEMORY


# ---------------------------------------------------------------- HTTP routes


def _post(world: World, path: str, body: object) -> Any:
    # json.dumps escapes a lone surrogate as \ud800, as any JSON client sends it
    headers = {**world.http.auth(world.http.alice), "Content-Type": "application/json"}
    return world.http.client.post(path, content=json.dumps(body), headers=headers)


def _get(world: World, path: str, method: str = "GET") -> Any:
    auth = world.http.auth(world.http.alice)
    return world.http.client.request(method, path, headers=auth)


def _http_append(world: World, text: str) -> None:
    from urllib.parse import unquote

    for slot in SLOTS if len(text) <= URL_CHARS else SLOTS[1:]:
        # a URL carries UTF-8 bytes: the app sees a lone surrogate as U+FFFD
        sent = unquote(quoted(text)) if slot == "conversation" else text
        cid, record = message(world, sent, slot)
        body = {"messages": [record]}
        response = _post(world, f"/v1/conversations/{quoted(cid)}/messages", body)
        refusal = status(response, sent, checked=False)
        check_stored(world.alice, cid, record, sent, refusal, bound(slot))


def _http_items(world: World, text: str) -> None:
    """``POST .../items``: the text in the message an item is stored as, as for
    ``_http_append`` (an item's own text is driven through the library: a body holding it
    twice, JSON-escaped, outgrows the body limit)."""
    from urllib.parse import unquote

    for slot in SLOTS if len(text) <= URL_CHARS else SLOTS[1:]:
        sent = unquote(quoted(text)) if slot == "conversation" else text
        cid, record = message(world, sent, slot)
        body = {"items": [{"type": "message"}], "messages": [record]}
        response = _post(world, f"/v1/conversations/{quoted(cid)}/items", body)
        refusal = status(response, sent, checked=False)
        check_stored(world.alice, cid, record, sent, refusal, bound(slot))


def _http_query(
    field: str, extra: dict[str, object], route: str = ""
) -> Callable[[World, str], None]:
    route = route or ("search" if field == "query" else "ask")

    def drive(world: World, text: str) -> None:
        status(_post(world, f"/v1/conversations/base/{route}", {field: text, **extra}), text)
        body = {field: "pottery", **extra}  # a URL carries no lone surrogate: not checked
        status(_post(world, f"/v1/conversations/{quoted(text)}/{route}", body), text, False)

    return drive


def _http_search_many(world: World, text: str) -> None:
    status(_post(world, "/v1/search", {"conversations": ["base"], "query": text}), text)
    body = {"conversations": ["base", text], "query": "pottery"}
    status(_post(world, "/v1/search", body), text, checked=False)


def _http_many(path: str, extra: dict[str, object]) -> Callable[[World, str], None]:
    """A route across conversations: the text as the question, then as a conversation id."""

    def drive(world: World, text: str) -> None:
        status(_post(world, path, {"conversations": ["base"], "question": text, **extra}), text)
        body = {"conversations": ["base", text], "question": "pottery", **extra}
        status(_post(world, path, body), text, checked=False)

    return drive


def _http_plain(path: str, method: str = "GET") -> Callable[[World, str], None]:
    """A route without text (the text goes in a query parameter it ignores) or with one in
    its path."""

    def drive(world: World, text: str) -> None:
        if "{" in path:
            target = path.format(quoted(text))
            status(_get(world, target, method), text, checked=False)
        else:
            response = _get(world, f"{path}?probe={quoted(text)}", method)
            assert status(response, text, checked=False) == ""

    return drive


def _http_jobs(world: World, text: str) -> None:
    """``GET /v1/jobs``: the text ignored, as the status and as the page's cursor."""
    _http_plain("/v1/jobs")(world, text)
    for param in ("status", "cursor"):
        status(_get(world, f"/v1/jobs?{param}={quoted(text)}"), text, checked=False)


def _http_record(path: str, method: str, body: object = None) -> Callable[[World, str], None]:
    """A route on one record of a conversation (``path`` formatted with the conversation and
    the record id): the text as the record id of conversation base, then as the
    conversation."""

    def drive(world: World, text: str) -> None:
        auth = world.http.auth(world.http.alice)
        for conversation, record in (("base", quoted(text)), (quoted(text), "S9")):
            target = path.format(conversation, record)
            response = world.http.client.request(method, target, json=body, headers=auth)
            status(response, text, checked=False)

    return drive


def _http_correct(world: World, text: str) -> None:
    status(_post(world, "/v1/conversations/base/facts/S9/correct", {"content": text}), text)
    body = {"content": "Ana has a cat.", "turns": [text]}
    status(_post(world, "/v1/conversations/base/facts/S9/correct", body), text, checked=False)
    _http_record("/v1/conversations/{}/facts/{}/correct", "POST", {"content": "Ana."})(world, text)


def _http_facts(world: World, text: str) -> None:
    response = _get(world, f"/v1/conversations/base/facts?as_of={quoted(text)}")
    status(response, text, checked=False)
    _http_plain("/v1/conversations/{}/facts")(world, text)


def _http_audit(world: World, text: str) -> None:
    path = f"/v1/conversations/{quoted(text)}/audit"
    status(_post(world, path, {"sample": 1}), text, checked=False)
    body = {"sample": 1, "seed": text}  # not a number: refused
    status(_post(world, "/v1/conversations/base/audit", body), text, checked=False)


HAND_HTTP: dict[str, Driver] = {
    "GET /healthz": _http_plain("/healthz"),
    "GET /readyz": _http_plain("/readyz"),
    "GET /metrics": _http_plain("/metrics"),
    "GET /docs": _http_plain("/docs"),
    "GET /docs/oauth2-redirect": _http_plain("/docs/oauth2-redirect"),
    "POST /v1/conversations/{conversation}/messages": _http_append,
    "POST /v1/conversations/{conversation}/items": _http_items,
    "POST /v1/conversations/{conversation}/search": _http_query("query", {"k": 3}),
    "POST /v1/search": _http_search_many,
    "POST /v1/ask": _http_many("/v1/ask", {"mode": "retrieval"}),
    "POST /v1/context": _http_many("/v1/context", {}),
    "POST /v1/conversations/{conversation}/ask": _http_query("question", {"mode": "retrieval"}),
    "POST /v1/conversations/{conversation}/context": _http_query("question", {}, "context"),
    "POST /v1/conversations/{conversation}/check": _http_query("text", {}, "check"),
    "POST /v1/conversations/{conversation}/audit": _http_audit,
    "GET /v1/jobs": _http_jobs,
    "GET /v1/conversations/{conversation}/facts": _http_facts,
    "POST /v1/conversations/{conversation}/facts/{fact}/correct": _http_correct,
}
ROUTES = {f"{op.route.method} {op.route.path}": op for op in OPERATIONS if op.route}
HTTP_DRIVERS = {
    name: route_driver(op) for name, op in ROUTES.items() if name not in HAND_HTTP
} | HAND_HTTP


# ---------------------------------------------------------------- MCP tools


def _remember(world: World, text: str) -> None:
    for slot in SLOTS:
        cid, record = message(world, text, slot)
        refusal = tool(world, "remember", text, False, conversation=cid, messages=[record])
        check_stored(world.memory, cid, record, text, refusal, bound(slot))


HAND_MCP: dict[str, Driver] = {
    "remember": _remember,
    "recall": lambda w, t: (
        tool(w, "recall", t, conversation="base", query=t),
        tool(w, "recall", t, conversation=t, query="cat", pool=False),
    ),
    "recall_across": lambda w, t: (
        tool(w, "recall_across", t, conversations=["base"], query=t),
        tool(w, "recall_across", t, False, conversations=["base", t], query="cat"),
    ),
    "ask": lambda w, t: (
        tool(w, "ask", t, conversation="base", question=t, mode="retrieval"),
        tool(w, "ask", t, conversation=t, question="who?", mode="retrieval"),
    ),
    "context": lambda w, t: (
        tool(w, "context", t, conversation="base", question=t),
        tool(w, "context", t, conversation=t, question="who?"),
    ),
    "context_across": lambda w, t: (
        tool(w, "context_across", t, conversations=["base"], question=t),
        tool(w, "context_across", t, False, conversations=["base", t], question="who?"),
    ),
    "ask_across": lambda w, t: (
        tool(w, "ask_across", t, conversations=["base"], question=t, mode="retrieval"),
        tool(
            w, "ask_across", t, False, conversations=["base", t], question="who?", mode="retrieval"
        ),
    ),
    "check": lambda w, t: (
        tool(w, "check", t, conversation="base", text=t),
        tool(w, "check", t, conversation=t, text="Ana said hello."),
    ),
    "list_conversations": lambda w, t: tool(w, "list_conversations", t, False),
    "forget": lambda w, t: tool(w, "forget", t, conversation=t),
    "facts": lambda w, t: (
        tool(w, "facts", t, conversation=t),
        tool(w, "facts", t, False, conversation="base", as_of=t),
    ),
    "forget_message": lambda w, t: (
        tool(w, "forget_message", t, False, conversation="base", message=t),
        tool(w, "forget_message", t, conversation=t, message="D9:9", redact=True),
    ),
    "correct_fact": lambda w, t: (
        tool(w, "correct_fact", t, conversation="base", fact="S9", content=t),
        tool(w, "correct_fact", t, False, conversation="base", fact=t, content="Ana."),
        tool(w, "correct_fact", t, False, conversation="base", fact="S9", content="A", turns=[t]),
    ),
}
MCP_DRIVERS = {name: tool_driver(name) for name in tools() if name not in HAND_MCP} | HAND_MCP


# ---------------------------------------------------------------- CLI commands


def _cli_ingest(world: World, text: str) -> None:
    for slot in SLOTS:
        cid, record = message(world, text, slot)
        path = world.folder / f"{world.fresh()}.jsonl"
        path.write_text(json.dumps({**record, "conversation_id": cid}) + "\n", "utf-8")
        refusal = cli(world, ["ingest", str(path), "--store", world.url, "-q"], text, False)
        check_stored(world.memory, cid, record, text, refusal)


def _cli_keys_create(world: World, text: str) -> None:
    args = ["keys", "create", "--store", world.url, "--namespace", text, "--label", text]
    refusal, output = cli_run(world, [*args, "--json"], text)
    if refusal:
        return
    created = json.loads(output.rstrip("\n").split("\n")[-1])  # U+0085 is no line end here
    assert (created["namespace"], created["label"]) == (text, text)
    keys = open_key_store(world.url)
    try:
        [listed] = [r for r in keys.list(text) if r.id == created["id"]]
    finally:
        keys.close()
    assert (listed.namespace, listed.label) == (text, text)
    assert cli(world, ["keys", "revoke", created["id"], "--store", world.url], text, False) == ""


def _cli_memory_file(world: World, text: str) -> None:
    document = {"format": "qemem-memory/1", "conversation": text, "note": "", "episodes": []}
    path = world.folder / f"{world.fresh()}.json"
    path.write_text(json.dumps({**document, "facts": []}), "utf-8")
    cli(world, ["import-memory", str(path), "--store", world.url], text)
    cli(world, ["import-memory", text, "--store", world.url], text, checked=False)


def _cli_export(world: World, text: str) -> None:
    cli(world, ["export-memory", "--store", world.url, "-c", text], text)
    out = ["export-memory", "--store", world.url, "-c", "base", "-o", text]
    if cli(world, out, text, checked=False) == "":
        written = world.folder / text
        assert json.loads(written.read_text("utf-8"))["conversation"] == "base"
        written.unlink()


def _cli_server(command: str) -> Callable[[World, str], None]:
    def drive(world: World, text: str) -> None:
        with contextlib.suppress(QememError):
            if parse_store_url(text)[1] == ":memory:":
                return  # an in-memory store exists: the server would start
        cli(world, [command, "--store", text], text, checked=False)

    return drive


def _cli_data(world: World, text: str) -> None:
    from qemem.cli.app import sample_path

    with pytest.MonkeyPatch.context() as patch:  # no download: the sample stands for LoCoMo
        patch.setattr("qemem.cli.data.download_locomo", lambda out: (sample_path(), False))
        cli(world, ["data", "locomo", "--out", "data", "--subset", text, "--json"], text, False)


def _cli(*argvs: list[str], checked: bool = True) -> Callable[[World, str], None]:
    """A driver running each argv with STORE and TEXT replaced by the store and the text."""

    def drive(world: World, text: str) -> None:
        for argv in argvs:
            names = {"STORE": world.url, "TEXT": text}
            cli(world, [names.get(a, a) for a in argv], text, checked)

    return drive


NEMORI = "nemori-empty"
BEAM_FIXTURE = Path(__file__).parent / "fixtures" / "beam"
CLI_DRIVERS: dict[str, Callable[[World, str], None]] = {
    "ingest": _cli_ingest,
    "conversations": _cli(["conversations", "--store", "STORE", "--namespace", "TEXT", "--json"]),
    "delete": _cli(["delete", "TEXT", "--store", "STORE"]),
    "reembed": _cli(["reembed", "--store", "STORE", "--embedder", "TEXT", "-q"], checked=False),
    "reindex": _cli(["reindex", "--store", "STORE", "--embedder", "TEXT", "-q"], checked=False),
    "search": _cli(
        ["search", "TEXT", "--store", "STORE", "-c", "base", "--json"],
        ["search", "cat", "--store", "STORE", "-c", "TEXT", "--pool"],
        ["search", "cat", "--store", "STORE", "-c", "base", "-c", "TEXT", "--json"],
    ),
    "demo": _cli(["demo", "--llm", "TEXT"], checked=False),
    "build": _cli(["build", "--store", "STORE", "-c", "TEXT", "--llm", "fake"]),
    "import-nemori": lambda w, t: (
        (w.folder / NEMORI).mkdir(exist_ok=True),
        cli(w, ["import-nemori", NEMORI, "--store", w.url, "-c", t], t),
        cli(w, ["import-nemori", t, "--store", w.url, "-c", "base"], t, False),
    ),
    "ask": _cli(
        ["ask", "TEXT", "--store", "STORE", "-c", "base", "--mode", "retrieval", "--json"],
        ["ask", "who?", "--store", "STORE", "-c", "TEXT", "--mode", "retrieval"],
        ["ask", "who?", "--store", "STORE", "-c", "base", "-c", "TEXT", "--mode", "retrieval"],
    ),
    "context": _cli(
        ["context", "TEXT", "--store", "STORE", "-c", "base", "--json"],
        ["context", "who?", "--store", "STORE", "-c", "TEXT"],
        ["context", "who?", "--store", "STORE", "-c", "base", "-c", "TEXT", "--json"],
    ),
    "check": _cli(
        ["check", "TEXT", "--store", "STORE", "-c", "base", "--llm", "fake", "--json"],
        ["check", "Ana said hello.", "--store", "STORE", "-c", "TEXT", "--llm", "fake"],
    ),
    "time": _cli(
        ["time", "TEXT", "--anchor", "2024-03-14T19:15:00", "--json"],
        ["time", "last Friday", "--anchor", "TEXT"],
        checked=False,
    ),
    "import-memory": _cli_memory_file,
    "export-memory": _cli_export,
    "serve": _cli_server("serve"),
    "mcp": _cli_server("mcp"),
    "keys create": _cli_keys_create,
    "keys list": _cli(["keys", "list", "--store", "STORE", "--namespace", "TEXT", "--json"]),
    "keys revoke": _cli(["keys", "revoke", "TEXT", "--store", "STORE"], checked=False),
    "jobs list": _cli(
        ["jobs", "list", "--store", "STORE", "--namespace", "TEXT", "--json"],
        ["jobs", "list", "--store", "STORE", "--before", "TEXT"],
        ["jobs", "list", "--store", "STORE", "--status", "TEXT"],
    ),
    "jobs show": _cli(["jobs", "show", "TEXT", "--store", "STORE", "--json"]),
    "jobs cancel": _cli(["jobs", "cancel", "TEXT", "--store", "STORE"]),
    "eval coverage": _cli(["eval", "coverage", "--data", "TEXT", "--store", "c.db"], checked=False),
    "eval locomo": _cli(
        ["eval", "locomo", "--data", "TEXT", "--out", "run", "--llm", "fake"], checked=False
    ),
    "eval report": _cli(["eval", "report", "TEXT"], checked=False),
    "eval compare": _cli(["eval", "compare", "TEXT", "TEXT"], checked=False),
    "eval audit claims": _cli(
        ["eval", "audit", "claims", "TEXT", "--judge", "fake"], checked=False
    ),
    "eval audit answers": _cli(
        ["eval", "audit", "answers", "TEXT", "--judge", "fake"], checked=False
    ),
    "eval audit memory": _cli(
        ["eval", "audit", "memory", "--store", "STORE", "-c", "TEXT", "--judge", "fake"],
        ["eval", "audit", "memory", "--store", "STORE", "-c", "base", "--judge", "TEXT"],
        checked=False,
    ),
    "data locomo": _cli_data,
    "data beam": _cli(
        ["data", "beam", "--from", "TEXT", "--out", "beam.json"],
        ["data", "beam", "--from", str(BEAM_FIXTURE), "--out", "beam.json", "--chats", "TEXT"],
        checked=False,
    ),
    "data longmemeval": _cli(["data", "longmemeval", "TEXT", "--out", "lme.json"], checked=False),
    "eval beam": _cli(
        ["eval", "beam", "--data", "TEXT", "--out", "run", "--llm", "fake"], checked=False
    ),
    "eval longmemeval": _cli(
        ["eval", "longmemeval", "--data", "TEXT", "--out", "run", "--llm", "fake"], checked=False
    ),
    "facts": _cli(
        ["facts", "--store", "STORE", "-c", "TEXT", "--json"],
        ["facts", "--store", "STORE", "-c", "base", "--as-of", "TEXT"],
        checked=False,
    ),
    "delete-message": _cli(
        ["delete-message", "TEXT", "--store", "STORE", "-c", "base"],
        ["delete-message", "D9:9", "--store", "STORE", "-c", "TEXT"],
    ),
    "redact-message": _cli(
        ["redact-message", "TEXT", "--store", "STORE", "-c", "base"],
        ["redact-message", "D9:9", "--store", "STORE", "-c", "TEXT"],
    ),
    "delete-fact": _cli(
        ["delete-fact", "TEXT", "--store", "STORE", "-c", "base"],
        ["delete-fact", "S9", "--store", "STORE", "-c", "TEXT"],
    ),
    "correct-fact": _cli(
        ["correct-fact", "S9", "TEXT", "--store", "STORE", "-c", "base"],
        ["correct-fact", "TEXT", "Ana.", "--store", "STORE", "-c", "base"],
        ["correct-fact", "S9", "Ana.", "--store", "STORE", "-c", "TEXT", "--turn", "TEXT"],
    ),
    "reproduce": _cli(
        ["reproduce", "-c", "TEXT", "--dry-run"],
        ["reproduce", "-c", "coverage-turns", "--data", "TEXT", "--dry-run"],
        ["reproduce", "--conditions", "TEXT", "--list"],
        checked=False,
    ),
}


# ---------------------------------------------------------------- every entry point has a driver


def memory_methods() -> set[str]:
    return {
        name
        for cls in Memory.__mro__  # Memory and its mixins
        if cls.__module__.startswith("qemem.memory.") and cls is not MemoryAPI
        for name, value in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(getattr(value, "__func__", value))
    }


def http_routes() -> set[str]:
    with served() as s:
        return {
            f"{method} {route.path}"
            for route in s.app.routes
            if isinstance(route, APIRoute)
            for method in route.methods
        }


def mcp_tools() -> set[str]:
    import anyio

    from qemem.service.mcp_server import create_mcp_server

    with Memory.open(None, embedder=HashEmbedder()) as memory:
        server = create_mcp_server(memory)
        return {t.name for t in anyio.run(server.list_tools)}


def cli_commands() -> set[str]:
    def walk(command: Any, path: tuple[str, ...]) -> Iterator[str]:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from walk(sub, (*path, name))
        else:
            yield " ".join(path)

    return set(walk(get_command(app), ()))


SURFACES: dict[str, tuple[Callable[[], set[str]], dict[str, Callable[[World, str], None]]]] = {
    "memory": (memory_methods, MEMORY_DRIVERS),
    "http": (http_routes, HTTP_DRIVERS),
    "mcp": (mcp_tools, MCP_DRIVERS),
    "cli": (cli_commands, CLI_DRIVERS),
}


@pytest.mark.parametrize("surface", SURFACES)
def test_every_entry_point_has_a_driver(surface: str) -> None:
    enumerate_, drivers = SURFACES[surface]
    found = enumerate_()
    assert found - set(drivers) == set(), f"{surface}: add a driver for each of these"
    assert set(drivers) - found == set(), f"{surface}: these entry points are gone"


# ---------------------------------------------------------------- the property


STORELESS = {
    ("memory", "open"),  # the text is the store path
    *(
        ("cli", name)
        for name in (
            "serve",
            "mcp",
            "demo",
            "time",
            "data locomo",
            "data beam",
            "data longmemeval",
            "reproduce",
        )
    ),
    *(("cli", name) for name in CLI_DRIVERS if name.startswith("eval ")),
}
"""Entry points whose text never reaches the world's store: driven on one backend only."""
ENTRIES = [(surface, name) for surface, (_, drivers) in SURFACES.items() for name in drivers]
STORED = [e for e in ENTRIES if e not in STORELESS]


@pytest.mark.slow
@pytest.mark.parametrize("backend_url", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize(("surface", "name"), STORED, ids=[f"{s}:{n}" for s, n in STORED])
def test_an_entry_point_stores_text_exactly_or_refuses_it_clearly(
    world: World, surface: str, name: str
) -> None:
    check_entry_point(world, surface, name)


@pytest.mark.slow
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("surface", "name"), sorted(STORELESS), ids=[f"{s}:{n}" for s, n in sorted(STORELESS)]
)
def test_an_entry_point_without_the_store_refuses_text_clearly(
    world: World, surface: str, name: str
) -> None:
    check_entry_point(world, surface, name)


def check_entry_point(world: World, surface: str, name: str) -> None:
    """The property, on the special strings and a few generated ones."""
    drive = SURFACES[surface][1][name]

    def run(text: str) -> None:
        before = world.snapshot()
        drive(world, text)
        assert world.snapshot() == before  # a refused input changed nothing; an accepted one
        # was read back and deleted again

    for special in reversed(SPECIAL):
        run = example(special)(run)
    SETTINGS(given(TEXTS)(run))()
