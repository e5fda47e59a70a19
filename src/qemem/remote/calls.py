"""What the remote clients say to a qemem server, without doing any I/O (sans-IO).

Each ``MemoryAPI`` operation is a generator that yields the HTTP requests it needs (``Call``)
and the pauses between polls (``Wait``), receives each response's JSON, and returns the
method's result; an error response is thrown into it as the ``QememError`` it stands for (so
``delete`` can treat a 404 as "absent"). ``RemoteMemory`` drives these generators with
``httpx.Client``, ``AsyncRemoteMemory`` with ``httpx.AsyncClient``: one protocol, two drivers,
the same results and exceptions.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import httpx
from pydantic import TypeAdapter

from qemem.answer import Answer
from qemem.answer.ask import Mode
from qemem.answer.check import CheckResult
from qemem.answer.memory_audit import MemoryAudit
from qemem.answer.wire import (
    answer_from_json,
    audit_from_json,
    check_from_json,
    context_from_json,
)
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
from qemem.evidence.block import Context
from qemem.ingest.additions import IngestReport
from qemem.ingest.reader import Format, read_conversations
from qemem.memory.api import (
    IDEMPOTENCY_HEADER,
    Appended,
    ContextMode,
    Forgotten,
    Progress,
    SearchResult,
    check_idempotency_key,
)
from qemem.memory.jobs import Job
from qemem.models import (
    Conversation,
    ConversationInput,
    Episode,
    Pool,
    Ref,
    SemanticFact,
    Session,
    Space,
    Supersession,
)

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
    """A pause of ``seconds`` before the next request (polling)."""

    seconds: float


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
_SESSIONS = TypeAdapter(list[Session])
_REFS = TypeAdapter(list[Ref])
BATCH = 200
"""Messages per request when ingesting a file."""


def _load(kind: type[T] | Any, data: Any) -> T:
    return TypeAdapter(kind).validate_python(data)  # type: ignore[no-any-return]


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


def conversation_of(data: Mapping[str, Any]) -> Conversation:
    created = data.get("created_at")
    return Conversation(
        data["id"],
        tuple(data["speakers"]),
        tuple(_SESSIONS.validate_python(data["sessions"])),
        data["namespace"],
        datetime.fromisoformat(created) if created else None,
    )


def job_of(data: Mapping[str, Any]) -> Job:
    """A job from its JSON (fields this client does not know are left out)."""
    known = {f.name for f in fields(Job)}
    reports: list[BuildReport] = _load(list[BuildReport], data["reports"])
    return Job(**{k: v for k, v in data.items() if k in known} | {"reports": reports})


# ---------------------------------------------------------------------- operations
def add_messages(
    conversation: str, messages: Sequence[Mapping[str, Any]], idempotency_key: str | None
) -> Steps[Appended]:
    headers = {}
    if idempotency_key is not None:
        headers[IDEMPOTENCY_HEADER] = check_idempotency_key(idempotency_key)
    path = f"/v1/conversations/{conversation}/messages"
    out = yield Call("POST", path, {"messages": list(messages)}, headers)
    return Appended(out["ids"], out["turns_added"], out["sessions_added"])


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
            for session in conv.sessions
            for turn in session.turns
        ]
        for conv in conversations
    }


def ingest(
    source: str | Path | Sequence[ConversationInput], fmt: Format, progress: Progress | None
) -> Steps[IngestReport]:
    started = time.perf_counter()
    conversations = (
        read_conversations(source, fmt) if isinstance(source, str | Path) else list(source)
    )
    messages = _messages(conversations)
    total, done = sum(map(len, messages.values())), 0
    report = IngestReport()
    for cid, batch in messages.items():
        sessions = turns = 0
        for start in range(0, len(batch), BATCH):
            appended = yield from add_messages(cid, batch[start : start + BATCH], None)
            sessions, turns = sessions + appended.sessions_added, turns + appended.turns_added
            done += len(appended.ids)
            if progress:
                progress(done, total)
        report.added[cid] = (sessions, turns)
    report.seconds = time.perf_counter() - started
    return report


def delete(conversation: str) -> Steps[bool]:
    try:
        yield Call("DELETE", f"/v1/conversations/{conversation}")
    except NotFoundError:
        return False
    return True


def conversations() -> Steps[list[Conversation]]:
    out = yield Call("GET", "/v1/conversations")
    return [conversation_of(c) for c in out]


def conversation(conversation: str) -> Steps[Conversation]:
    return conversation_of((yield Call("GET", f"/v1/conversations/{conversation}")))


def build(
    conversation: str | None, progress: Progress | None, poll_seconds: float
) -> Steps[list[BuildReport]]:
    targets = [conversation] if conversation else [c.id for c in (yield from conversations())]
    reports: list[BuildReport] = []
    for cid in targets:
        job = yield from enqueue_build(cid)
        while job.status in ("queued", "running"):
            yield Wait(poll_seconds)
            job = yield from get_job(job.id)
            if progress and job.total:
                progress(job.done, job.total)
        if job.status != "done":
            raise QememError(f"the build of {cid} {job.status} on the server: {job.error}")
        reports.extend(job.reports)
    return reports


def enqueue_build(conversation: str) -> Steps[Job]:
    return job_of((yield Call("POST", f"/v1/conversations/{conversation}/build")))


def get_job(job_id: str) -> Steps[Job]:
    return job_of((yield Call("GET", f"/v1/jobs/{job_id}")))


def jobs(status: str | None, limit: int, before: str | None) -> Steps[list[Job]]:
    params = {"status": status, "limit": str(limit), "cursor": before}
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items() if v is not None)
    return [job_of(j) for j in (yield Call("GET", f"/v1/jobs?{query}"))]


def cancel_job(job_id: str) -> Steps[Job]:
    return job_of((yield Call("DELETE", f"/v1/jobs/{job_id}")))


def search(
    conversation: str, query: str | Sequence[str], k: int | None, space: Space
) -> Steps[list[SearchResult]]:
    body = {"query": query if isinstance(query, str) else list(query), "k": k, "space": space}
    out = yield Call("POST", f"/v1/conversations/{conversation}/search", body)
    return _load(list[SearchResult], out["results"])


def search_many(
    conversations: Sequence[str], query: str | Sequence[str], k: int | None, space: Space
) -> Steps[list[SearchResult]]:
    body = {
        "conversations": conversations if isinstance(conversations, str) else list(conversations),
        "query": query if isinstance(query, str) else list(query),
        "k": k,
        "space": space,
    }
    out = yield Call("POST", "/v1/search", body)
    return _load(list[SearchResult], out["results"])


def retrieve(conversation: str, question: str, exclude: Collection[Ref]) -> Steps[Pool]:
    refs = _REFS.dump_python(list(exclude), mode="json")
    body = {"query": question, "pool": True, "exclude": refs}
    out = yield Call("POST", f"/v1/conversations/{conversation}/search", body)
    return _load(Pool, out["pool"])


def context(
    conversation: str, question: str, budget_tokens: int, mode: ContextMode
) -> Steps[Context]:
    body = {"question": question, "budget_tokens": budget_tokens, "mode": mode}
    return context_from_json(
        (yield Call("POST", f"/v1/conversations/{conversation}/context", body))
    )


def _conversation_list(conversations: Sequence[str]) -> str | list[str]:
    """As sent: a bare string stays one, so the server refuses it as ``Memory`` does."""
    return conversations if isinstance(conversations, str) else list(conversations)


def context_many(
    conversations: Sequence[str], question: str, budget_tokens: int, mode: ContextMode
) -> Steps[Context]:
    body = {
        "conversations": _conversation_list(conversations),
        "question": question,
        "budget_tokens": budget_tokens,
        "mode": mode,
    }
    return context_from_json((yield Call("POST", "/v1/context", body)))


def ask_many(conversations: Sequence[str], question: str, mode: Mode) -> Steps[Answer]:
    body = {"conversations": _conversation_list(conversations), "question": question, "mode": mode}
    return answer_from_json((yield Call("POST", "/v1/ask", body)))


def ask(conversation: str, question: str, mode: Mode) -> Steps[Answer]:
    body = {"question": question, "mode": mode}
    return answer_from_json((yield Call("POST", f"/v1/conversations/{conversation}/ask", body)))


def check(conversation: str, text: str) -> Steps[CheckResult]:
    body = {"text": text}
    return check_from_json((yield Call("POST", f"/v1/conversations/{conversation}/check", body)))


def episodes(conversation: str, ids: Sequence[str] | None) -> Steps[list[Episode]]:
    path = f"/v1/conversations/{conversation}/episodes"
    found: list[Episode] = _load(list[Episode], (yield Call("GET", path)))
    return found if ids is None else _select(found, ids)


def facts(
    conversation: str,
    ids: Sequence[str] | None,
    as_of: date | datetime | str | None,
    include_superseded: bool,
) -> Steps[list[SemanticFact]]:
    query: dict[str, str] = {}
    if ids is not None:  # exactly those facts, current or not
        include_superseded = True
    elif as_of is not None:
        query["as_of"] = as_of if isinstance(as_of, str) else as_of.isoformat()
    if include_superseded:
        query["include_superseded"] = "true"
    path = f"/v1/conversations/{conversation}/facts"
    found: list[SemanticFact] = _load(list[SemanticFact], (yield Call("GET", path + _query(query))))
    return found if ids is None else _select(found, ids)


def supersessions(conversation: str) -> Steps[list[Supersession]]:
    path = f"/v1/conversations/{conversation}/supersessions"
    return _load(list[Supersession], (yield Call("GET", path)))


def forget_message(conversation: str, message: str, redact: bool) -> Steps[Forgotten]:
    path = f"/v1/conversations/{conversation}/messages/{quote(message, safe='')}"
    call = Call("POST", path + "/redact") if redact else Call("DELETE", path)
    return _load(Forgotten, (yield call))


def delete_fact(conversation: str, fact: str) -> Steps[Forgotten]:
    path = f"/v1/conversations/{conversation}/facts/{quote(fact, safe='')}"
    return _load(Forgotten, (yield Call("DELETE", path)))


def correct_fact(
    conversation: str, fact: str, content: str, turns: Sequence[str]
) -> Steps[Supersession]:
    path = f"/v1/conversations/{conversation}/facts/{quote(fact, safe='')}/correct"
    body = {"content": content, "turns": list(turns)}
    return _load(Supersession, (yield Call("POST", path, body)))


def _query(params: Mapping[str, str]) -> str:
    return "?" + urlencode(params) if params else ""


def _select(records: list[R], ids: Sequence[str]) -> list[R]:
    """The records of ``ids``, in their order (unknown ids skipped), as ``Memory`` gives."""
    by_id = {r.id: r for r in records}
    return [by_id[i] for i in ids if i in by_id]


def audit_memory(conversation: str, sample: int, seed: int) -> Steps[MemoryAudit]:
    body = {"sample": sample, "seed": seed}
    return audit_from_json((yield Call("POST", f"/v1/conversations/{conversation}/audit", body)))
