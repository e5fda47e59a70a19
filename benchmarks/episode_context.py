"""Greeting-only and closing-only episodes of real segmentations, and episodes that open
mid-reference: what ``BuildConfig.merge_phatic`` and ``BuildConfig.context_turns`` act on.

    python benchmarks/episode_context.py --data locomo-dev.json --memory memory/

``--memory`` is a folder of ``qemem-memory/1`` files (``<conversation>.json``: a build's
episodes, each with its turn ids, and facts); ``--data`` the LoCoMo file with those turns. Per
conversation it prints the episodes, the runs :func:`qemem.build.phatic.merge_phatic` would
join to a neighbour (each with its lines and how many facts the build took from it), and the
episodes whose first message opens with a pronoun ("His ankle ...", "She wasn't ..."), which
the context messages shown before an episode are for, and counts those (not first in their
session) whose first message is a reply to what came before ("That's awesome!", "Thanks,
..."). The last line is one JSON object with
the counts.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from qemem.build.phatic import merge_phatic, run_kind
from qemem.models import Turn

_OPENS_WITH_PRONOUN = re.compile(r"^(?:he|she|they|his|her|their|him|them)\b", re.IGNORECASE)
_OPENS_AS_REPLY = re.compile(
    r"^(?:that|that's|thanks|thank|wow|yeah|yes|yep|yup|no|nope|it|it's|sounds|sure|totally|"
    r"definitely|agreed|oh|awesome|cool|glad|sorry|congrats|haha|exactly|true)\b",
    re.IGNORECASE,
)


def conversation_turns(sample: dict[str, Any]) -> dict[str, Turn]:
    """Every turn of a LoCoMo conversation by its dia_id (timestamps are not needed here)."""
    talk = sample["conversation"]
    turns: dict[str, Turn] = {}
    for key, value in talk.items():
        if not (key.startswith("session_") and isinstance(value, list)):
            continue
        session = int(key.split("_")[1])
        for n, t in enumerate(value):
            turns[t["dia_id"]] = Turn(
                t["dia_id"], sample["sample_id"], session, n, t["speaker"], t["text"], datetime.min
            )
    return turns


def measure(memory: dict[str, Any], sample: dict[str, Any]) -> Counter[str]:
    """Print and count one conversation's mergeable runs and pronoun openings."""
    turns = conversation_turns(sample)
    talk = sample["conversation"]
    names = [talk["speaker_a"], talk["speaker_b"]]
    facts = Counter(e for f in memory["facts"] for e in f["episode_ids"])
    counts: Counter[str] = Counter(episodes=len(memory["episodes"]))
    sessions: dict[int, list[dict[str, Any]]] = {}
    for episode in memory["episodes"]:
        sessions.setdefault(episode["session"], []).append(episode)
    for episodes in sessions.values():
        episodes.sort(key=lambda e: turns[e["turn_ids"][0]].position)
        ordered = [turns[t] for e in episodes for t in e["turn_ids"]]
        index = {t.id: i for i, t in enumerate(ordered)}
        groups = [[index[t] for t in e["turn_ids"]] for e in episodes]
        _, merged = merge_phatic(groups, ordered, names)
        counts["merged"] += merged
        for episode in episodes:
            own = [turns[t] for t in episode["turn_ids"]]
            kind = run_kind(own, names)
            if kind is not None:
                counts[kind] += 1
                counts[f"{kind}_facts"] += facts[episode["id"]]
                print(f"  {kind}-only {episode['id']} ({facts[episode['id']]} facts):")
                print("\n".join(f"      {t.speaker}: {t.text}" for t in own))
            first = own[0].text.lstrip()
            if _OPENS_WITH_PRONOUN.match(first):
                counts["opens_with_pronoun"] += 1
                print(f"  opens with a pronoun {episode['id']}: {first[:100]}")
            elif _OPENS_AS_REPLY.match(first) and episode is not episodes[0]:
                counts["opens_as_reply"] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON of the conversations")
    parser.add_argument("--memory", type=Path, required=True, help="folder of memory files")
    args = parser.parse_args()
    samples = {c["sample_id"]: c for c in json.loads(args.data.read_text("utf-8"))}
    totals: Counter[str] = Counter()
    for path in sorted(args.memory.glob("*.json")):
        memory = json.loads(path.read_text("utf-8"))
        print(f"{memory['conversation']}:")
        counts = measure(memory, samples[memory["conversation"]])
        print(f"  {dict(counts)}")
        totals.update(counts)
    keys = ("episodes", "merged", "closing", "closing_facts", "greeting", "greeting_facts")
    keys += ("opens_with_pronoun", "opens_as_reply")
    print(json.dumps({k: totals[k] for k in keys}))


if __name__ == "__main__":
    main()
