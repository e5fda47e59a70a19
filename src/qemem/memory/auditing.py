"""``Memory.audit_memory``: the memory audit of one conversation (see
:mod:`qemem.answer.memory_audit`), judged by the memory's LLM or by a judge of its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from qemem.answer.memory_audit import MemoryAudit, audit_memory, check_sample
from qemem.errors import LLMError
from qemem.llm import LLMClient, open_llm
from qemem.store import MemoryStore, Scope

AUDIT_SAMPLE = 60
"""Records an audit judges unless the caller says otherwise."""


class _Host(Protocol):
    store: MemoryStore
    namespace: str

    def _require_llm(self, what: str, about: Sequence[str] = ()) -> LLMClient: ...


class MemoryAudits:
    """The audit method of ``Memory`` (its store, namespace and LLM)."""

    def audit_memory(
        self: _Host,
        conversation: str,
        *,
        sample: int = AUDIT_SAMPLE,
        seed: int = 0,
        judge: LLMClient | str | None = None,
    ) -> MemoryAudit:
        """Judge a stratified sample of ``sample`` facts and episode narratives of the
        conversation against only the turns their provenance cites, with population-weighted
        label shares (95% CIs), and count the facts with pronouns or dates, the near-duplicate
        pairs and the superseded facts. The same ``seed`` draws the same sample. ``judge`` is
        an LLM client or spec (a client given stays open); by default the memory's LLM."""
        check_sample(sample)
        scope = Scope(conversation, self.namespace)
        if judge is None:
            return audit_memory(
                self.store,
                scope,
                self._require_llm("auditing the memory", [conversation]),
                sample=sample,
                seed=seed,
            )
        if isinstance(judge, LLMClient):
            about = judge.about(self.namespace, [conversation])
            return audit_memory(self.store, scope, about, sample=sample, seed=seed)
        client = open_llm(judge)
        if client is None:
            raise LLMError(
                f"the judge spec {judge!r} names no LLM: give e.g. anthropic:claude-sonnet-4-5"
            )
        try:
            about = client.about(self.namespace, [conversation])
            return audit_memory(self.store, scope, about, sample=sample, seed=seed)
        finally:
            client.close()
