"""Standing instructions and preferences in front of the answer (issue 33).

On the instruction- and preference-following probes of a BEAM file in LoCoMo shape
(``qemem data beam``: turns with a ``role``, probes with their ``ability``, evidence and
``beam_fields``), the share of probes whose stated instruction or preference is in the
``context`` block and in the answer prompt of ``ask``.

A probe's stated instruction or preference (``instruction_being_tested`` or
``preference_being_tested``) is *present* in a text when the text shows a message that states
it, as a turn or as the provenance of a fact it shows: one of the probe's evidence messages
sharing at least half of the stated text's search words (all of its evidence messages when none
does). A probe without evidence messages cannot be read so: it is counted apart and left out of
these shares. The *words* reading (every probe): one line of the text holds at least 60% of the
stated text's search words.

No real model: the rule planner for ``context``, the offline LLM (``fake``) for ``ask``, and the
hash embedder unless ``--embedder`` names another. The script reads the records through the
public API only, so the same file measures the code before a change (run it with that code's
interpreter) and after::

    python benchmarks/standing_instructions.py beam100k.json --budget 2000 --mode respond
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qemem.embed.spec import open_embedder
from qemem.llm import LLMClient
from qemem.memory import Memory
from qemem.store import SQLiteStore
from qemem.testing import OfflineLLM
from qemem.tokens import tokenize

ABILITIES = ("instruction_following", "preference_following")
STATED = ("instruction_being_tested", "preference_being_tested")
STATING_SHARE = 0.5
LINE_SHARE = 0.6


@dataclass
class Probe:
    conversation: str
    ability: str
    question: str
    stated: str
    stating: set[str]


def _words(text: str) -> set[str]:
    return set(tokenize(text))


def probes_of(data: Sequence[dict[str, Any]]) -> list[Probe]:
    """The instruction- and preference-following probes, each with the messages stating it."""
    out = []
    for sample in data:
        texts = {
            turn["dia_id"]: turn["text"]
            for key, turns in sample["conversation"].items()
            if isinstance(turns, list)
            for turn in turns
        }
        for qa in sample.get("qa", []):
            if qa.get("ability") not in ABILITIES:
                continue
            fields = qa.get("beam_fields", {})
            stated = next((fields[k] for k in STATED if fields.get(k)), qa["answer"])
            wanted = _words(stated)
            evidence = [e for e in qa.get("evidence", []) if e in texts]
            stating = {
                e
                for e in evidence
                if len(wanted & _words(texts[e])) >= STATING_SHARE * max(1, len(wanted))
            }
            out.append(
                Probe(
                    sample["sample_id"],
                    qa["ability"],
                    qa["question"],
                    stated,
                    stating or set(evidence),
                )
            )
    return out


def shows(turns: Iterable[str], facts: Iterable[str], memory: Memory, probe: Probe) -> bool:
    """Whether a text showing ``turns`` and ``facts`` shows a message stating the probe's
    instruction or preference (itself, or as a shown fact's provenance)."""
    seen = set(turns)
    ids = list(dict.fromkeys(facts))
    for fact in memory.facts(probe.conversation, ids) if ids else []:
        seen |= set(getattr(fact, "turn_ids", ()))
    return bool(seen & probe.stating)


def words_in(text: str, stated: str) -> bool:
    """Whether one line of ``text`` holds ``LINE_SHARE`` of the stated text's search words."""
    wanted = _words(stated)
    need = LINE_SHARE * max(1, len(wanted))
    return any(len(wanted & _words(line)) >= need for line in text.splitlines())


def measure(
    memory: Memory, llm: OfflineLLM, probe: Probe, budgets: Sequence[int], mode: str
) -> dict[str, bool]:
    """Whether the probe's stated instruction or preference is in the ``context`` block at each
    budget and in the answer prompt of ``ask`` (both readings)."""
    hits: dict[str, bool] = {}
    for budget in budgets:
        block = memory.context(probe.conversation, probe.question, budget_tokens=budget)
        turns = [i.ref.id for i in block.items if i.ref.space == "turn"]
        facts = [i.ref.id for i in block.items if i.ref.space == "fact"]
        hits[f"context@{budget}"] = shows(turns, facts, memory, probe)
        hits[f"context@{budget} words"] = words_in(block.text, probe.stated)
    llm.calls.clear()
    answer = memory.ask(probe.conversation, probe.question, mode=mode)  # type: ignore[arg-type]
    shown = answer.evidence.shown
    refs = [*shown.background_refs, *getattr(shown, "standing", [])]
    refs += [r for card in answer.cards for r in card.refs]
    facts = [r.id for r in refs if r.space == "fact"]
    hits["prompt"] = shows(shown.turns, facts, memory, probe)
    hits["prompt words"] = words_in(llm.calls[-1].prompt_text if llm.calls else "", probe.stated)
    for budget in budgets:
        hits[f"both@{budget}"] = hits[f"context@{budget}"] and hits["prompt"]
    return hits


def _ingested(memory: Memory, data: list[dict[str, Any]]) -> None:
    """Ingest the conversations of ``data`` (through a file, as a user would)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "beam.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        memory.ingest(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a LoCoMo-shaped BEAM file (qemem data beam)")
    parser.add_argument("--budget", type=int, action="append", help="context budgets (2000)")
    parser.add_argument("--mode", default="respond", help="ask mode (respond)")
    parser.add_argument("--embedder", default="hash", help="embedder spec (hash)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    args = parser.parse_args()
    data = json.loads(args.data.read_text(encoding="utf-8"))
    data = data[: args.limit] if args.limit else data
    budgets = args.budget or [2000]
    started = time.perf_counter()
    llm = OfflineLLM()
    found: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    with Memory(
        SQLiteStore(":memory:"), open_embedder(args.embedder), llm=LLMClient(llm)
    ) as memory:
        _ingested(memory, data)
        probes = probes_of(data)
        for probe in probes:
            hits = measure(memory, llm, probe, budgets, args.mode)
            if not probe.stating:
                hits = {key: hit for key, hit in hits.items() if key.endswith("words")}
            for group in ("all", probe.ability):
                tally = found.setdefault(group, {})
                for key, hit in hits.items():
                    tally[key] = tally.get(key, 0) + int(hit)
                    counts[f"{group} {key}"] = counts.get(f"{group} {key}", 0) + 1
    seconds = time.perf_counter() - started
    unread = sum(1 for p in probes if not p.stating)
    print(
        f"{len(probes)} probes of {len(data)} conversations ({unread} without evidence "
        f"messages); ask mode {args.mode}; embedder {args.embedder}; {seconds:.0f} s"
    )
    for group, tally in found.items():
        shares = ", ".join(
            f"{key} {n}/{counts[f'{group} {key}']} = {n / counts[f'{group} {key}']:.3f}"
            for key, n in tally.items()
        )
        print(f"{group}: {shares}")


if __name__ == "__main__":
    main()
