"""The forget-and-correct state machine (issue 30): a hypothesis ``RuleBasedStateMachine`` that
appends, builds, forgets, corrects, deletes, re-creates, exports and imports at random over one
store, checking after every step what ``forget_oracle.Oracle`` says must hold.

Rules: append (with and without message ids and Idempotency-Keys; a key reused for another
batch), retry an earlier batch, build (and rebuild), start a build that waits at a
``BlockingLLM`` gate (and queue a build job beside it), step it one fact extraction at a time
or let it finish (every other rule may run while it waits: deleting and re-creating its
conversation among them; ``delete_during_build`` does that in one rule), take its build lock
over (as an expired job lease does), delete or redact a message, delete a fact (or a
correction), correct a fact, delete a conversation, export a memory file (round-tripped
through a fresh store) and import it again later.

Invariants after every step: ``forget_invariants``. ``tally`` counts what ran: steps,
operations by kind and their outcomes.
"""

from __future__ import annotations

import functools
import itertools
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
)

from forget_checks import Backend
from forget_invariants import ForgetInvariants
from forget_oracle import MARKER, Oracle, batch_records, marker, session_number
from qemem.build import BuildConfig
from qemem.embed import HashEmbedder
from qemem.errors import (
    ConversationChangedError,
    ConversationGoneError,
    InputError,
    NotFoundError,
    QememError,
    StoreError,
)
from qemem.llm import LLMCache, LLMClient, stages
from qemem.memory import Appended, Memory
from qemem.memory_file import load
from qemem.store import Scope, open_store
from qemem.testing import BlockingLLM, OfflineLLM

CONVERSATIONS = ("c1", "c2")
CONFIG = BuildConfig(snapshot_lag=1)
"""One fact extraction ahead of the merge: when the gate holds episode n's extraction, the
build has committed episodes 1..n-1 and nothing else is under way (a deterministic point)."""
GATED = {stages.BUILD_CALIBRATE}
SETTLE_S = 60.0
PICK = st.integers(0, 10**6)
_NAMESPACES = itertools.count()


@dataclass
class Flight:
    """A build running in a thread of its own, held at the gate between steps."""

    conv: str
    thread: threading.Thread
    errors: list[BaseException] = field(default_factory=list)
    gone: bool = False
    """Its conversation was deleted while it ran."""
    abandoned: bool = False
    """Its build lock was taken over (as when a job's lease runs out): edits go ahead."""
    changed: bool = False
    """A message or fact of its conversation was removed by hand while it ran."""


