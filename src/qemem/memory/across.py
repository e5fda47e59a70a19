"""``context`` and ``ask`` across several conversations of a namespace (one user's threads),
the ``Memory`` methods ``context_many`` and ``ask_many``.

Like ``search_many`` (see :mod:`qemem.memory.searching` for why a separate name rather than a
list accepted by ``context``/``ask``), they take at most ``MAX_CONVERSATIONS`` conversation
ids (duplicates ignored, each must exist), rank the records of all of them together, and
name each record's conversation explicitly. How ids that repeat across conversations are
kept apart (labels such as ``conv-26/D1:3`` in the text models read, explicit
``Ref(space, id, conversation)`` in the data): :mod:`qemem.evidence.many` and
:mod:`qemem.answer.across`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from qemem.answer import Answer, AskConfig
from qemem.answer.across import ask_many
from qemem.answer.ask import Mode
from qemem.answer.corpus import ManyConversations
from qemem.embed.base import Embedder
from qemem.errors import InputError
from qemem.evidence.block import Context, context_block
from qemem.llm import LLMClient
from qemem.memory.api import CONTEXT_BUDGET, MAX_CONTEXT_BUDGET, ContextMode, check_query
from qemem.memory.searching import check_conversations
from qemem.retrieve.budgets import whole_order
from qemem.retrieve.plan import plan_question, rule_plan
from qemem.store import MemoryStore, Scope


def check_context(budget_tokens: int, mode: ContextMode) -> None:
    """InputError unless ``budget_tokens`` is 1 to ``MAX_CONTEXT_BUDGET`` and ``mode`` is
    "rule" or "llm"."""
    if isinstance(budget_tokens, bool) or not 1 <= budget_tokens <= MAX_CONTEXT_BUDGET:
        raise InputError(f"budget_tokens must be 1 to {MAX_CONTEXT_BUDGET}")
    if mode not in ("rule", "llm"):
        raise InputError(f"unknown context mode {mode!r}: use 'rule' or 'llm'")


class _Host(Protocol):
    """What the methods need of ``Memory``."""

    store: MemoryStore
    namespace: str

    @property
    def embedder(self) -> Embedder: ...

    @property
    def llm(self) -> LLMClient | None: ...

    def _require_llm(self, what: str, about: Sequence[str] = ()) -> LLMClient: ...

    def _check_embedder(self) -> None: ...


def _scopes(host: _Host, conversations: Sequence[str]) -> dict[str, Scope]:
    return {cid: Scope(cid, host.namespace) for cid in check_conversations(conversations)}


class MemoryAcross:
    """The methods of ``Memory`` that work across conversations of its namespace."""

    def context_many(
        self: _Host,
        conversations: Sequence[str],
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """One evidence block for the caller's own LLM over several conversations (at most
        50; duplicates ignored): their records ranked together as ``search_many`` ranks,
        then cut to ``budget_tokens`` as ``context`` does. The text groups records by
        conversation, then session (``--- conv-26, Session 3 (date)``) and names each by
        ``<conversation>/<id>``; each item's ``ref`` names its conversation and id apart."""
        check_query(question)
        check_context(budget_tokens, mode)
        scopes = _scopes(self, conversations)
        llm = self._require_llm("context mode 'llm'", list(scopes)) if mode == "llm" else None
        self._check_embedder()
        corpus = ManyConversations(self.store, scopes, self.embedder)
        merged = corpus.index.conversation
        plan = (
            rule_plan(question)
            if llm is None
            else plan_question(llm, question, corpus.index.participants, merged.span)
        )
        pool = corpus.pool(plan, whole_order())
        block = context_block(corpus.index, pool, question, budget_tokens)
        return dataclasses.replace(corpus.index.stored_context(block), planner=mode)

    def ask_many(
        self: _Host,
        conversations: Sequence[str],
        question: str,
        *,
        mode: Mode = "full",
        config: AskConfig | None = None,
    ) -> Answer:
        """Answer a question over several conversations (at most 50; duplicates ignored)
        ranked together, with cited, verified evidence; modes as ``ask``. Cards, pool and
        sources name each record's conversation (``Answer.across``: the labels the models
        cited, such as ``conv-26/D1:3``, with their explicit refs)."""
        check_query(question)
        scopes = _scopes(self, conversations)
        self._check_embedder()
        llm = None if mode == "retrieval" else self._require_llm(f"mode {mode!r}", list(scopes))
        return ask_many(self.store, scopes, self.embedder, llm, question, mode=mode, config=config)
