"""Synthetic chats shaped like BEAM's: a user asking short questions and an assistant answering
at length, with paragraphs, bullet lists, numbered steps and indented code blocks, sessions a
few days apart. Deterministic from a seed; the words are made up (a Zipf-distributed vocabulary
of syllable words plus topic words per conversation), so no BEAM text is involved.

Shape: BEAM-100K messages average about 2,100 characters (both speakers) with a long tail.
Here replies are log-normal with a median of about 2,500 characters (mean about 3,300), capped
at 20,000, about 40% carry code, and user messages run one to five sentences; messages average
about 1,900 characters (about 480 tokens at 4 characters a token).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

SYLLABLES = [
    "ka", "lo", "mi", "ren", "sa", "to", "vel", "dor", "pi", "ne", "ra", "qu", "is", "an",
    "ter", "mo", "lu", "gen", "ba", "cor", "di", "fa", "hel", "jo", "nu", "ox", "pre", "sti",
]  # fmt: skip
FUNCTION_WORDS = "the a of to and in is that for it with as on be this by we you can".split()
CODE_NAMES = ["data", "items", "result", "config", "user", "value", "index", "cache", "row"]


def vocabulary(size: int, seed: int = 0) -> list[str]:
    """``size`` distinct made-up words of two to four syllables."""
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


class Writer:
    """Sentences, lists and code for one conversation (its own topic words)."""

    def __init__(self, seed: int, vocab: list[str]) -> None:
        self.rng = random.Random(seed)
        self.vocab = vocab
        self.weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf
        self.topic = self.rng.sample(vocab[200:], 40)

    def words(self, n: int) -> list[str]:
        common = self.rng.choices(self.vocab, self.weights, k=n)
        out = []
        for word in common:
            roll = self.rng.random()
            if roll < 0.25:
                out.append(self.rng.choice(FUNCTION_WORDS))
            elif roll < 0.40:
                out.append(self.rng.choice(self.topic))
            else:
                out.append(word)
        return out

    def sentence(self, low: int = 8, high: int = 22, end: str = ".") -> str:
        words = self.words(self.rng.randint(low, high))
        return " ".join(words).capitalize() + end

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(2, 5)))

    def bullets(self) -> str:
        mark = self.rng.choice(["-", "*", "1."])
        lines = [f"{mark} **{self.rng.choice(self.topic)}**: {self.sentence(5, 14)}"]
        lines += [f"{mark} {self.sentence(5, 14)}" for _ in range(self.rng.randint(2, 5))]
        return "\n".join(lines)

    def code(self) -> str:
        name = self.rng.choice(self.topic)
        lines = [f"def {name}_{self.rng.choice(CODE_NAMES)}({self.rng.choice(CODE_NAMES)}):"]
        for _ in range(self.rng.randint(3, 12)):
            indent = "    " * self.rng.randint(1, 3)
            left, right = self.rng.choice(CODE_NAMES), self.rng.choice(self.topic)
            lines.append(f"{indent}{left} = {right}({left}, {self.rng.randint(0, 99)})")
        lines.append(f"    return {self.rng.choice(CODE_NAMES)}")
        return "```python\n" + "\n".join(lines) + "\n```"

    def question(self) -> str:
        parts = [self.sentence(8, 22) for _ in range(self.rng.randint(0, 4))]
        return " ".join([*parts, self.sentence(6, 14, "?")])

    def reply(self) -> str:
        target = min(20_000, int(self.rng.lognormvariate(math.log(2500), 0.75)))
        blocks = [self.sentence()]
        with_code = self.rng.random() < 0.4
        while sum(len(b) for b in blocks) < target:
            roll = self.rng.random()
            if with_code and roll < 0.3:
                blocks.append(self.code())
            elif roll < 0.55:
                blocks.append(self.bullets())
            elif roll < 0.65:
                blocks.append(f"### {self.sentence(2, 5, '')}")
            else:
                blocks.append(self.paragraph())
        return "\n\n".join(blocks)


def chat_records(conversation: str, messages: int, seed: int) -> Iterator[dict[str, Any]]:
    """Generic-format records of one chat of ``messages`` messages (user and assistant in
    turn), sessions of 20 to 40 messages a few days apart."""
    writer = Writer(seed, vocabulary(5000))
    when = datetime(2024, 1, 1) + timedelta(days=seed)
    session, left = 0, 0
    for n in range(messages):
        if left == 0:
            session, left = session + 1, writer.rng.randint(10, 20) * 2
            when += timedelta(days=writer.rng.randint(1, 6))
        left -= 1
        when += timedelta(minutes=writer.rng.randint(1, 9))
        user = n % 2 == 0
        yield {
            "conversation_id": conversation,
            "session_id": f"s{session}",
            "timestamp": when.isoformat(),
            "speaker": "user" if user else "assistant",
            "text": writer.question() if user else writer.reply(),
        }


def probes(records: list[dict[str, Any]], count: int, seed: int) -> list[str]:
    """``count`` search queries, each six to ten words of one sentence of a random assistant
    reply (the kind of thing a user later asks about)."""
    rng = random.Random(seed)
    replies = [r["text"] for r in records if r["speaker"] == "assistant"]
    out = []
    for _ in range(count):
        sentences = [s for s in rng.choice(replies).split(". ") if len(s.split()) >= 10]
        words = rng.choice(sentences or ["nothing to ask about here at all today"]).split()
        start = rng.randint(0, max(0, len(words) - 10))
        out.append(" ".join(words[start : start + rng.randint(6, 10)]).strip("`*#:-."))
    return out
