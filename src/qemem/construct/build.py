"""``build_memory``: episodes and semantic facts for the turns of a conversation not yet
covered by an episode, incrementally and resumably.

Per session, the segmentation is kept in the store's state (``build.segments.<session>``) so a
resumed build reuses it; each episode is committed with its facts in one transaction, so an
interrupted build loses at most the episode in flight. Segmentations of all pending sessions
and episode narratives run in parallel; fact extraction runs in order, since each episode's
facts depend on those before it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime

import numpy as np

from qemem.construct.config import BuildConfig, BuildReport, Fallback, tally_steps
from qemem.construct.episodes import write_episode
from qemem.construct.facts import extract_facts, find_duplicate, related_facts
from qemem.construct.segment import segment_turns
from qemem.embed.base import Embedder
from qemem.llm.client import LLMClient
from qemem.llm.ledger import Ledger
from qemem.models import Episode, SemanticFact, Turn, document
from qemem.store.base import MemoryStore, Scope

Progress = Callable[[int, int], None]
STATE_KEY = "build.segments.{session}"


def next_number(ids: Sequence[str], prefix: str) -> int:
    """One more than the largest ``<prefix><n>`` id among ``ids`` (1 when there is none)."""
    numbers = [int(m[1]) for i in ids if (m := re.fullmatch(rf"{prefix}(\d+)", i))]
    return max(numbers, default=0) + 1


def _segments(
    store: MemoryStore,
    scope: Scope,
    llm: LLMClient,
    turns: list[Turn],
    speakers: Sequence[str],
    config: BuildConfig,
    ledger: Ledger,
) -> tuple[list[list[Turn]], list[str]]:
    """The episodes' turn groups of one session's pending turns: the stored segmentation when
    it covers exactly these turns, else a new one (then stored)."""
    key = STATE_KEY.format(session=turns[0].session)
    by_id = {t.id: t for t in turns}
    saved = store.get_state(scope, key)
    if saved is not None:
        groups = [g for g in json.loads(saved)["groups"] if all(i in by_id for i in g)]
        if sorted(i for g in groups for i in g) == sorted(by_id):
            return [[by_id[i] for i in g] for g in groups], []
    indices, fallbacks = segment_turns(llm, turns, speakers, config, ledger)
    groups = [[turns[i].id for i in group] for group in indices]
    store.set_state(scope, key, json.dumps({"groups": groups, "fallbacks": fallbacks}))
    return [[by_id[i] for i in g] for g in groups], fallbacks


def build_memory(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    llm: LLMClient,
    *,
    concurrency: int = 4,
    progress: Progress | None = None,
    config: BuildConfig | None = None,
) -> BuildReport:
    """Build episodes and facts for every turn of ``scope`` not yet in an episode.

    Sessions are processed in order (earlier facts are the known facts of later episodes);
    episode ids ``E<n>`` and fact ids ``S<n>`` continue the stored numbering. ``progress`` is
    called with (turns done, turns pending). Running it again when nothing is pending makes
    no LLM call. A failed segmentation call falls back to windows, a failed narrative to a
    plain account of the turns, a failed fact extraction to no facts; each is reported.
    """
    config = config or BuildConfig()
    started = time.perf_counter()
    ledger = Ledger()
    conversation = store.get_conversation(scope)
    dates = {s.index: s.date_time for s in conversation.sessions}
    speakers = conversation.speakers
    episodes = store.episodes(scope)
    covered = {tid for e in episodes for tid in e.turn_ids}
    pending: dict[int, list[Turn]] = {}
    for turn in store.turns(scope):
        if turn.id not in covered:
            pending.setdefault(turn.session, []).append(turn)
    report = BuildReport(scope.conversation, sessions=sorted(pending))
    total = sum(len(turns) for turns in pending.values())
    state = _State(
        store,
        scope,
        embedder,
        next_number([e.id for e in episodes], "E"),
        next_number([f.id for f in store.facts(scope)], "S"),
    )
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="qemem-build")
    try:
        segmentations = {
            session: pool.submit(_segments, store, scope, llm, turns, speakers, config, ledger)
            for session, turns in pending.items()
        }
        plans: list[tuple[int, list[Turn]]] = []
        for session in sorted(pending):
            groups, fallbacks = segmentations[session].result()
            report.fallbacks += [Fallback(session, reason) for reason in fallbacks]
            plans += [(session, group) for group in groups]
        narratives: list[Future[tuple[str, str, str | None]]] = [
            pool.submit(
                write_episode, llm, group, speakers, _when(dates, session, group), config, ledger
            )
            for session, group in plans
        ]
        done = 0
        for (session, group), future in zip(plans, narratives, strict=True):
            title, narrative, why = future.result()
            episode = Episode(
                f"E{state.next_episode}",
                scope.conversation,
                session,
                title,
                narrative,
                _when(dates, session, group),
                tuple(t.id for t in group),
            )
            if why:
                report.degraded.append(f"{episode.id}: narrative built from the turns ({why})")
            known = related_facts(store, scope, embedder, episode, config.related_facts)
            facts, why = extract_facts(llm, episode, group, known, speakers, config, ledger)
            if why:
                report.degraded.append(f"{episode.id}: no facts extracted ({why})")
            added, merged = state.commit(episode, facts, config.dedup_threshold)
            report.episodes += 1
            report.facts_added += added
            report.facts_merged += merged
            done += len(group)
            if progress:
                progress(done, total)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        report.llm = tally_steps(ledger)
        report.seconds = time.perf_counter() - started
    return report


def _when(dates: dict[int, datetime], session: int, group: Sequence[Turn]) -> datetime:
    return dates.get(session, group[0].timestamp)


class _State:
    """Id counters and the commit of one episode with its facts."""

    def __init__(
        self,
        store: MemoryStore,
        scope: Scope,
        embedder: Embedder,
        next_episode: int,
        next_fact: int,
    ) -> None:
        self.store = store
        self.scope = scope
        self.embedder = embedder
        self.next_episode = next_episode
        self.next_fact = next_fact

    def commit(self, episode: Episode, facts: list[str], threshold: float) -> tuple[int, int]:
        """Store ``episode`` and its facts in one transaction, merging near-duplicate facts
        into existing ones; returns (facts added, facts merged)."""
        store, scope = self.store, self.scope
        stored = {f.id: f for f in store.facts(scope)}
        ids, matrix = store.vectors(scope, "fact")
        rows = {fid: row for row, fid in enumerate(ids)}
        pool_ids, pool_texts = list(ids), [stored[i].content for i in ids]
        vectors = self.embedder.embed(facts) if facts else np.zeros((0, matrix.shape[1]))
        new: list[SemanticFact] = []
        new_vectors: list[np.ndarray] = []
        changed: dict[str, SemanticFact] = {}
        merged = 0
        for text, vector in zip(facts, vectors, strict=True):
            row = find_duplicate(text, vector, pool_texts, matrix, threshold)
            if row is None:
                fact = SemanticFact(
                    f"S{self.next_fact}", scope.conversation, text, episode.session, (episode.id,)
                )
                self.next_fact += 1
                new.append(fact)
                new_vectors.append(vector)
                pool_ids.append(fact.id)
                pool_texts.append(text)
                matrix = np.vstack([matrix, vector[None, :]])
                continue
            merged += 1
            target = pool_ids[row]
            base = changed.get(target, stored.get(target))
            if base is not None and episode.id not in base.episode_ids:
                changed[target] = replace(base, episode_ids=(*base.episode_ids, episode.id))
        episode_vector = self.embedder.embed([document(episode)])
        with store.transaction():
            store.add_episodes(scope, [episode], episode_vector, self.embedder.id)
            if new:
                store.put_facts(scope, new, np.vstack(new_vectors), self.embedder.id)
            if changed:
                old = np.vstack([matrix[rows[fid]] for fid in changed])
                store.put_facts(scope, list(changed.values()), old, self.embedder.id)
        self.next_episode += 1
        return len(new), merged
