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
  all of these should be rejected. Short quotes, from the turn's first sentence of 3 to 6 words
  with fewer than two content words but one that is not a reply formula's ("Do you recycle at
  all?"):
* short verbatim: that sentence, copied; should be accepted;
* short, word dropped / short, shuffled / short, foreign turn: that sentence with an inner word
  dropped, in another word order, or checked against another evidence turn; and
* function words: the turn's first run of three function or reply-formula words ("and it
  was"), copied; all of these should be rejected.

Every quote is checked twice, in one run: ``before`` is the rule before issue 20 (two content
words, verbatim or not), ``after`` the library's rule (``verbatim_evidence``).

    python benchmarks/quote_acceptance.py --data locomo10.json [--json]
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
from qemem.lexicon import FUNCTION_WORDS, REPLY_WORDS

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
ACCEPT = ("exact", "lowercased", "apostrophes dropped", "contractions expanded", "short verbatim")
REJECT = (
    "foreign turn",
    "shuffled",
    "number changed",
    "one word",
    "short, word dropped",
    "short, shuffled",
    "short, foreign turn",
    "function words",
)
_VARIANTS: list[tuple[str, Callable[[str], str], bool]] = [
    ("lowercased", str.lower, False),
    ("apostrophes dropped", lambda q: re.sub("['’]", "", q), True),
    ("contractions expanded", lambda q: expand(q), True),
]


def before(quote: str, source: str) -> bool:
    """The verdict of the rule before issue 20: at least two content words, verbatim or not."""
    return verify_quote(quote, source, min_verbatim_words=None).verified


def after(quote: str, source: str) -> bool:
    """The library's verdict: a verbatim span of three words, one a content word, also passes."""
    return verify_quote(quote, source).verified


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


def _plain(words: list[str]) -> list[str]:
    """Words lowercased, contractions written out, apostrophes and punctuation dropped."""
    return re.findall(r"[^\W_]+", re.sub("['’]", "", expand(" ".join(words)).lower()))


def short_sentence(text: str) -> str | None:
    """The first sentence of ``text`` of 3 to 6 words with fewer than two content words, one of
    them not a reply formula's ("Do you recycle at all?")."""
    for match in _SENTENCE.finditer(text):
        words = match.group().split()
        content = [w for w in _plain(words) if w not in FUNCTION_WORDS]
        if 3 <= len(words) <= 6 and len(content) < 2 and set(content) - REPLY_WORDS:
            return match.group().strip()
    return None


def function_run(text: str) -> str | None:
    """The first three consecutive words of ``text`` that are all function or reply-formula
    words ("and it was"), as written."""
    words = text.split()
    for at in range(len(words) - 2):
        plain = _plain(words[at : at + 3])
        if plain and all(w in FUNCTION_WORDS or w in REPLY_WORDS for w in plain):
            return " ".join(words[at : at + 3])
    return None


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


def quotes_of(text: str, other: str | None, rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, quote, source) of every quote built from one evidence turn (``other``: the text
    of another evidence turn of its conversation)."""
    found: list[tuple[str, str, str]] = []
    quote = exact_quote(text)
    if len(quote.split()) >= 4:
        found.append(("exact", quote, text))
        for kind, transform, needs_apostrophe in _VARIANTS:
            changed = transform(quote)
            if changed != quote and (not needs_apostrophe or re.search("['’]", quote)):
                found.append((kind, changed, text))
        if other is not None:
            found.append(("foreign turn", quote, other))
        if (mixed := shuffled(quote, rng)) != quote:
            found.append(("shuffled", mixed, text))
        if (window := number_window(text)) is not None:
            found += [("exact", window[0], text), ("number changed", window[1], text)]
        found.append(("one word", max(re.findall(r"\w+", quote), key=len), text))
    if (short := short_sentence(text)) is not None:
        words = short.split()
        found.append(("short verbatim", short, text))
        if len(words) >= 4:
            dropped = words[: len(words) // 2] + words[len(words) // 2 + 1 :]
            found.append(("short, word dropped", " ".join(dropped), text))
        if (mixed := shuffled(short, rng)) != short:
            found.append(("short, shuffled", mixed, text))
        if other is not None:
            found.append(("short, foreign turn", short, other))
    if (run := function_run(text)) is not None:
        found.append(("function words", run, text))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="list wrong verdicts")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
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
    counts = {kind: [0, 0, 0] for kind in (*ACCEPT, *REJECT)}  # kind -> [before, after, total]
    wrong: list[str] = []
    for n, key in enumerate(keys):
        rng = random.Random(n)
        others = [k for k in keys if k[0] == key[0] and texts[k] != texts[key]]
        other = texts[others[rng.randrange(len(others))]] if others else None
        for kind, quote, source in quotes_of(texts[key], other, rng):
            old, new = before(quote, source), after(quote, source)
            counts[kind][0] += old
            counts[kind][1] += new
            counts[kind][2] += 1
            if new != (kind in ACCEPT):
                wrong.append(f"{kind:22} {quote!r} | {source[:100]!r}")
    print(json.dumps(run_info(args.data, evidence_turns=len(keys)), indent=1))
    print(f"{'kind':24} {'quotes':>6} {'before':>7} {'after':>7}  (should be)")
    for kind, (old, new, total) in counts.items():
        should = "accepted" if kind in ACCEPT else "rejected"
        shares = [f"{x / total if total else 0.0:7.1%}" for x in (old, new)]
        print(f"{kind:24} {total:6d} {shares[0]} {shares[1]}  ({should})")
    if args.verbose:
        for line in wrong:
            print("  " + line)
    if args.json:
        accepted = {
            kind: round(new / total, 4) if total else None
            for kind, (_, new, total) in counts.items()
        }
        print(
            json.dumps(
                {
                    "evidence_turns": len(keys),
                    "quotes": sum(c[2] for c in counts.values()),
                    "accepted": accepted,
                }
            )
        )


if __name__ == "__main__":
    main()
