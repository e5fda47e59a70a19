"""The HTTP API: a FastAPI app over ``Memory`` (and nothing below it), one namespace per key.

``create_app`` builds it for any ASGI server; ``qemem serve`` runs it with uvicorn.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from qemem import __version__
from qemem.answer import Answer
from qemem.answer.wire import answer_to_json
from qemem.embed.base import Embedder
from qemem.errors import (
    AuthError,
    ConfigError,
    InputError,
    LLMError,
    NotFoundError,
    StoreError,
)
from qemem.keys import ApiKey, KeyStore, KeyVerifier, open_key_store
from qemem.llm import LLMClient
from qemem.memory import Memory
from qemem.models import Conversation
from qemem.service import problems
from qemem.service.jobs import Jobs
from qemem.service.problems import Forbidden
from qemem.service.schemas import (
    Appended,
    AskIn,
    BuildState,
    ConversationOut,
    Health,
    Job,
    MessagesIn,
    Problem,
    SearchIn,
    SearchOut,
)
from qemem.store import MemoryStore, open_store

log = logging.getLogger("qemem.service")

DEFAULT_MAX_BODY = 1_000_000
"""Default request-body limit in bytes (413 above it)."""


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": Problem} for code in (401, 422, *codes)}


def _conversation(memory: Memory, conversation: str) -> Conversation:
    """The caller's conversation, or a 404 that names only what the caller sent."""
    try:
        return memory.conversation(conversation)
    except NotFoundError:
        raise NotFoundError(
            f"no conversation {conversation!r}: appending messages to it creates it"
        ) from None


class Tenants:
    """One ``Memory`` per namespace over a shared store, embedder and LLM."""

    def __init__(self, root: Memory) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._memories: dict[str, Memory] = {}

    def memory(self, namespace: str) -> Memory:
        with self._lock:
            if namespace not in self._memories:
                self._memories[namespace] = Memory(
                    self.root.store, self.root.embedder, llm=self.root.llm, namespace=namespace
                )
            return self._memories[namespace]


_bearer = HTTPBearer(auto_error=False)


def _caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> ApiKey:
    """The caller's key (401 when missing, unknown or revoked; logged without the key)."""
    client = request.client.host if request.client else "?"
    try:
        if credentials is None:
            raise AuthError(
                "missing 'Authorization: Bearer <key>' header: create a key with "
                "`qemem keys create`"
            )
        verify: KeyVerifier = request.app.state.verify
        return verify(credentials.credentials)
    except AuthError as exc:
        log.warning("refused %s %s from %s: %s", request.method, request.url.path, client, exc)
        raise


def _writer(key: Annotated[ApiKey, Depends(_caller)]) -> ApiKey:
    """The caller's key, which must allow writes (403 for a read-only key)."""
    if key.read_only:
        raise Forbidden("this API key is read-only: use a key made without --read-only")
    return key


Reader = Annotated[ApiKey, Depends(_caller)]
Writer = Annotated[ApiKey, Depends(_writer)]


