"""Questions to one conversation: hybrid search and the evidence pool, answers, context blocks,
checks of statements against it and the audit of its memory; search, answers and context
blocks across several conversations of the namespace (a user's threads), ranked together."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from qemem.answer import Answer
from qemem.answer.check import CheckResult
from qemem.answer.memory_audit import MemoryAudit
from qemem.answer.wire import answer_to_json, audit_to_json, check_to_json, context_to_json
from qemem.errors import InputError, LLMError
from qemem.evidence.block import Context
from qemem.memory import Memory
from qemem.memory.searching import check_conversations
from qemem.service.auth import Reader
from qemem.service.problems import error_responses
from qemem.service.schemas import (
    MAX_K,
    AskIn,
    AskManyIn,
    AuditIn,
    CheckIn,
    ContextIn,
    ContextManyIn,
    SearchIn,
    SearchManyIn,
    SearchManyOut,
    SearchOut,
)
from qemem.service.state import State, existing_conversation


def search(conversation: str, body: SearchIn, key: Reader, state: State) -> SearchOut:
    """Hybrid search (dense + BM25, RRF) of one space, or with ``pool`` the evidence pool
    over episodes, facts and turns (rule-planned queries, no LLM)."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    queries = [body.query] if isinstance(body.query, str) else body.query
    if not queries or not all(q.strip() for q in queries):
        raise InputError("the query is empty: send the words to look for", field="query")
    if body.pool:
        if len(queries) != 1:
            raise InputError("the pool takes one query (the question)", field="query")
        pool = memory.retrieve(conversation, queries[0], exclude=body.exclude)
        return SearchOut(pool=pool)
    k = MAX_K if body.k is None else body.k  # null: every ranked record, at most MAX_K
    return SearchOut(results=memory.search(conversation, queries, k=k, space=body.space))


def _existing(memory: Memory, conversations: list[str]) -> list[str]:
    """The checked conversation list, each conversation existing (404 otherwise)."""
    checked = check_conversations(conversations)
    for conversation in checked:
        existing_conversation(memory, conversation)
    return checked


def _ask_llm(memory: Memory, mode: str) -> None:
    """503 when ``mode`` needs an LLM and the server has none."""
    if mode != "retrieval" and memory.llm is None:
        raise LLMError(
            f"mode {mode!r} needs an LLM and this server has none: start it with "
            "QEMEM_LLM set (e.g. anthropic:claude-haiku-4-5; fake for an offline trial), or "
            "ask with mode 'retrieval', which needs none"
        )


def _context_llm(memory: Memory, mode: str) -> None:
    """503 when the context ``mode`` needs an LLM and the server has none."""
    if mode == "llm" and memory.llm is None:
        raise LLMError(
            "context mode 'llm' needs an LLM and this server has none: start it with QEMEM_LLM "
            "set, or use mode 'rule', which needs none"
        )


def search_many(body: SearchManyIn, key: Reader, state: State) -> SearchManyOut:
    """Hybrid search (dense + BM25, RRF) of one space across conversations of the namespace
    (a user's threads, at most 50), ranked together: each result names its conversation."""
    memory = state.memory(key.namespace)
    conversations = _existing(memory, body.conversations)
    k = MAX_K if body.k is None else body.k
    results = memory.search_many(conversations, body.query, k=k, space=body.space)
    return SearchManyOut(results=results)


def ask_many(body: AskManyIn, key: Reader, state: State) -> JSONResponse:
    """Answer a question over several conversations of the namespace (at most 50) ranked
    together: cards, pool and sources name each record's conversation (``across``). Every
    mode but ``retrieval`` needs the server's LLM (503 without)."""
    if not body.question.strip():
        raise InputError("the question is empty", field="question")
    memory = state.memory(key.namespace)
    conversations = _existing(memory, body.conversations)  # 404 before 503
    _ask_llm(memory, body.mode)
    answer = memory.ask_many(conversations, body.question, mode=body.mode)
    return JSONResponse(answer_to_json(answer))


