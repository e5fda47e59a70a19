"""The operations that question a conversation, or several: search and the evidence pool,
context blocks, answers, checks of statements and the audit of a memory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

from qemem.answer import Answer
from qemem.answer.check import CheckResult
from qemem.answer.memory_audit import MemoryAudit
from qemem.answer.wire import (
    answer_from_json,
    answer_to_json,
    audit_from_json,
    audit_to_json,
    check_from_json,
    check_to_json,
    context_from_json,
    context_to_json,
)
from qemem.evidence.block import Context
from qemem.memory import SearchResult
from qemem.models import Pool
from qemem.operations.schemas import (
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
from qemem.operations.spec import LLMNeed, Operation, Route

_RESULTS = TypeAdapter(list[SearchResult])
_POOL = TypeAdapter(Pool)
_CONVERSATION = "/v1/conversations/{conversation}"


def _ask_mode(args: Mapping[str, Any]) -> str | None:
    mode = args.get("mode", "full")
    return None if mode == "retrieval" else f"mode {mode!r}"


def _context_mode(args: Mapping[str, Any]) -> str | None:
    return "context mode 'llm'" if args.get("mode") == "llm" else None


ASK_LLM = LLMNeed(_ask_mode, otherwise="ask with mode 'retrieval', which needs none")
CONTEXT_LLM = LLMNeed(_context_mode, otherwise="use mode 'rule', which needs none")

SEARCH = (
    Operation(
        "search",
        "read",
        Route(
            "POST",
            f"{_CONVERSATION}/search",
            "search",
            """
    Hybrid search (dense + BM25, RRF) of one space, or with ``pool`` the evidence pool
    over episodes, facts and turns (rule-planned queries, no LLM).""",
            "query",
            (404,),
            body=SearchIn,
            response=SearchOut,
        ),
        tool="recall",
        tool_doc="Look up what was said: returns the most relevant stored memories (original "
        "turns with ids, dates and speakers; with pool=true also episode summaries and facts) "
        "for a query, without composing an answer. Use it to see the raw evidence yourself.",
        cli="search",
        decode=lambda out: _RESULTS.validate_python(out["results"]),
    ),
    Operation(
        "retrieve",
        "read",
        via="search",
        fixed={"pool": True},
        rename={"question": "query"},
        tool="recall",
        cli="search",
        decode=lambda out: _POOL.validate_python(out["pool"]),
    ),
    Operation(
        "search_many",
        "read",
        Route(
            "POST",
            "/v1/search",
            "search_many",
            """
    Hybrid search (dense + BM25, RRF) of one space across conversations of the namespace
    (a user's threads, at most 50), ranked together: each result names its conversation.""",
            "query",
            (404,),
            body=SearchManyIn,
            response=SearchManyOut,
        ),
        tool="recall_across",
        tool_doc="Look up what was said across several conversations of the user (their "
        "threads, at most 50): returns the most relevant original turns of all of them, ranked "
        "together, each naming its conversation, for a query. Use it when you do not know "
        "which conversation holds the answer.",
        cli="search",
        encode=lambda results: {"results": _RESULTS.dump_python(results, mode="json")},
        decode=lambda out: _RESULTS.validate_python(out["results"]),
    ),
)

