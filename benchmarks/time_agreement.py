"""Agreement of ``resolve_times`` with LoCoMo's gold answers to temporal questions.

Takes the category-2 questions whose single evidence turn holds exactly one relative time
expression and whose gold answer names a time (a date, month, season, year, "the <weekday>
before <date>" or a relative expression; golds such as "her mother" are counted apart),
resolves the expression against the turn's session date and compares with the gold answer two
ways: the exact phrase (case-insensitive) and date agreement (``time_agrees``: the gold's period
overlaps the resolved range, or contains the phrase).

    python benchmarks/time_agreement.py --data locomo10.json [-v] [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from qemem.eval.manifest import run_info
from qemem.evidence.agreement import time_agrees, time_ranges
from qemem.evidence.times import resolve_times
from qemem.ingest.locomo import load_locomo, locomo_questions, parse_locomo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="list disagreements")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    samples = load_locomo(args.data)
    turns = {
        (conv.id, turn.id): (turn.text, session.date_time)
        for conv in parse_locomo(samples, str(args.data))
        for session in conv.sessions
        for turn in session.turns
    }
    total = exact = agree = no_time = 0
    misses = []
    for q in locomo_questions(samples):
        if q.category != 2 or len(q.evidence) != 1 or (q.conversation, q.evidence[0]) not in turns:
            continue
        text, anchor = turns[(q.conversation, q.evidence[0])]
        found = resolve_times(text, anchor)
        if len(found) != 1:
            continue
        ours = found[0]
        if not time_ranges(q.answer, (ours.start.year, ours.end.year), ours.anchor):
            no_time += 1
            continue
        total += 1
        exact += ours.phrase.lower() == q.answer.strip().rstrip(".").lower()
        ok = bool(time_agrees(q.answer, ours))
        agree += ok
        if not ok:
            misses.append((f"{q.conversation}#{q.index}", q.answer, ours.expression, ours.phrase))
    print(json.dumps(run_info(args.data, questions=total), indent=1))
    print(f"questions: {total} (and {no_time} whose gold answer names no time, not counted)")
    print(f"exact phrase: {exact}/{total} = {exact / max(total, 1):.3f}")
    print(f"date agreement: {agree}/{total} = {agree / max(total, 1):.3f}")
    if args.verbose:
        for key, gold, expression, phrase in misses:
            print(f"  {key:12} gold {gold!r:36} | {expression!r} -> {phrase!r}")
    if args.json:
        shares = {"exact": exact / max(total, 1), "agreement": agree / max(total, 1)}
        rounded = {k: round(v, 4) for k, v in shares.items()}
        print(json.dumps({"questions": total, "no_time": no_time, **rounded}))


if __name__ == "__main__":
    main()
