"""``RemoteMemory``: the ``Memory`` API over a qemem server (``qemem serve``), on httpx.

Switching from embedded to served memory is one line::

    memory = Memory.open("memory.db")                       # embedded
    memory = RemoteMemory("http://127.0.0.1:8765", api_key)  # served

The methods return the same types as ``Memory`` and raise the same ``QememError`` subclasses
(from the server's problem details). The namespace is the API key's.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from qemem.answer import Answer
from qemem.answer.ask import Mode
from qemem.answer.wire import answer_from_json
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
from qemem.ingest.reader import Format, read_conversations
from qemem.memory.api import (
    IDEMPOTENCY_HEADER,
    Appended,
    MemoryAPI,
    Progress,
    SearchResult,
    check_idempotency_key,
)
from qemem.memory.jobs import Job
from qemem.models import Conversation, ConversationInput, Pool, Ref, Session, Space

T = TypeVar("T")

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


class RemoteMemory(MemoryAPI):
    """A qemem server seen through the ``Memory`` API."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 120.0,
        client: httpx.Client | None = None,
        poll_seconds: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.Client(base_url=self.base_url, timeout=timeout)
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self.poll_seconds = poll_seconds

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self, method: str, path: str, body: object = None, headers: Mapping[str, str] = {}
    ) -> Any:
        try:
            response = self._client.request(
                method, path, json=body, headers={**self._headers, **headers}
            )
        except httpx.TransportError as exc:
            raise QememError(
                f"cannot reach the qemem server at {self.base_url}: {exc} (is `qemem serve` "
                "running there?)"
            ) from exc
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

    # ------------------------------------------------------------------ writing
    def add_messages(
        self,
        conversation: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Appended:
        """As ``Memory.add_messages``: append generic-format messages, retry-safe by id, or
        by ``idempotency_key`` (sent as the ``Idempotency-Key`` header) for id-less ones."""
        headers = {}
        if idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = check_idempotency_key(idempotency_key)
        out = self._call(
            "POST",
            f"/v1/conversations/{conversation}/messages",
            {"messages": list(messages)},
            headers,
        )
        return Appended(out["ids"], out["turns_added"], out["sessions_added"])

    def ingest(
        self,
        source: str | Path | Sequence[ConversationInput],
        *,
        fmt: Format = "auto",
        progress: Progress | None = None,
    ) -> IngestReport:
        """As ``Memory.ingest``, parsed here and sent as messages; id-less messages get the ids
        an embedded ingest gives them (``D<session>:<n>``), so ingesting twice adds nothing.
        The key decides the namespace (a file's namespaces are ignored)."""
        started = time.perf_counter()
        conversations = (
            read_conversations(source, fmt) if isinstance(source, str | Path) else list(source)
        )
        messages = {
            conv.id: [
                {
                    "session_id": session.key,
                    "timestamp": turn.timestamp.isoformat(),
                    "speaker": turn.speaker,
                    "text": turn.text,
                    "id": turn.id or f"D{session.index}:{position + 1}",
                }
                for session in conv.sessions
                for position, turn in enumerate(session.turns)
            ]
            for conv in conversations
        }
        total, done = sum(map(len, messages.values())), 0
        report = IngestReport()
        for cid, batch in messages.items():
            sessions = turns = 0
            for start in range(0, len(batch), BATCH):
                appended = self.add_messages(cid, batch[start : start + BATCH])
                sessions, turns = sessions + appended.sessions_added, turns + appended.turns_added
                done += len(appended.ids)
                if progress:
                    progress(done, total)
            report.added[cid] = (sessions, turns)
        report.seconds = time.perf_counter() - started
        return report

    def delete(self, conversation: str) -> bool:
        """Delete a conversation and everything derived from it; False if it was absent."""
        try:
            self._call("DELETE", f"/v1/conversations/{conversation}")
        except NotFoundError:
            return False
        return True

    def build(
        self, conversation: str | None = None, *, progress: Progress | None = None
    ) -> list[BuildReport]:
        """As ``Memory.build`` (the server's LLM): starts a job per conversation and waits."""
        targets = [conversation] if conversation else [c.id for c in self.conversations()]
        reports: list[BuildReport] = []
        for cid in targets:
            job = self.enqueue_build(cid)
            while job.status in ("queued", "running"):
                time.sleep(self.poll_seconds)
                job = self.job(job.id)
                if progress and job.total:
                    progress(job.done, job.total)
            if job.status != "done":
                raise QememError(f"the build of {cid} {job.status} on the server: {job.error}")
            reports.extend(job.reports)
        return reports

    # ------------------------------------------------------------------ jobs
    def enqueue_build(self, conversation: str) -> Job:
        """As ``Memory.enqueue_build``: a background build that the server's workers run."""
        return _job(self._call("POST", f"/v1/conversations/{conversation}/build"))

    def job(self, job_id: str) -> Job:
        return _job(self._call("GET", f"/v1/jobs/{job_id}"))

    def jobs(self, status: str | None = None) -> list[Job]:
        query = f"?status={quote(status)}" if status is not None else ""
        return [_job(j) for j in self._call("GET", f"/v1/jobs{query}")]

    def cancel_job(self, job_id: str) -> Job:
        return _job(self._call("DELETE", f"/v1/jobs/{job_id}"))

    # ------------------------------------------------------------------ reading
    def conversations(self) -> list[Conversation]:
        return [_conversation(c) for c in self._call("GET", "/v1/conversations")]

    def conversation(self, conversation: str) -> Conversation:
        return _conversation(self._call("GET", f"/v1/conversations/{conversation}"))

    def search(
        self,
        conversation: str,
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """As ``Memory.search``: hybrid search of one space."""
        body = {"query": query if isinstance(query, str) else list(query), "k": k, "space": space}
        out = self._call("POST", f"/v1/conversations/{conversation}/search", body)
        return _load(list[SearchResult], out["results"])

    def retrieve(self, conversation: str, question: str, *, exclude: Collection[Ref] = ()) -> Pool:
        """As ``Memory.retrieve`` with the rule plan: the multi-granular evidence pool."""
        refs = _REFS.dump_python(list(exclude), mode="json")
        body = {"query": question, "pool": True, "exclude": refs}
        out = self._call("POST", f"/v1/conversations/{conversation}/search", body)
        return _load(Pool, out["pool"])

    def ask(self, conversation: str, question: str, *, mode: Mode = "full") -> Answer:
        """As ``Memory.ask`` (the server's LLM and settings)."""
        body = {"question": question, "mode": mode}
        return answer_from_json(self._call("POST", f"/v1/conversations/{conversation}/ask", body))


def _job(data: Mapping[str, Any]) -> Job:
    known = {f.name for f in fields(Job)}
    reports: list[BuildReport] = _load(list[BuildReport], data["reports"])
    return Job(**{k: v for k, v in data.items() if k in known} | {"reports": reports})


def _conversation(data: Mapping[str, Any]) -> Conversation:
    return Conversation(
        data["id"],
        tuple(data["speakers"]),
        tuple(_SESSIONS.validate_python(data["sessions"])),
        data["namespace"],
    )
