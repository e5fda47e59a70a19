"""``build_memory``: episodes and semantic facts for the turns of a conversation not yet
covered by an episode, incrementally, resumably and with the configured number of LLM calls in
flight.

Per session, the segmentation is kept in the store's state (``build.segments.<session>``) so a
resumed build reuses it; each episode is committed with its facts and its origin (which LLM
built it, what degraded) in one transaction, so an interrupted build loses at most the episodes
in flight. Segmentations, narratives and fact extractions all run in parallel: episode ``E<n>``
is extracted against the facts of episodes up to ``n - snapshot_lag`` (its snapshot point), and
results merge in episode order through the de-duplication, so the store depends on the input
and the model's answers, never on timing or concurrency.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

from qemem.build.config import BuildConfig, BuildReport, Fallback, tally_steps
from qemem.build.corrections import corrected_again, touching
from qemem.build.episodes import write_episode
from qemem.build.factpool import FactPool, episode_number
from qemem.build.facts import Extracted, extract_facts
from qemem.build.origin import (
    SEGMENTS_KEY,
    Origin,
    builder_id,
    forget,
    origin_of,
    record_origin,
    stale_episodes,
)
from qemem.build.segment import segment_turns
from qemem.embed.base import Embedder
from qemem.embed.documents import document_text, embed_documents
from qemem.errors import ConversationChangedError, ConversationGoneError
from qemem.llm.client import LLMClient
from qemem.llm.ledger import Ledger
from qemem.models import Correction, Episode, Supersession, Turn, search_text, unredacted
from qemem.participants import Participants
from qemem.retrieve.bm25 import tokenize
from qemem.store.base import MemoryStore, Scope

Progress = Callable[[int, int], None]
CPU = threading.Lock()
"""Taken by a build's merging thread for its CPU work (embedding, search, store writes), so
that concurrent builds of several conversations take turns there (the stemmer and some
embedders are not thread-safe) while their LLM calls overlap."""


def next_number(store: MemoryStore, scope: Scope, prefix: str) -> int:
    """The number of the next new id ``<prefix><n>`` of the scope's conversation: one more
    than its id counter (:meth:`~qemem.store.base.MemoryStore.counters`), so never the number
    of an id it had before, deleted or not."""
    return store.counters(scope).get(prefix, 0) + 1


def _segments(
    store: MemoryStore,
    scope: Scope,
    llm: LLMClient,
    turns: list[Turn],
    participants: Participants,
    config: BuildConfig,
    ledger: Ledger,
) -> tuple[list[list[Turn]], list[str], int]:
    """The episodes' turn groups of one session's pending turns, the reasons its batches fell
    back to windows and how many greeting/closing runs merged: the stored segmentation when it
    covers exactly these turns (nothing merged then), else a new one (then stored)."""
    key = SEGMENTS_KEY.format(session=turns[0].session)
    by_id = {t.id: t for t in turns}
    saved = store.get_state(scope, key)
    if saved:
        state = json.loads(saved)
        groups = [g for g in state["groups"] if all(i in by_id for i in g)]
        if sorted(i for g in groups for i in g) == sorted(by_id):
            return (
                [[by_id[i] for i in g] for g in groups],
                list(state.get("fallbacks", [])),
                0,
            )
    indices, fallbacks, merged = segment_turns(
        llm, turns, participants.speakers, config, ledger, participants
    )
    groups = [[turns[i].id for i in group] for group in indices]
    store.set_state(scope, key, json.dumps({"groups": groups, "fallbacks": fallbacks}))
    return [[by_id[i] for i in g] for g in groups], fallbacks, merged


def _pending(episodes: Sequence[Episode], turns: Sequence[Turn]) -> dict[int, list[Turn]]:
    """The turns in no episode, per session, in order."""
    covered = {tid for e in episodes for tid in e.turn_ids}
    pending: dict[int, list[Turn]] = {}
    for turn in turns:
        if turn.id not in covered:
            pending.setdefault(turn.session, []).append(turn)
    return pending


def _extended(
    store: MemoryStore,
    scope: Scope,
    episodes: Sequence[Episode],
    turns: Sequence[Turn],
    pending: dict[int, list[Turn]],
    rebuilt: set[str],
    builder: str,
) -> list[Episode]:
    """The last episode (by first turn) of each built session that turns were appended to
    since, when ``builder`` built it: it is segmented again together with them. Turns pending
    because a build was interrupted (they are in the session's stored segmentation) or because
    their episode is built again (``rebuilt``) are no new material; while turns of the stored
    segmentation wait (a build stopped, maybe after removing that last episode), the new ones
    join them instead."""
    position = {t.id: t.position for t in turns}
    out = []
    for session, waiting in pending.items():
        saved = store.get_state(scope, SEGMENTS_KEY.format(session=session))
        segmented = {i for g in json.loads(saved)["groups"] for i in g} if saved else set()
        fresh = [position[t.id] for t in waiting if t.id not in segmented | rebuilt]
        mine = [e for e in episodes if e.session == session]
        if not fresh or not mine or any(t.id in segmented - rebuilt for t in waiting):
            continue
        last = max(mine, key=lambda e: min(position[t] for t in e.turn_ids))
        origin = origin_of(store, scope, last.id)
        ours = origin is not None and origin.llm == builder  # an imported one stays as it is
        if ours and max(position[t] for t in last.turn_ids) < min(fresh):
            out.append(last)
    return out


def _to_build(
    store: MemoryStore, scope: Scope, builder: str, rebuild: bool
) -> dict[int, list[Turn]]:
    """Remove the episodes to build again (degraded ones, with ``rebuild`` other LLMs' ones,
    and the last one of each session with appended turns); return the turns to build, per
    session (never a redacted one: it has nothing to build from)."""
    stale = stale_episodes(store, scope, builder, other_models=rebuild)
    forget(store, scope, stale, builder)
    turns = store.turns(scope)
    episodes = store.episodes(scope)
    rebuilt = {t for e in stale for t in e.turn_ids}
    material = unredacted(turns)
    extended = _extended(
        store, scope, episodes, turns, _pending(episodes, material), rebuilt, builder
    )
    if extended:
        forget(store, scope, extended, builder)
        episodes = store.episodes(scope)
    return _pending(episodes, material)


def build_memory(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    llm: LLMClient,
    *,
    concurrency: int = 4,
    progress: Progress | None = None,
    config: BuildConfig | None = None,
    rebuild: bool = False,
) -> BuildReport:
    """Build episodes and facts for every turn of ``scope`` not yet in an episode.

    Degraded episodes of earlier builds are removed first and built again, and with
    ``rebuild`` so is every episode another LLM built (imported and unrecorded ones too).
    Episode ids ``E<n>`` and fact ids ``S<n>`` continue the conversation's id counters (an id
    is never given twice, not after its record was deleted either). The build is pinned to
    the conversation's life it starts in (:meth:`~qemem.store.base.MemoryStore.pin`): once
    the conversation is deleted, or a message or fact of it removed by hand, it writes nothing
    more and raises ``ConversationGoneError`` / ``ConversationChangedError``, and the LLM
    cache forgets its exchanges about the conversation (the calls it made since may quote the
    removed text). ``progress`` is
    called with (turns done, turns pending). Running it again when nothing is pending or
    degraded makes no LLM call. A failed segmentation call falls back to windows, a failed
    narrative to a plain account of the turns, a failed fact extraction to no facts; each is
    reported and recorded with the episode, so the next build retries it.
    """
    config = config or BuildConfig()
    started = time.perf_counter()
    builder = builder_id(llm)
    scope = store.pin(scope)
    pending = _to_build(store, scope, builder, rebuild)
    ledger = Ledger()
    conversation = store.get_conversation(scope)
    report = BuildReport(
        scope.conversation,
        sessions=sorted(pending),
        messages=sum(len(turns) for turns in pending.values()),
        calibrate_rule=config.calibrate_rule,
        rules=config.rules(),
    )
    if not pending:
        report.seconds = time.perf_counter() - started
        return report
    with CPU:
        facts = FactPool.load(store, scope, embedder.dim)
    run = _Run(
        store,
        scope,
        embedder,
        llm,
        config,
        ledger,
        report,
        facts,
        builder,
        next_number(store, scope, "E"),
        next_number(store, scope, "S"),
    )
    run.speakers = conversation.speakers
    run.corrections = store.corrections(scope)
    corrected = store.facts(scope, [c.fact for c in run.corrections])
    run.corrected = {f.id: f.content for f in corrected}
    every = unredacted(store.turns(scope))
    run.participants = Participants.of(conversation.speakers, every)
    for turn in every:
        run.sessions.setdefault(turn.session, []).append(turn)
    run.dates = {s.index: s.date_time for s in conversation.sessions}
    workers = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="qemem-build")
    fenced = False
    try:
        run.execute(workers, pending, progress)
    except (ConversationGoneError, ConversationChangedError):
        fenced = True
        raise
    finally:
        workers.shutdown(wait=True, cancel_futures=True)
        if fenced:  # its calls since the removal may quote what was removed: no cache keeps them
            llm.forget()
        report.llm = tally_steps(ledger)
        report.seconds = time.perf_counter() - started
    return report


_Narrative = Future[tuple[str, str, str | None]]
_Facts = Future[Extracted]


class _Run:
    """One build: the pipeline of calls and the in-order merge of their results."""

    def __init__(
        self,
        store: MemoryStore,
        scope: Scope,
        embedder: Embedder,
        llm: LLMClient,
        config: BuildConfig,
        ledger: Ledger,
        report: BuildReport,
        facts: FactPool,
        builder: str,
        next_episode: int,
        next_fact: int,
    ) -> None:
        self.store, self.scope, self.embedder, self.llm = store, scope, embedder, llm
        self.config, self.ledger, self.report = config, ledger, report
        self.facts, self.builder = facts, builder
        self.next_episode, self.next_fact = next_episode, next_fact
        self.speakers: Sequence[str] = ()
        self.participants = Participants(())
        """Who takes part, with their roles (the prompts name them)."""
        self.dates: dict[int, datetime] = {}
        self.sessions: dict[int, list[Turn]] = {}
        """Every stored turn of each session, in order (the context shown before episodes)."""
        self.corrections: list[Correction] = []
        self.corrected: dict[str, str] = {}
        """The texts of the facts written by hand (``corrections``), current or not."""

    def before(self, group: Sequence[Turn]) -> list[Turn]:
        """The ``config.context_turns`` turns of the session just before ``group``."""
        count = self.config.context_turns
        session = self.sessions.get(group[0].session, [])
        ids = [t.id for t in session]
        if count <= 0 or group[0].id not in ids:
            return []
        start = ids.index(group[0].id)
        return session[max(0, start - count) : start]

    def _segment(
        self, workers: ThreadPoolExecutor, turns: list[Turn]
    ) -> tuple[list[list[Turn]], list[str], int, list[_Narrative]]:
        """Segment one session's turns, then request the narratives of its episodes at once."""
        groups, fallbacks, merged = _segments(
            self.store, self.scope, self.llm, turns, self.participants, self.config, self.ledger
        )
        session = turns[0].session
        calls = [
            workers.submit(
                write_episode,
                self.llm,
                group,
                self.speakers,
                _when(self.dates, session, group),
                self.config,
                self.ledger,
                self.before(group),
                self.participants,
            )
            for group in groups
        ]
        return groups, fallbacks, merged, calls

    def _planned(
        self, workers: ThreadPoolExecutor, pending: dict[int, list[Turn]]
    ) -> Iterator[tuple[int, list[Turn], _Narrative, list[str]]]:
        """(session, turns, narrative call, segmentation fallbacks) of every episode in order;
        every session is segmented at once and its narratives requested as soon as it is."""
        segmentations = {
            session: workers.submit(self._segment, workers, turns)
            for session, turns in pending.items()
        }
        for session in sorted(pending):
            groups, fallbacks, merged, calls = segmentations[session].result()
            self.report.fallbacks += [Fallback(session, reason) for reason in fallbacks]
            self.report.runs_merged += merged
            yield from ((session, g, c, fallbacks) for g, c in zip(groups, calls, strict=True))

    def _request_facts(
        self,
        workers: ThreadPoolExecutor,
        item: tuple[int, list[Turn], _Narrative, list[str]],
        lag: int,
    ) -> tuple[Episode, list[Turn], _Facts, list[str]]:
        """The next episode (from its narrative call), its turns, its fact extraction call
        against the facts at its snapshot point (and the current corrections of its turns),
        and what degraded so far."""
        session, group, narrative, fallbacks = item
        title, content, why = narrative.result()
        episode = Episode(
            f"E{self.next_episode}",
            self.scope.conversation,
            session,
            title,
            content,
            _when(self.dates, session, group),
            tuple(t.id for t in group),
        )
        self.next_episode += 1
        reasons = [f"segmentation fell back to windows ({r})" for r in fallbacks]
        if why:
            reasons.append(f"narrative built from the turns ({why})")
        with CPU:
            known = self.facts.related(
                self.embedder.embed([document_text(search_text(episode))], query=True)[0],
                tokenize(search_text(episode)),
                self.config.related_facts,
                episode_number(episode.id) - lag,
            )
        shown = {f.id for f in known}
        for fix in touching(self.corrections, episode.turn_ids):
            if fix.fact in self.facts.rows and fix.fact not in shown:  # current, not shown
                known.append(self.facts.facts[self.facts.rows[fix.fact]])
        call = workers.submit(
            extract_facts,
            self.llm,
            episode,
            group,
            known,
            self.speakers,
            self.config,
            self.ledger,
            self.before(group),
            self.participants,
        )
        return episode, group, call, reasons

    def execute(
        self,
        workers: ThreadPoolExecutor,
        pending: dict[int, list[Turn]],
        progress: Progress | None,
    ) -> None:
        """Keep ``snapshot_lag`` fact extractions requested ahead of the merge, merging each
        episode's result in order."""
        lag = max(1, self.config.snapshot_lag)
        planned = self._planned(workers, pending)
        queue: deque[tuple[Episode, list[Turn], _Facts, list[str]]] = deque()
        total = sum(len(turns) for turns in pending.values())
        done = 0

        def fill() -> None:
            while len(queue) < lag:
                item = next(planned, None)
                if item is None:
                    return
                queue.append(self._request_facts(workers, item, lag))

        fill()
        while queue:
            episode, group, call, reasons = queue.popleft()
            extracted = call.result()
            if extracted.degraded:
                reasons.append(f"no facts extracted ({extracted.degraded})")
            self.report.facts_rewritten += extracted.rewritten
            self.report.facts_refused += extracted.refused
            self.report.facts_contradicted += extracted.contradictions
            self.report.degraded += [
                f"{episode.id}: {r}" for r in reasons if not r.startswith("segmentation")
            ]
            with CPU:
                self._commit(episode, extracted, Origin(self.builder, tuple(reasons)))
            done += len(group)
            if progress:
                progress(done, total)
            fill()

    def _commit(self, episode: Episode, extracted: Extracted, origin: Origin) -> None:
        """Store ``episode``, its merged facts, the supersessions its new facts claim (of
        facts still current) or that corrections make of them (:mod:`~qemem.build.corrections`)
        and its origin in one transaction."""
        texts, claims = extracted.facts, extracted.claims
        vectors = embed_documents(self.embedder, texts)
        merge = self.facts.merge(
            episode,
            texts,
            vectors,
            self.config.dedup_threshold,
            self.next_fact,
            self.config.paraphrase_cosine,
            self.speakers,
            extracted.kinds,
        )
        now = datetime.now(UTC)
        corrected = corrected_again(
            merge.new,
            episode.turn_ids,
            self.corrections,
            self.corrected,
            claims,
            self.speakers,
            episode.timestamp,
            now,
        )
        again = {s.old for s in corrected}
        replaced: list[Supersession] = []
        for fact in merge.new:
            old, turns = claims.get(fact.content, ("", ()))
            fresh = fact.id not in again and old not in {s.old for s in replaced}
            if fresh and old in self.facts.rows:
                replaced.append(Supersession(old, fact.id, turns, episode.timestamp, "build", now))
        episode_vector = embed_documents(self.embedder, [search_text(episode)])
        store, scope, embedder = self.store, self.scope, self.embedder.id
        with store.transaction():
            store.add_episodes(scope, [episode], episode_vector, embedder)
            if merge.new:
                store.put_facts(scope, merge.new, merge.new_vectors, embedder)
            if merge.changed:
                store.put_facts(scope, merge.changed, merge.changed_vectors, embedder)
            if replaced or corrected:
                store.put_supersessions(scope, replaced + corrected)
            record_origin(store, scope, episode.id, origin)
        self.facts.retire([s.old for s in replaced + corrected])
        self.next_fact += len(merge.new)
        self.report.facts_superseded += len(replaced)
        self.report.facts_corrected += len(corrected)
        self.report.episodes += 1
        self.report.facts_added += len(merge.new)
        self.report.facts_merged += merge.merged


def _when(dates: dict[int, datetime], session: int, group: Sequence[Turn]) -> datetime:
    return dates.get(session, group[0].timestamp)