ANSWERS = (
    Operation(
        "ask",
        "read",
        Route(
            "POST",
            f"{_CONVERSATION}/ask",
            "ask",
            """
    Answer a question with its evidence: text, verified cards, turn citations, the pool
    and the trace. Every mode but ``retrieval`` needs the server's LLM (503 without).""",
            "query",
            (404, 503),
            body=AskIn,
            response=Answer,
        ),
        tool="ask",
        tool_doc="Answer a question about a stored conversation, with the evidence: claims "
        "with verbatim quotes checked against the original turns, resolved dates and the cited "
        "turn ids. Prefer it over recall for questions about when, how often or what happened. "
        "mode 'respond' replies to a request as the assistant would (following the user's "
        "standing instructions and preferences, at the length it needs, with citations); "
        "mode 'retrieval' needs no LLM and returns the evidence only; the other modes need "
        "the server's LLM.",
        cli="ask",
        llm=ASK_LLM,
        encode=answer_to_json,
        decode=answer_from_json,
    ),
    Operation(
        "ask_many",
        "read",
        Route(
            "POST",
            "/v1/ask",
            "ask_many",
            """
    Answer a question over several conversations of the namespace (at most 50) ranked
    together: cards, pool and sources name each record's conversation (``across``). Every
    mode but ``retrieval`` needs the server's LLM (503 without).""",
            "query",
            (404, 503),
            body=AskManyIn,
            response=Answer,
        ),
        tool="ask_across",
        tool_doc="Answer a question from several conversations of the user (their threads, "
        "at most 50) ranked together, with the evidence: claims with verbatim quotes checked "
        "against the original turns of the conversation each cites, resolved dates, and for "
        "each claim the conversation and id of its sources. mode 'retrieval' needs no LLM and "
        "returns the evidence only; the other modes need the server's LLM.",
        cli="ask",
        llm=ASK_LLM,
        encode=answer_to_json,
        decode=answer_from_json,
    ),
    Operation(
        "context",
        "read",
        Route(
            "POST",
            f"{_CONVERSATION}/context",
            "context",
            """
    A ready-to-paste evidence block for the caller's own LLM, cut to ``budget_tokens``:
    turns grouped by session with dates and citable ids, relative times resolved, episodes and
    facts when the store has them, and the same items as data. No LLM call in mode ``rule``.""",
            "query",
            (404, 503),
            body=ContextIn,
            response=Context,
        ),
        tool="context",
        tool_doc="Get a ready-to-paste evidence block for a question, for you to answer from "
        "yourself: the relevant turns grouped by session with their dates and citable ids, "
        "relative times resolved in [brackets], episode summaries and facts when built, cut to "
        "budget_tokens. Makes no LLM call. Cite the ids in brackets when you answer.",
        cli="context",
        llm=CONTEXT_LLM,
        encode=context_to_json,
        decode=context_from_json,
    ),
    Operation(
        "context_many",
        "read",
        Route(
            "POST",
            "/v1/context",
            "context_many",
            """
    One evidence block over several conversations of the namespace (at most 50), their
    records ranked together and grouped by conversation, then session; each item's ``ref``
    names its conversation. No LLM call in mode ``rule``.""",
            "query",
            (404, 503),
            body=ContextManyIn,
            response=Context,
        ),
        tool="context_across",
        tool_doc="Get one ready-to-paste evidence block for a question from several "
        "conversations of the user (their threads, at most 50), ranked together: turns grouped "
        "by conversation and session with dates, each id written conversation/id (e.g. "
        "conv-26/D1:3), relative times resolved, cut to budget_tokens. Makes no LLM call. Use "
        "it when you do not know which conversation holds the answer; cite the ids in brackets.",
        cli="context",
        llm=CONTEXT_LLM,
        encode=context_to_json,
        decode=context_from_json,
    ),
    Operation(
        "check",
        "read",
        Route(
            "POST",
            f"{_CONVERSATION}/check",
            "check",
            """
    Check an answer or statement: its claims, each labelled supported, unsupported,
    contradicted or unverifiable, with the turns that support or contradict it and verified
    quotes. Needs the server's LLM (503 without).""",
            "query",
            (404, 503),
            body=CheckIn,
            response=CheckResult,
        ),
        tool="check",
        tool_doc="Check an answer or statement (for example one you wrote, or a fact you "
        "extracted) against what was actually said: returns its claims, each labelled "
        "supported, unsupported, contradicted or unverifiable, with the turn ids that support "
        "or contradict it and quotes verified against those turns. Needs the server's LLM.",
        cli="check",
        llm=LLMNeed("checking a statement"),
        encode=check_to_json,
        decode=check_from_json,
    ),
    Operation(
        "audit_memory",
        "read",
        Route(
            "POST",
            f"{_CONVERSATION}/audit",
            "audit",
            """
    Audit the conversation's memory: a stratified sample of its facts and episode
    narratives, each judged by the server's LLM against only the turns its provenance cites
    (supported, partially supported, unsupported, contradicted), population-weighted shares
    with 95% CIs, and the facts with pronouns or dates, near-duplicate pairs and superseded
    facts. One judge call per sampled record; needs the server's LLM (503 without).""",
            "query",
            (404, 503),
            body=AuditIn,
            response=MemoryAudit,
        ),
        cli="eval audit memory",
        llm=LLMNeed("auditing the memory", example="anthropic:claude-sonnet-4-5"),
        encode=audit_to_json,
        decode=audit_from_json,
    ),
)
