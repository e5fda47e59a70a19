"""What the remote clients say to a qemem server, without doing any I/O (sans-IO).

Each ``MemoryAPI`` operation is a generator that yields the HTTP requests it needs (``Call``)
and the pauses between polls (``Wait``), receives each response's JSON, and returns the
method's result; an error response is thrown into it as the ``QememError`` it stands for (so
``delete`` can treat a 404 as "absent"). ``RemoteMemory`` drives these generators with
``httpx.Client``, ``AsyncRemoteMemory`` with ``httpx.AsyncClient``: one protocol, two drivers,
the same results and exceptions.

An operation's request is built from its declaration in the operation table
(:mod:`qemem.operations`) by ``call_of``, the one place paths are made: every path segment
taken from an argument is percent-encoded whole, so an id holding ``/``, ``#``, ``?``, ``%``
or spaces names that id and nothing else. The few operations that are more than one request
(``ingest``, ``build``) or that finish the answer here (``delete``, ``episodes`` and ``facts``
with ``ids``) are composed below.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, get_type_hints
from urllib.parse import quote, urlencode

import httpx
from pydantic import BaseModel, TypeAdapter

from qemem.build import BuildReport
from qemem.errors import (
    AuthError,
    ConflictError,
    InputError,
    LLMError,
    NotFoundError,
    QememError,
    StoreError,
)
from qemem.ingest.additions import IngestReport
from qemem.ingest.reader import read_conversations
from qemem.memory.api import Appended, MemoryAPI, Progress
from qemem.memory.jobs import Job
from qemem.models import ConversationInput, Episode, SemanticFact
from qemem.operations import Operation, operation, route_of

T = TypeVar("T")
R = TypeVar("R", Episode, SemanticFact)


@dataclass(frozen=True)
class Call:
    """One HTTP request: method, path under the base URL, JSON body, extra headers."""

    method: str
    path: str
    body: object = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Wait:
    """A pause before the next poll (of the client's ``poll_seconds``)."""


Steps = Generator[Call | Wait, Any, T]
"""An operation: yields calls and waits, receives responses' JSON, returns its result."""

_ERRORS: dict[int, type[QememError]] = {
    401: AuthError,
    403: AuthError,
    404: NotFoundError,
    409: ConflictError,
    413: InputError,
    422: InputError,
}
BATCH = 200
"""Messages per request when ingesting a file."""


def unreachable(base_url: str, exc: httpx.TransportError) -> QememError:
    """The error for a server that could not be reached."""
    return QememError(
        f"cannot reach the qemem server at {base_url}: {exc} (is `qemem serve` running there?)"
    )


def result_of(response: httpx.Response) -> Any:
    """A response's JSON (None when empty), or the ``QememError`` its problem details name."""
    if response.status_code >= 400:
        try:
            detail = str(response.json().get("detail", response.text))
        except ValueError:
            detail = response.text
        kind = _ERRORS.get(response.status_code)
        if kind is None and response.status_code == 503:
            kind = LLMError if "LLM" in detail else StoreError
        raise (kind or QememError)(f"{detail} (HTTP {response.status_code})")
    return response.json() if response.content else None


# ---------------------------------------------------------------------- requests
def segment(value: str) -> str:
    """``value`` as one path segment: every reserved character percent-encoded (``/`` too),
    and the dot segments ``.`` and ``..`` spelled ``%2E`` so that no client or server
    resolves them."""
    if value in (".", ".."):
        return "%2E" * len(value)
    return quote(value, safe="")


@cache
def _field(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    annotation: Any = model.model_fields[name].annotation
    return TypeAdapter(annotation)


def _json(model: type[BaseModel], name: str, value: Any) -> Any:
    """A body field's JSON, as the model's field type writes it (a ``Ref`` without its unset
    conversation); a value the type does not describe (a bare string for a list, messages as
    dicts) goes as it is, for the server to judge."""
    if isinstance(value, Collection) and not isinstance(value, str | bytes | Mapping):
        value = list(value)
    return _field(model, name).dump_python(value, mode="json", warnings=False)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value.isoformat() if isinstance(value, date) else str(value)


def call_of(op: Operation, args: Mapping[str, Any]) -> Call:
    """The request of ``op`` with the method's ``args``: each one in the path, a header, the
    query or the body, as the route declares (TypeError when one has no place)."""
    route = route_of(op)
    if route is None:
        raise TypeError(f"{op.name} has no route of its own: it is composed of others")
    wire = {op.wire(k): v for k, v in args.items() if k != "self"} | dict(op.fixed)
    path = route.path.format(**{p: segment(wire.pop(p)) for p in route.params})
    headers = {}
    for header in route.headers:
        value = wire.pop(header.param)
        if value is not None:
            headers[header.header] = header.check(value)
    if route.query is not None:
        params = {f: wire.pop(f) for f in route.query.model_fields if f in wire}
        kept = {k: _query_value(v) for k, v in params.items() if v is not None}
        path += "?" + urlencode(kept, quote_via=quote) if kept else ""
    body = None
    if route.body is not None:
        fields = [f for f in route.body.model_fields if f in wire]
        body = {f: _json(route.body, f, wire.pop(f)) for f in fields}
    if wire:
        raise TypeError(f"{op.name}: the route has no place for {sorted(wire)}")
    return Call(route.method, path, body, headers)


@cache
def _returns(name: str) -> TypeAdapter[Any]:
    return TypeAdapter(get_type_hints(getattr(MemoryAPI, name))["return"])


def sent(op: Operation, args: Mapping[str, Any]) -> Steps[Any]:
    """``op`` as one request, its answer decoded (as the operation declares, else as the
    method's return type)."""
    out = yield call_of(op, args)
    return op.decode(out) if op.decode else _returns(op.name).validate_python(out)


def steps(name: str, args: Mapping[str, Any]) -> Steps[Any]:
    """The steps of operation ``name`` called with ``args`` (a method's ``locals()``)."""
    args = {k: v for k, v in args.items() if k != "self"}
    composed = COMPOSED.get(name)
    return composed(args) if composed else sent(operation(name), args)


# ---------------------------------------------------------------------- composed
def _messages(conversations: Sequence[ConversationInput]) -> dict[str, list[dict[str, Any]]]:
    """Each conversation's turns as messages, with the ids the source gives them (the server
    gives the others theirs)."""
    return {
        conv.id: [
            {
                "session_id": session.key,
                "timestamp": turn.timestamp.isoformat(),
                "speaker": turn.speaker,
                "text": turn.text,
                **({"id": turn.id} if turn.id is not None else {}),
            }
            | ({"role": turn.role} if turn.role else {})
            for session in conv.sessions
            for turn in session.turns
        ]
        for conv in conversations
    }


def ingest(args: dict[str, Any]) -> Steps[IngestReport]:
    """Parse here, send as batches of messages."""
    started = time.perf_counter()
    source: str | Path | Sequence[ConversationInput] = args["source"]
    progress: Progress | None = args["progress"]
    conversations = (
        read_conversations(source, args["fmt"]) if isinstance(source, str | Path) else list(source)
    )
    messages = _messages(conversations)
    total, done = sum(map(len, messages.values())), 0
    report = IngestReport()
    add = operation("add_messages")
    for cid, batch in messages.items():
        sessions = turns = 0
        for start in range(0, len(batch), BATCH):
            chunk = batch[start : start + BATCH]
            call = {"conversation": cid, "messages": chunk, "idempotency_key": None}
            appended: Appended = yield from sent(add, call)
            sessions, turns = sessions + appended.sessions_added, turns + appended.turns_added
            done += len(appended.ids)
            if progress:
                progress(done, total)
        report.added[cid] = (sessions, turns)
    report.seconds = time.perf_counter() - started
    return report


def build(args: dict[str, Any]) -> Steps[list[BuildReport]]:
    """A build job per conversation (all of them by default), each polled to its end."""
    conversation: str | None = args["conversation"]
    progress: Progress | None = args["progress"]
    if conversation:
        targets = [conversation]
    else:
        targets = [c.id for c in (yield from sent(operation("conversations"), {}))]
    reports: list[BuildReport] = []
    for cid in targets:
        job: Job = yield from sent(operation("enqueue_build"), {"conversation": cid})
        while job.status in ("queued", "running"):
            yield Wait()
            job = yield from sent(operation("job"), {"job_id": job.id})
            if progress and job.total:
                progress(job.done, job.total)
        if job.status != "done":
            raise QememError(f"the build of {cid} {job.status} on the server: {job.error}")
        reports.extend(job.reports)
    return reports


def delete(args: dict[str, Any]) -> Steps[bool]:
    """True when the conversation was deleted, False when there was none (404)."""
    try:
        yield call_of(operation("delete"), args)
    except NotFoundError:
        return False
    return True


def _select(records: list[R], ids: Sequence[str]) -> list[R]:
    """The records of ``ids``, in their order (unknown ids skipped), as ``Memory`` gives."""
    by_id = {r.id: r for r in records}
    return [by_id[i] for i in ids if i in by_id]


def episodes(args: dict[str, Any]) -> Steps[list[Episode]]:
    """The conversation's episodes (those of ``ids``, chosen here)."""
    ids: Sequence[str] | None = args.pop("ids")
    found: list[Episode] = yield from sent(operation("episodes"), args)
    return found if ids is None else _select(found, ids)


def facts(args: dict[str, Any]) -> Steps[list[SemanticFact]]:
    """The facts the server lists; with ``ids`` all of them, current or not (chosen here)."""
    ids: Sequence[str] | None = args.pop("ids")
    if ids is not None:  # exactly those facts, current or not
        args |= {"as_of": None, "include_superseded": True}
    found: list[SemanticFact] = yield from sent(operation("facts"), args)
    return found if ids is None else _select(found, ids)


COMPOSED: dict[str, Callable[[dict[str, Any]], Steps[Any]]] = {
    "ingest": ingest,
    "build": build,
    "delete": delete,
    "episodes": episodes,
    "facts": facts,
}
"""The operations the clients compose here; every other one is ``sent`` as declared."""
