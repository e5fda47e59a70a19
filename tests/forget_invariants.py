"""The invariants of the forget-and-correct state machine (``forget_machine``), checked after
every step (``ForgetInvariants.holds``):

- the stored turns are the oracle's (deleted ones gone, redacted ones blank), and each life of
  a conversation has a ``created_at`` of its own; a history item stored as a message names a
  stored, unredacted turn;
- no table of the store (history items too), LLM cache exchange, search result (each space,
  across conversations), context block or memory file holds the marker word of a forgotten
  message (nor of a deleted correction, the LLM cache aside: it keeps a deleted fact's
  exchanges, as documented); search finds no redacted turn;
- every correction not deleted is stored with its provenance and current, unless corrected
  again by hand or superseded by a build from turns it did not correct; it supersedes the fact
  it corrected while that fact is stored; no current fact states what it corrected;
- no id (turn, episode, fact) names two contents in one life of a conversation; episodes
  cite only stored, unredacted turns, each in one episode; every fact has an episode or is a
  correction;
- a queued build of a deleted conversation is cancelled, one of a living one stays queued.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis.stateful import invariant

from forget_checks import Backend, leaks, sqlite_cells
from forget_oracle import Fix, Oracle
from qemem.memory import Memory
from qemem.memory_file import MemoryFile, dumps
from qemem.models import REDACTED, Correction, Turn, search_text


class ForgetInvariants:
    """The invariants of ``ForgetMachine`` (a mixin: the machine holds what they read)."""

    memory: Memory
    oracle: Oracle
    backend: Backend
    url: str
    cache_path: Path
    jobs: dict[str, tuple[str, int]]
    tally: Counter[str]

    @invariant()
    def holds(self) -> None:
        self.tally["steps"] += 1
        turns = {conv: self.memory.turns(conv) for conv in sorted(self.oracle.lives)}
        files = {conv: self.memory.export_memory(conv) for conv in turns}
        self._turns_are_the_oracles(turns)
        for conv, memory in files.items():
            self._records_hold(conv, memory)
        self._nothing_forgotten_anywhere(turns, files)
        self._jobs_of_deleted_conversations_cancelled()

    def _turns_are_the_oracles(self, turns: dict[str, list[Turn]]) -> None:
        listed = {c.id: str(c.created_at) for c in self.memory.conversations()}
        assert set(listed) == set(self.oracle.lives), (listed, sorted(self.oracle.lives))
        for conv, life in self.oracle.lives.items():
            life.created_at = life.created_at or listed[conv]
            earlier = {e.created_at for e in self.oracle.ended if e.conv == conv}
            assert life.created_at == listed[conv] not in earlier, (conv, listed, earlier)
            stored = {t.id: (t.speaker, t.text) for t in turns[conv]}
            expected = {
                m.id: (m.speaker, REDACTED if m.state == "redacted" else m.text)
                for m in life.stored()
            }
            assert stored == expected, (conv, stored, expected)
            items = {i.turn for i in self.memory.items(conv) if i.turn is not None}
            unredacted = {t for t, (_, text) in stored.items() if text != REDACTED}
            assert items <= unredacted, f"{conv}: items of {items - unredacted} outlived them"

    def _records_hold(self, conv: str, memory: MemoryFile) -> None:
        """Ids name one content; episodes cite unredacted stored turns; every fact has a
        source; corrections hold (see the module docstring)."""
        life = self.oracle.lives[conv]
        cited: dict[str, str] = {}
        for e in memory.episodes:
            content = (e.session, e.title, e.content, e.turn_ids)
            self.oracle.note(conv, life.number, "episode", e.id, content)
            assert set(e.turn_ids) <= life.material(), f"{conv}: {e.id} cites {e.turn_ids}"
            twice = {t: cited[t] for t in e.turn_ids if t in cited}
            assert not twice, f"{conv}: turns in two episodes: {e.id} and {twice}"
            cited |= dict.fromkeys(e.turn_ids, e.id)
        corrections = {c.fact: c for c in memory.corrections}
        built = {e.id for e in memory.episodes}
        for f in memory.facts:
            self.oracle.note(conv, life.number, "fact", f.id, f.content)
            assert set(f.episode_ids) <= built, f"{conv}: fact {f.id} cites missing episodes"
            assert f.episode_ids or f.id in corrections, f"{conv}: fact {f.id} has no source"
        current = {f.id: f.content for f in self.memory.facts(conv)}
        for fix in life.fixes.values():
            self._correction_holds(conv, fix, memory, corrections, current)

    def _correction_holds(
        self,
        conv: str,
        fix: Fix,
        memory: MemoryFile,
        corrections: dict[str, Correction],
        current: dict[str, str],
    ) -> None:
        """A correction not deleted is a current fact (unless corrected again by hand, or a
        later turn changed it) superseding the fact it corrected, whose statement is no
        current fact's; a deleted one is gone."""
        facts = {f.id for f in memory.facts}
        if not fix.live:
            assert fix.fact not in facts, f"{conv}: deleted correction {fix.fact} is back"
            return
        assert fix.fact in corrections, f"{conv}: correction {fix.fact} lost"
        shown = set(corrections[fix.fact].corrected_turns)
        replaced = [s for s in memory.supersessions if s.old == fix.fact]
        for s in replaced:
            again = s.new in fix.again
            later = s.kind == "build" and not set(s.turn_ids) <= shown
            assert again or later, f"{conv}: correction {fix.fact} superseded by {s}"
        assert replaced or fix.fact in current, f"{conv}: correction {fix.fact} not current"
        if fix.corrected in facts:
            link = (fix.corrected, fix.fact, "manual")
            assert any((s.old, s.new, s.kind) == link for s in memory.supersessions), (
                f"{conv}: correction {fix.fact} no longer supersedes {fix.corrected}"
            )
        back = [f for f, content in current.items() if content == fix.statement]
        assert not back, f"{conv}: {back} state again what {fix.fact} corrected"

    def _nothing_forgotten_anywhere(
        self, turns: dict[str, list[Turn]], files: dict[str, MemoryFile]
    ) -> None:
        """No table, cache exchange, search result, context block or memory file holds a
        forgotten marker word; search finds no redacted or unknown turn."""
        words = self.oracle.forbidden()
        found = leaks(self.backend.cells(self.url), words)
        cache = leaks(sqlite_cells(self.cache_path), self.oracle.forbidden(fixes=False))
        found += [(f"llm cache {table}", word) for table, word in cache]
        query = " ".join(sorted(words)[:24]) or "really like"
        stored = {(conv, t.id, t.text) for conv, mine in turns.items() for t in mine}
        for space in ("turn", "episode", "fact") if turns else ():
            for hit in self.memory.search_many(sorted(turns), query, k=None, space=space):
                found += leaks([(f"search {space}", search_text(hit.record))], words)
                if isinstance(hit.record, Turn):
                    key = (hit.conversation, hit.record.id, hit.record.text)
                    assert key in stored and hit.record.text != REDACTED, f"search found {key}"
        for conv, memory in files.items():
            block = self.memory.context(conv, f"What about {query}?", budget_tokens=1500)
            found += leaks([("context", block.text), ("memory file", dumps(memory))], words)
            assert REDACTED not in block.text, block.text
        assert not found, f"forgotten text found: {sorted(set(found))}"

    def _jobs_of_deleted_conversations_cancelled(self) -> None:
        if not self.jobs:
            return
        status = {j.id: j.status for j in self.memory.jobs(limit=500)}
        for job_id, (conv, number) in self.jobs.items():
            life = self.oracle.life(conv)
            expected = "queued" if life is not None and life.number == number else "cancelled"
            assert status[job_id] == expected, f"job {job_id} of {conv}: {status[job_id]}"
