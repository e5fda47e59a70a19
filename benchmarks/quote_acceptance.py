"""Acceptance of the deterministic quote check (``verify_quote``) per kind of quote.

Takes the annotated evidence turns of LoCoMo questions (categories 1-4, each turn once) and
builds quotes from each turn's message text, deterministically (seeded):

* exact: up to 14 consecutive words of the turn's longest sentence, copied verbatim;
* lowercased / apostrophes dropped / contractions expanded: the exact quote normalised that way
  (the last two only when the quote has an apostrophe); all of these should be accepted;
* foreign turn: the exact quote checked against another evidence turn of the conversation;
* shuffled: the exact quote's words in another order;
* number changed: a window of up to 6 words around a number of the turn, with the number
  changed (the unchanged window is counted as exact);
* one word: the longest word of the exact quote;
  all of these should be rejected.

    python benchmarks/quote_acceptance.py --data locomo10.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Callable
from pathlib import Path

from qemem.eval.manifest import run_info
from qemem.evidence.quotes import verify_quote
from qemem.ingest.locomo import load_locomo, locomo_questions, parse_locomo

_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_WORD = re.compile(r"\S+")
_NUMBER = re.compile(
    r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b", re.I
)
_NEXT = {
    "one": "two",
    "two": "three",
    "three": "four",
    "four": "five",
    "five": "six",
    "six": "seven",
    "seven": "eight",
    "eight": "nine",
    "nine": "ten",
    "ten": "eleven",
    "eleven": "twelve",
    "twelve": "thirteen",
}
_EXPAND = [
    (re.compile(r"\b(can)['’]t\b", re.I), r"\1not"),
    (re.compile(r"\bwon['’]t\b", re.I), "will not"),
    (re.compile(r"n['’]t\b", re.I), " not"),
    (re.compile(r"\b(it|that|what|there|he|she)['’]s\b", re.I), r"\1 is"),
    (re.compile(r"['’]m\b", re.I), " am"),
    (re.compile(r"['’]re\b", re.I), " are"),
    (re.compile(r"['’]ve\b", re.I), " have"),
    (re.compile(r"['’]ll\b", re.I), " will"),
]
ACCEPT = ("exact", "lowercased", "apostrophes dropped", "contractions expanded")
REJECT = ("foreign turn", "shuffled", "number changed", "one word")


def exact_quote(text: str) -> str:
    """Up to 14 consecutive words of the longest sentence of ``text``, verbatim."""
    sentence = max((m.group().strip() for m in _SENTENCE.finditer(text)), key=len, default="")
    words = list(_WORD.finditer(sentence))[:14]
    return sentence[words[0].start() : words[-1].end()] if words else ""


def expand(quote: str) -> str:
    """Common contractions written out ("it's" -> "it is", "can't" -> "cannot")."""
    for pattern, replacement in _EXPAND:
        quote = pattern.sub(replacement, quote)
    return quote


def shuffled(quote: str, rng: random.Random) -> str:
    """The quote's words in another order (the same text when it has one distinct word)."""
    words = quote.split()
    if len(set(words)) < 2:
        return quote
    order = words[:]
    while order == words:
        rng.shuffle(order)
    return " ".join(order)


def number_window(text: str) -> tuple[str, str] | None:
    """(window around the first number of ``text``, the same window with the number changed)."""
    found = _NUMBER.search(text)
    if found is None:
        return None
    words = list(_WORD.finditer(text))
    at = next(n for n, w in enumerate(words) if w.end() > found.start())
    first, last = words[max(0, at - 6)], words[min(len(words) - 1, at + 6)]
    window = text[first.start() : last.end()]
    value = found.group()
    changed = str(int(value) + 1) if value.isdigit() else _NEXT[value.lower()]
    offset = found.start() - first.start()
    return window, window[:offset] + changed + window[offset + len(value) :]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="list wrong verdicts")
    args = parser.parse_args()
    samples = load_locomo(args.data)
    texts = {
        (conv.id, turn.id): turn.text
        for conv in parse_locomo(samples, str(args.data))
        for session in conv.sessions
        for turn in session.turns
    }
    keys = [
        (q.conversation, e)
        for q in locomo_questions(samples)
        if q.category in (1, 2, 3, 4)
        for e in q.evidence
        if (q.conversation, e) in texts
    ]
    keys = list(dict.fromkeys(keys))
    counts = {kind: [0, 0] for kind in (*ACCEPT, *REJECT)}  # kind -> [accepted, total]
    wrong: list[str] = []

    def check(kind: str, quote: str, source: str) -> None:
        ok = verify_quote(quote, source).verified
        counts[kind][0] += ok
        counts[kind][1] += 1
        if ok != (kind in ACCEPT):
            wrong.append(f"{kind:22} {quote!r} | {source[:100]!r}")

    variants: list[tuple[str, Callable[[str], str], bool]] = [
        ("lowercased", str.lower, False),
        ("apostrophes dropped", lambda q: re.sub("['’]", "", q), True),
        ("contractions expanded", expand, True),
    ]
    for n, key in enumerate(keys):
        text = texts[key]
        quote = exact_quote(text)
        if len(quote.split()) < 4:
            continue
        rng = random.Random(n)
        check("exact", quote, text)
        for kind, transform, needs_apostrophe in variants:
            changed = transform(quote)
            if changed != quote and (not needs_apostrophe or re.search("['’]", quote)):
                check(kind, changed, text)
        others = [k for k in keys if k[0] == key[0] and texts[k] != text]
        if others:
            check("foreign turn", quote, texts[others[rng.randrange(len(others))]])
        mixed = shuffled(quote, rng)
        if mixed != quote:
            check("shuffled", mixed, text)
        window = number_window(text)
        if window is not None:
            check("exact", window[0], text)
            check("number changed", window[1], text)
        check("one word", max(re.findall(r"\w+", quote), key=len), text)
    print(json.dumps(run_info(args.data, evidence_turns=len(keys)), indent=1))
    print(f"{'kind':24} {'accepted':>9} {'of':>5} {'share':>7}  (should be)")
    for kind, (accepted, total) in counts.items():
        share = accepted / total if total else 0.0
        should = "accepted" if kind in ACCEPT else "rejected"
        print(f"{kind:24} {accepted:9d} {total:5d} {share:7.1%}  ({should})")
    if args.verbose:
        for line in wrong:
            print("  " + line)


if __name__ == "__main__":
    main()
