"""Agreement of ``resolve_times`` with LoCoMo's gold answers to temporal questions.

Takes the category-2 questions whose single evidence turn holds exactly one relative time
expression, resolves it against the turn's session date and compares with the gold answer two
ways: the exact phrase (case-insensitive) and date agreement (``time_agrees``: the gold names a
date, month, season or year overlapping the resolved range, or contains the phrase).

    python benchmarks/time_agreement.py --data ../shared/data/locomo/locomo-dev.json [-v]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from qemem.eval.manifest import run_info
from qemem.evidence.agreement import time_agrees
from qemem.evidence.times import resolve_times
from qemem.ingest.locomo import load_locomo, locomo_questions, parse_locomo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="list disagreements")
    args = parser.parse_args()
    samples = load_locomo(args.data)
    turns = {
        (conv.id, turn.id): (turn.text, session.date_time)
        for conv in parse_locomo(samples, str(args.data))
        for session in conv.sessions
        for turn in session.turns
    }
    total = exact = agree = 0
    misses = []
    for q in locomo_questions(samples):
        if q.category != 2 or len(q.evidence) != 1 or (q.conversation, q.evidence[0]) not in turns:
            continue
        text, anchor = turns[(q.conversation, q.evidence[0])]
        found = resolve_times(text, anchor)
        if len(found) != 1:
            continue
        total += 1
        ours = found[0]
        exact += ours.phrase.lower() == q.answer.strip().rstrip(".").lower()
        ok = bool(time_agrees(q.answer, ours))
        agree += ok
        if not ok:
            misses.append((q.answer, ours.expression, ours.phrase))
    print(json.dumps(run_info(args.data, questions=total), indent=1))
    print(f"questions: {total}")
    print(f"exact phrase: {exact}/{total} = {exact / max(total, 1):.3f}")
    print(f"date agreement: {agree}/{total} = {agree / max(total, 1):.3f}")
    if args.verbose:
        for gold, expression, phrase in misses:
            print(f"  gold {gold!r:40} | {expression!r} -> {phrase!r}")


if __name__ == "__main__":
    main()