def context_many(body: ContextManyIn, key: Reader, state: State) -> JSONResponse:
    """One evidence block over several conversations of the namespace (at most 50), their
    records ranked together and grouped by conversation, then session; each item's ``ref``
    names its conversation. No LLM call in mode ``rule``."""
    memory = state.memory(key.namespace)
    conversations = _existing(memory, body.conversations)
    _context_llm(memory, body.mode)
    block = memory.context_many(
        conversations, body.question, budget_tokens=body.budget_tokens, mode=body.mode
    )
    return JSONResponse(context_to_json(block))


def ask(conversation: str, body: AskIn, key: Reader, state: State) -> JSONResponse:
    """Answer a question with its evidence: text, verified cards, turn citations, the pool
    and the trace. Every mode but ``retrieval`` needs the server's LLM (503 without)."""
    if not body.question.strip():
        raise InputError("the question is empty", field="question")
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)  # 404 before 503
    _ask_llm(memory, body.mode)
    answer = memory.ask(conversation, body.question, mode=body.mode)
    return JSONResponse(answer_to_json(answer))


def check(conversation: str, body: CheckIn, key: Reader, state: State) -> JSONResponse:
    """Check an answer or statement: its claims, each labelled supported, unsupported,
    contradicted or unverifiable, with the turns that support or contradict it and verified
    quotes. Needs the server's LLM (503 without)."""
    if not body.text.strip():
        raise InputError("the text to check is empty: send the statement", field="text")
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)  # 404 before 503
    if memory.llm is None:
        raise LLMError(
            "checking a statement needs an LLM and this server has none: start it with "
            "QEMEM_LLM set (e.g. anthropic:claude-haiku-4-5; fake for an offline trial)"
        )
    return JSONResponse(check_to_json(memory.check(conversation, body.text)))


def audit(conversation: str, body: AuditIn, key: Reader, state: State) -> JSONResponse:
    """Audit the conversation's memory: a stratified sample of its facts and episode
    narratives, each judged by the server's LLM against only the turns its provenance cites
    (supported, partially supported, unsupported, contradicted), population-weighted shares
    with 95% CIs, and the facts with pronouns or dates, near-duplicate pairs and superseded
    facts. One judge call per sampled record; needs the server's LLM (503 without)."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)  # 404 before 503
    if memory.llm is None:
        raise LLMError(
            "auditing the memory needs an LLM and this server has none: start it with "
            "QEMEM_LLM set (e.g. anthropic:claude-sonnet-4-5; fake for an offline trial)"
        )
    result = memory.audit_memory(conversation, sample=body.sample, seed=body.seed)
    return JSONResponse(audit_to_json(result))


def context(conversation: str, body: ContextIn, key: Reader, state: State) -> JSONResponse:
    """A ready-to-paste evidence block for the caller's own LLM, cut to ``budget_tokens``:
    turns grouped by session with dates and citable ids, relative times resolved, episodes and
    facts when the store has them, and the same items as data. No LLM call in mode ``rule``."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    _context_llm(memory, body.mode)
    block = memory.context(
        conversation, body.question, budget_tokens=body.budget_tokens, mode=body.mode
    )
    return JSONResponse(context_to_json(block))


def register(app: FastAPI) -> None:
    """Add these routes to ``app`` (all POST): path, endpoint, error statuses, and the
    response model when the endpoint's annotation does not give it."""
    routes: list[tuple[str, Any, tuple[int, ...], Any]] = [
        ("/v1/conversations/{conversation}/search", search, (404,), None),
        ("/v1/search", search_many, (404,), None),
        ("/v1/conversations/{conversation}/ask", ask, (404, 503), Answer),
        ("/v1/ask", ask_many, (404, 503), Answer),
        ("/v1/context", context_many, (404, 503), Context),
        ("/v1/conversations/{conversation}/context", context, (404, 503), Context),
        ("/v1/conversations/{conversation}/check", check, (404, 503), CheckResult),
        ("/v1/conversations/{conversation}/audit", audit, (404, 503), MemoryAudit),
    ]
    for path, endpoint, statuses, model in routes:
        extra = {} if model is None else {"response_model": model}
        app.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            tags=["query"],
            responses=error_responses(*statuses),
            **extra,
        )