class ForgetMachine(ForgetInvariants, RuleBasedStateMachine):
    """One example: a fresh store (SQLite: a new file; PostgreSQL: a new namespace of the
    test's database), an LLM cache file, the oracle."""

    def __init__(self, backend: Backend, tally: Counter[str]) -> None:
        super().__init__()
        self.backend, self.tally = backend, tally
        self.folder = Path(tempfile.mkdtemp(prefix="qemem-machine-"))
        self.url = backend.store(self.folder)
        self.store = open_store(self.url)
        self.cache_path = self.folder / "llm-cache.db"
        self.cache = LLMCache(self.cache_path)
        self.gate = BlockingLLM(stages=GATED)
        namespace = f"machine{next(_NAMESPACES)}"
        plain = LLMClient(OfflineLLM(), cache=self.cache, concurrency=1)
        gated = LLMClient(self.gate, cache=self.cache, concurrency=1)
        self.memory = Memory(self.store, HashEmbedder(), llm=plain, namespace=namespace)
        self.gated = Memory(self.store, HashEmbedder(), llm=gated, namespace=namespace)
        self.oracle = Oracle()
        self.flight: Flight | None = None
        self.counter = itertools.count()
        self.batches: list[tuple[str, list[dict[str, str]], str | None]] = []
        self.exports: dict[str, tuple[int, Path]] = {}
        self.jobs: dict[str, tuple[str, int]] = {}
        tally["examples"] += 1

    def teardown(self) -> None:
        try:
            if self.flight is not None:
                self.gate.open()
                self.flight.thread.join(SETTLE_S)
            for conv in list(self.oracle.lives):
                self.memory.delete(conv)
        finally:
            self.store.close()
            self.cache.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    def _count(self, kind: str) -> None:
        """One more operation of ``kind`` (a rule may run several; steps are counted by
        the invariant checks that follow each)."""
        self.tally[kind] += 1

    def _next(self) -> int:
        return next(self.counter)

    def _alive(self, pick: int) -> str:
        alive = sorted(self.oracle.lives)
        return alive[pick % len(alive)]

    def _building(self, conv: str) -> bool:
        """Whether the build in flight holds the build lock of ``conv`` (not of a deleted
        earlier life of it, nor one taken over)."""
        flight = self.flight
        return flight is not None and flight.conv == conv and not (flight.gone or flight.abandoned)

    def _busy(self, conv: str) -> bool:
        """Whether the build in flight runs over ``conv`` (its lock held or taken over)."""
        return self.flight is not None and self.flight.conv == conv and not self.flight.gone

    def _removed(self, conv: str) -> None:
        """A message or fact of ``conv`` was removed by hand: a build over it is fenced."""
        if self.flight is not None and self.flight.conv == conv and not self.flight.gone:
            self.flight.changed = True
            self.tally["start build: a record removed while it runs"] += 1

    def _refused(self, kind: str, call: Callable[[], object], error: type[QememError]) -> None:
        """``call`` must raise exactly ``error`` (the build in flight holds the lock)."""
        try:
            call()
        except QememError as exc:
            assert type(exc) is error or isinstance(exc, error), exc
            self.tally[f"{kind}: refused"] += 1
            return
        raise AssertionError(f"{kind} should have been refused with {error.__name__}")

    # ------------------------------------------------------------------ appends
    @initialize(
        first=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=2, max_size=6),
        second=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=6),
    )
    def begin(self, first: list[tuple[int, bool]], second: list[tuple[int, bool]]) -> None:
        """Both conversations start with messages: c1 over two sessions without ids, the
        first one built; c2 with ids, unbuilt."""
        half = len(first) // 2
        self.append("c1", first[:half] or first, 0, False, "none")
        self.memory.build("c1", config=CONFIG)
        self.append("c1", first[half:], 0, False, "none")
        self.append("c2", second, 0, True, "new")

    @rule(
        conv=st.sampled_from(CONVERSATIONS),
        topics=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=3),
        session=st.integers(0, 3),
        with_ids=st.booleans(),
        key=st.sampled_from(["none", "new", "reuse"]),
    )
    def append(
        self,
        conv: str,
        topics: list[tuple[int, bool]],
        session: int,
        with_ids: bool,
        key: str,
    ) -> None:
        self._count("append")
        life = self.oracle.life(conv)
        sessions = life.sessions if life else []
        if session == 0 or not sessions:
            key_s = f"s{max(map(session_number, sessions), default=0) + 1}"
        else:
            key_s = sessions[(session - 1) % len(sessions)]
        words = [marker("m", self._next()) for _ in topics]
        ids = [f"u{self._next()}" for _ in topics] if with_ids else None
        records = batch_records(words, key_s, topics, ids, self._next() * 4)
        idempotency = None
        if key == "new" or (key == "reuse" and not self.oracle.keys):
            idempotency = f"k{self._next()}"
        elif key == "reuse":
            idempotency = sorted(self.oracle.keys)[len(words) % len(self.oracle.keys)]
        if idempotency is not None or ids is not None:  # a batch that can be retried
            self.batches.append((conv, records, idempotency))
        # every other batch that is never retried goes as an agent's history items (each
        # message's item holds its marker too, and a tool output item holds none)
        as_items = idempotency is None and ids is None and self.tally["append"] % 2 == 0
        self._send("append", conv, records, idempotency, as_items)

    @rule(pick=PICK)
    @precondition(lambda self: self.batches)
    def retry(self, pick: int) -> None:
        """Send an earlier batch with message ids or a key again, to its conversation (a
        batch with neither is a new one each time)."""
        self._count("retry")
        conv, records, key = self.batches[pick % len(self.batches)]
        self._send("retry", conv, records, key)

    def _send(
        self,
        kind: str,
        conv: str,
        records: list[dict[str, str]],
        key: str | None,
        as_items: bool = False,
    ) -> None:
        expected = self.oracle.expect(conv, records, key)
        try:
            got = (
                self._as_items(conv, records)
                if as_items
                else self.memory.add_messages(conv, records, idempotency_key=key)
            )
        except QememError as exc:
            assert expected.error is not None, f"{kind} refused: {exc!r}; expected {expected}"
            assert type(exc) is expected.error, f"{kind}: {exc!r}, expected {expected}"
            self.tally[f"{kind}: refused ({type(exc).__name__})"] += 1
            return
        assert expected.error is None, f"{kind} acknowledged {got}; expected {expected}"
        if expected.replay is not None:
            assert (got.ids, got.turns_added, got.sessions_added) == expected.replay
            stored = {t.id for t in self.memory.turns(conv)}
            assert set(got.ids) <= stored, f"a replay acknowledged {set(got.ids) - stored}"
            self.tally[f"{kind}: replayed"] += 1
            return
        assert len(got.ids) == len(records), got
        for index, rid in expected.retried.items():
            assert got.ids[index] == rid, (index, got)
        for index in expected.new:
            assert records[index].get("id", got.ids[index]) == got.ids[index], (index, got)
        assert got.turns_added == len(expected.new), (got, expected)
        assert got.sessions_added == int(expected.new_session), (got, expected)
        if expected.retried:
            self.tally[f"{kind}: messages acknowledged again"] += 1
        self.oracle.appended(
            conv, records, key, expected, got.ids, (got.turns_added, got.sessions_added)
        )

    def _as_items(self, conv: str, records: list[dict[str, str]]) -> Appended:
        """Append ``records`` through ``add_items``, each message with an item holding its
        text, and a tool output item; what ``add_messages`` would have answered."""
        before = self._sizes(conv)
        items = [{"role": "user", "content": r["text"]} for r in records]
        tool = {"type": "function_call_output", "call_id": "c", "output": "done"}
        stored = self.memory.add_items(conv, [*items, tool], messages=[*records, None])
        after = self._sizes(conv)
        self.tally["append: as history items"] += 1
        turns = [str(i.turn) for i in stored[:-1]]
        return Appended(turns, after[0] - before[0], after[1] - before[1])

    def _sizes(self, conv: str) -> tuple[int, int]:
        """(turns, sessions) of the conversation (none when it does not exist)."""
        if conv not in {c.id for c in self.memory.conversations()}:
            return 0, 0
        return len(self.memory.turns(conv)), len(self.memory.conversation(conv).sessions)

    # ------------------------------------------------------------------ builds
    @rule(pick=PICK, rebuild=st.booleans())
    @precondition(lambda self: self.oracle.lives)
    def build(self, pick: int, rebuild: bool) -> None:
        self._count("rebuild" if rebuild else "build")
        conv = self._alive(pick)
        run = functools.partial(self.memory.build, conv, config=CONFIG, rebuild=rebuild)
        if self._building(conv):
            self._refused("build", run, StoreError)
            return
        if self._busy(conv):
            return  # two builds at once after a lock was taken over: see docs/reliability.md
        run()
        left = self._unbuilt(conv)
        assert not left, f"a build of {conv} left messages {sorted(left)} in no episode"

    @rule(pick=PICK)
    @precondition(lambda self: self.flight is None and self.oracle.lives)
    def start_build(self, pick: int) -> None:
        """Start a build in a thread; it stops at its first fact extraction (or ends)."""
        self._count("start build")
        self._start(self._alive(pick))

    @rule(steps=st.integers(0, 2), again=st.sampled_from(["no", "ids", "key"]))
    @precondition(lambda self: self.flight is None and self.oracle.lives)
    def delete_during_build(self, steps: int, again: str) -> None:
        """Start a build of a conversation with messages to build, let it write ``steps``
        episodes, delete the conversation, create it again (``again``: no, with messages with
        ids, or without ids under a key), and let the build go on: it is fenced."""
        self._count("delete during build")
        waiting = [c for c in sorted(self.oracle.lives) if self._unbuilt(c)]
        if not waiting:
            return
        conv = waiting[0]
        self._start(conv)
        for _ in range(steps):
            if self.flight is not None:
                self.gate.release(1)
                self._settle()
        self._delete(conv)
        if again != "no":
            self.append(conv, [(0, False), (1, True)], 0, again == "ids", "new")
        if self.flight is not None:
            self.finish_build()

    def _unbuilt(self, conv: str) -> set[str]:
        """The messages of ``conv`` a build would build."""
        covered = {t for e in self.memory.episodes(conv) for t in e.turn_ids}
        return self.oracle.lives[conv].material() - covered

    def _enqueue(self, conv: str) -> None:
        """Queue a build job of ``conv`` (no worker runs it): at most one per conversation,
        cancelled when it is deleted (checked after every step)."""
        self._count("enqueue build")
        job = self.memory.enqueue_build(conv)
        life = self.oracle.lives[conv].number
        queued = [j for j, (c, n) in self.jobs.items() if (c, n) == (conv, life)]
        assert queued in ([], [job.id]), f"a second job {job.id} beside {queued}"
        self.jobs[job.id] = (conv, life)

    def _start(self, conv: str) -> None:
        """Start a build of ``conv`` in a thread (and queue a job of it too)."""
        self._enqueue(conv)
        flight = Flight(conv, threading.Thread(target=lambda: None))

        def run() -> None:
            try:
                self.gated.build(conv, config=CONFIG)
            except BaseException as exc:
                flight.errors.append(exc)

        flight.thread = threading.Thread(target=run, daemon=True)
        self.flight = flight
        flight.thread.start()
        self._settle()

    @rule()
    @precondition(lambda self: self.flight is not None)
    def step_build(self) -> None:
        """Let the build in flight run to its next fact extraction (or to its end)."""
        self._count("step build")
        self.gate.release(1)
        self._settle()

    @rule()
    @precondition(lambda self: self.flight is not None)
    def finish_build(self) -> None:
        self._count("finish build")
        assert self.flight is not None
        self.gate.open()
        self.flight.thread.join(SETTLE_S)
        self.gate.shut()
        self._landed()

    def _settle(self) -> None:
        """Wait until the build in flight waits at the gate, or has ended."""
        flight = self.flight
        assert flight is not None
        deadline = time.monotonic() + SETTLE_S
        while flight.thread.is_alive() and self.gate.waiting == 0:
            flight.thread.join(0.001)
            assert time.monotonic() < deadline, "the build neither ended nor reached the gate"
        if not flight.thread.is_alive():
            self._landed()

    def _landed(self) -> None:
        """The build in flight ended: fenced if its conversation was deleted meanwhile."""
        flight = self.flight
        assert flight is not None and not flight.thread.is_alive()
        self.flight = None
        if flight.gone:
            assert [type(e) for e in flight.errors] == [ConversationGoneError], flight.errors
            assert "deleted while it was being built" in str(flight.errors[0])
            self.tally["start build: ended fenced (conversation deleted)"] += 1
        elif flight.changed:
            assert [type(e) for e in flight.errors] == [ConversationChangedError], flight.errors
            self.tally["start build: ended fenced (a record removed)"] += 1
        else:
            assert flight.errors == [], flight.errors
            self.tally["start build: ended done"] += 1

    @rule()
    @precondition(lambda self: self._building(self.flight.conv) if self.flight else False)
    def take_over_build_lock(self) -> None:
        """Clear the build lock of the build in flight, as a job whose lease ran out loses it:
        edits of its conversation go ahead, and the build is fenced by what they remove."""
        self._count("take over build lock")
        assert self.flight is not None
        self.flight.abandoned = True
        self.store.set_state(Scope(self.flight.conv, self.memory.namespace), "lock.build", "{}")

    # ------------------------------------------------------------------ forgetting
    @rule(pick=PICK, redact=st.booleans())
    @precondition(lambda self: any(life.stored() for life in self.oracle.lives.values()))
    def forget_message(self, pick: int, redact: bool) -> None:
        kind = "redact message" if redact else "delete message"
        self._count(kind)
        candidates = [
            (conv, m.id)
            for conv, life in sorted(self.oracle.lives.items())
            for m in life.stored()
            if m.state == "live" or not redact
        ]
        if not candidates:
            return
        conv, mid = candidates[pick % len(candidates)]
        call = self.memory.redact_message if redact else self.memory.delete_message
        if self._building(conv):
            self._refused(kind, lambda: call(conv, mid), StoreError)
            return
        fixes = {f.fact for f in self.oracle.fixes_of(conv)}
        done = call(conv, mid)
        assert (done.redacted if redact else done.deleted) == [mid], done
        assert not fixes & set(done.facts), f"forgetting {mid} removed corrections {done.facts}"
        self.oracle.forgot(conv, mid, redact=redact)
        self._removed(conv)

    @rule(pick=PICK, correction=st.booleans())
    @precondition(lambda self: self.oracle.lives)
    def delete_fact(self, pick: int, correction: bool) -> None:
        """Delete a fact: any, or (``correction``) a correction by hand when there is one."""
        self._count("delete fact")
        facts = [
            (conv, f.id)
            for conv in sorted(self.oracle.lives)
            for f in self.memory.facts(conv, include_superseded=True)
        ]
        fixes = [(c, f.fact) for c in sorted(self.oracle.lives) for f in self.oracle.fixes_of(c)]
        facts = fixes if correction and fixes else facts
        if not facts:
            return
        conv, fact = facts[pick % len(facts)]
        if self._building(conv):
            self._refused("delete fact", lambda: self.memory.delete_fact(conv, fact), StoreError)
            return
        fix = self.oracle.lives[conv].fixes.get(fact)
        stored = {f.id for f in self.memory.facts(conv, include_superseded=True)}
        done = self.memory.delete_fact(conv, fact)
        assert done.facts == [fact], done
        if fix is not None and fix.live:
            self.tally["delete fact: a correction"] += 1
            if fix.corrected in stored:
                assert fix.corrected in done.restored, (fix, done)
        self.oracle.fact_deleted(conv, fact)
        self._removed(conv)

    @rule(pick=PICK, cite=st.one_of(st.none(), PICK))
    @precondition(lambda self: self.oracle.lives)
    def correct_fact(self, pick: int, cite: int | None) -> None:
        """Correct a current fact by hand (building a conversation first when none has one)."""
        self._count("correct fact")
        current = [(conv, f) for conv in sorted(self.oracle.lives) for f in self.memory.facts(conv)]
        idle = [c for c in sorted(self.oracle.lives) if self._unbuilt(c) and not self._busy(c)]
        if not current and idle:
            self.memory.build(idle[0], config=CONFIG)
            current = [(idle[0], f) for f in self.memory.facts(idle[0])]
        if not current:
            return
        conv, fact = current[pick % len(current)]
        life = self.oracle.lives[conv]
        word = marker("c", self._next())
        content = MARKER.sub(word, fact.content) if MARKER.search(fact.content) else ""
        content = content or f"{fact.content} {word}"
        stored = sorted(m.id for m in life.stored())
        turns = [stored[cite % len(stored)]] if cite is not None and stored else []
        call = functools.partial(self.memory.correct_fact, conv, fact.id, content, turns=turns)
        if self._building(conv):
            self._refused("correct fact", call, StoreError)
            return
        made = call()
        self.tally["correct fact: made"] += 1
        assert (made.old, made.kind) == (fact.id, "manual"), made
        assert self.oracle.is_fresh(conv, life.number, "fact", made.new), made
        self.oracle.note(conv, life.number, "fact", made.new, content)
        self.oracle.corrected(conv, fact.id, made.new, fact.content, content)

    @rule()
    @precondition(lambda self: self.flight is not None and not self.flight.gone)
    def delete_conversation_being_built(self) -> None:
        """Delete the conversation of the build in flight (as ``delete_conversation`` may)."""
        assert self.flight is not None
        self._delete(self.flight.conv)

    @rule(pick=PICK)
    @precondition(lambda self: self.oracle.lives)
    def delete_conversation(self, pick: int) -> None:
        self._delete(self._alive(pick))

    def _delete(self, conv: str) -> None:
        self._count("delete conversation")
        assert self.memory.delete(conv)
        assert not self.memory.delete(conv)  # a second delete finds nothing
        self.oracle.end(conv)
        flight = self.flight
        if flight is not None and flight.conv == conv and not flight.gone:
            flight.gone = True
            self.tally["delete conversation: while it is built"] += 1

    # ------------------------------------------------------------------ memory files
    @rule(pick=PICK)
    @precondition(lambda self: self.oracle.lives)
    def export_memory(self, pick: int) -> None:
        """Export to a file; importing it into its own store adds nothing, and a fresh store
        holding the same turns exports the same file after importing it."""
        self._count("export")
        conv = self._alive(pick)
        path = self.folder / f"{conv}-{self._next()}.mem.json"
        exported = self.memory.export_memory(conv, path)
        assert load(path) == exported
        again = self.memory.import_memory(path)
        added = (again.episodes_added, again.facts_added, again.supersessions_added)
        assert (*added, again.corrections_added) == (0, 0, 0, 0), again
        records = self._turn_records(conv)
        with Memory(open_store(None), HashEmbedder(), namespace="copy") as copy:
            if not records:  # every message deleted: no store holding its turns can exist
                with pytest.raises(NotFoundError):
                    copy.import_memory(path)
                self.tally["export: of a conversation without messages"] += 1
            else:
                copy.add_messages(conv, records)
                copy.import_memory(path)
                assert copy.export_memory(conv) == exported
        self.exports[conv] = (self.oracle.lives[conv].number, path)

    def _turn_records(self, conv: str) -> list[dict[str, str]]:
        """The stored turns of ``conv`` as messages, a placeholder in each empty session (so
        a fresh store numbers the sessions alike)."""
        sessions = self.memory.conversation(conv).sessions
        turns = self.memory.turns(conv)
        out = []
        for session in sessions:
            mine = [t for t in turns if t.session == session.index]
            out += [
                {
                    "id": t.id,
                    "session_id": session.key,
                    "timestamp": t.timestamp.isoformat(),
                    "speaker": t.speaker,
                    "text": t.text,
                }
                for t in mine
            ]
            if not mine:
                when = session.date_time.isoformat()
                out.append(
                    {"session_id": session.key, "timestamp": when, "speaker": "-", "text": "-"}
                )
        return out

    @rule(pick=PICK)
    @precondition(lambda self: self.exports)
    def import_memory(self, pick: int) -> None:
        """Import a memory file exported earlier in this life of its conversation: refused,
        or it brings back what it holds, but never the text of a forgotten message."""
        self._count("import")
        conv, (number, path) = sorted(self.exports.items())[pick % len(self.exports)]
        life = self.oracle.life(conv)
        if life is None or life.number != number:
            return
        try:
            report = self.memory.import_memory(path)
        except (InputError, StoreError) as exc:
            self.tally[f"import: refused ({type(exc).__name__})"] += 1
            return
        if report.episodes_added or report.facts_added:
            self.tally["import: brought records back"] += 1
        memory = load(path)
        manual = {s.new: s.old for s in memory.supersessions if s.kind == "manual"}
        self.oracle.restored(conv, [c.fact for c in memory.corrections], manual)