def create_app(
    store: MemoryStore | str | Path,
    *,
    keys: KeyStore | None = None,
    embedder: Embedder | str | None = None,
    llm: LLMClient | str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
) -> FastAPI:
    """The qemem HTTP API over ``store`` (an open store, or a SQLite file path whose API keys
    are used when ``keys`` is None). ``embedder``/``llm`` as for ``Memory``."""
    if keys is None:
        if not isinstance(store, str | Path):
            raise ConfigError("pass keys= (a KeyStore) along with an open store")
        keys = open_key_store(store)
    opened = isinstance(store, str | Path)
    root = Memory(
        open_store(str(store)) if isinstance(store, str | Path) else store, embedder, llm=llm
    )
    _ = root.embedder  # load the model once, before the first request
    tenants = Tenants(root)
    jobs = Jobs()
    key_store = keys

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        jobs.close()
        if opened:
            root.close()
            key_store.close()

    app = FastAPI(
        title="qemem",
        version=__version__,
        description="Long-term conversational memory: append messages, search, and ask "
        "questions answered with cited, verified evidence. Every /v1 route needs "
        "`Authorization: Bearer <key>` (`qemem keys create`); the key decides the namespace.",
        lifespan=lifespan,
    )
    app.add_middleware(problems.BodyLimit, max_bytes=max_body)
    problems.install(app)
    app.state.verify = KeyVerifier(key_store)

    def summary(memory: Memory, conversation: str) -> ConversationOut:
        conv = _conversation(memory, conversation)
        turns = memory.turns(conversation)
        episodes = memory.episodes(conversation)
        built = sorted({e.session for e in episodes})
        return ConversationOut(
            id=conv.id,
            namespace=conv.namespace,
            speakers=list(conv.speakers),
            sessions=list(conv.sessions),
            turns=len(turns),
            episodes=len(episodes),
            facts=len(memory.facts(conversation)),
            build=BuildState(
                built_sessions=built,
                unbuilt_sessions=sorted({t.session for t in turns} - set(built)),
                job=jobs.active(memory.namespace, conversation),
            ),
        )

    @app.get("/healthz", tags=["health"])
    def healthz() -> Health:
        """Liveness: the process answers (no auth)."""
        return Health(status="ok")

    @app.get("/readyz", tags=["health"], responses={503: {"model": Problem}})
    def readyz() -> Health:
        """Readiness: the store answers a query (no auth)."""
        try:
            root.conversations()
        except Exception as exc:  # any failure of the store means not ready
            raise StoreError(f"the store does not answer: {exc}") from exc
        return Health(status="ready")

    @app.get("/v1/conversations", tags=["conversations"], responses=_errors())
    def list_conversations(key: Reader) -> list[ConversationOut]:
        """The caller's conversations with their sessions, counts and build state."""
        memory = tenants.memory(key.namespace)
        return [summary(memory, c.id) for c in memory.conversations()]

    @app.get("/v1/conversations/{conversation}", tags=["conversations"], responses=_errors(404))
    def get_conversation(conversation: str, key: Reader) -> ConversationOut:
        """One conversation: sessions, counts of turns/episodes/facts, build state."""
        return summary(tenants.memory(key.namespace), conversation)

    @app.delete(
        "/v1/conversations/{conversation}",
        tags=["conversations"],
        status_code=204,
        responses=_errors(403, 404),
    )
    def delete_conversation(conversation: str, key: Writer) -> Response:
        """Delete a conversation and everything derived from it."""
        if not tenants.memory(key.namespace).delete(conversation):
            raise NotFoundError(f"no conversation {conversation!r}")
        return Response(status_code=204)

    @app.post(
        "/v1/conversations/{conversation}/messages",
        tags=["conversations"],
        responses=_errors(403, 409),
    )
    def add_messages(conversation: str, body: MessagesIn, key: Writer) -> Appended:
        """Append messages (validated like ingest, all or nothing); creates the conversation.
        A message whose id is stored with the same content is acknowledged, not duplicated."""
        memory = tenants.memory(key.namespace)
        done = memory.add_messages(
            conversation, [m.model_dump(exclude_none=True) for m in body.messages]
        )
        return Appended(
            ids=done.ids, turns_added=done.turns_added, sessions_added=done.sessions_added
        )

    @app.post("/v1/conversations/{conversation}/search", tags=["query"], responses=_errors(404))
    def search(conversation: str, body: SearchIn, key: Reader) -> SearchOut:
        """Hybrid search (dense + BM25, RRF) of one space, or with ``pool`` the evidence pool
        over episodes, facts and turns (rule-planned queries, no LLM)."""
        memory = tenants.memory(key.namespace)
        _conversation(memory, conversation)
        queries = [body.query] if isinstance(body.query, str) else body.query
        if not queries or not all(q.strip() for q in queries):
            raise InputError("the query is empty: send the words to look for", field="query")
        if body.pool:
            if len(queries) != 1:
                raise InputError("the pool takes one query (the question)", field="query")
            pool = memory.retrieve(conversation, queries[0], exclude=body.exclude)
            return SearchOut(pool=pool)
        return SearchOut(results=memory.search(conversation, queries, k=body.k, space=body.space))

    @app.post(
        "/v1/conversations/{conversation}/ask",
        tags=["query"],
        responses=_errors(404, 503),
        response_model=Answer,
    )
    def ask(conversation: str, body: AskIn, key: Reader) -> JSONResponse:
        """Answer a question with its evidence: text, verified cards, turn citations, the pool
        and the trace. Every mode but ``retrieval`` needs the server's LLM (503 without)."""
        if not body.question.strip():
            raise InputError("the question is empty", field="question")
        memory = tenants.memory(key.namespace)
        _conversation(memory, conversation)  # 404 before 503
        answer = memory.ask(conversation, body.question, mode=body.mode)
        return JSONResponse(answer_to_json(answer))

    @app.post(
        "/v1/conversations/{conversation}/build",
        tags=["build"],
        status_code=202,
        responses=_errors(403, 404, 503),
    )
    def build(conversation: str, key: Writer) -> Job:
        """Start building episodes and facts in the background (needs the server's LLM);
        poll ``GET /v1/jobs/{job_id}``. A build already running for it is returned instead."""
        memory = tenants.memory(key.namespace)
        _conversation(memory, conversation)
        if memory.llm is None:
            raise LLMError(
                "building episodes and facts needs an LLM: start the server with QEMEM_LLM set "
                "(e.g. anthropic:claude-haiku-4-5; fake for an offline trial)"
            )
        return jobs.start(
            key.namespace,
            conversation,
            lambda progress: memory.build(conversation, progress=progress),
        )

    @app.get("/v1/jobs/{job_id}", tags=["build"], responses=_errors(404))
    def get_job(job_id: str, key: Reader) -> Job:
        """A build job's status, progress (done/total) and, once done, its reports."""
        job = jobs.get(key.namespace, job_id)
        if job is None:
            raise NotFoundError(f"no job {job_id!r}")
        return job

    schema = app.openapi

    def openapi() -> dict[str, Any]:
        """The generated schema, with error bodies declared as application/problem+json."""
        document = schema()
        for operations in document["paths"].values():
            for operation in operations.values():
                for code, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if code >= "400" and "application/json" in content:
                        content[problems.MEDIA_TYPE] = content.pop("application/json")
        return document

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def app_from_env() -> FastAPI:
    """The app of ``qemem serve`` (uvicorn factory): store from ``QEMEM_STORE``, body limit
    from ``QEMEM_MAX_BODY``; embedder and LLM from ``QEMEM_EMBEDDER`` and ``QEMEM_LLM``."""
    store = os.environ.get("QEMEM_STORE")
    if not store:
        raise ConfigError("set QEMEM_STORE (or pass --store) to the store to serve")
    return create_app(store, max_body=int(os.environ.get("QEMEM_MAX_BODY", DEFAULT_MAX_BODY)))
