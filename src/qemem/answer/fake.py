"""Offline behaviour of the fake LLM for the ``construct`` and ``answer`` stages.

Registered when ``qemem.answer`` is imported, so ``LLMClient(FakeLLM())`` runs the whole
method offline with meaningful (if naive) output. Deterministic; not for measuring anything.
Requests of these stages that do not carry our own system prompt get the generic fake output.

* construct: the pool turns sharing the most words with the question and the need (at most
  three, only turns sharing at least one), one card each quoting (at most twenty words of) the
  turn's sentence sharing the most words; sufficient.
* answer: the first card's quote (else its claim; with no cards, the best sentence of the turn
  sharing the most words with the question), ending with ``FINAL ANSWER: <that>``.
"""

from __future__ import annotations

import re
from typing import Any

from qemem.lexicon import OFFLINE_MATCH_STOPWORDS
from qemem.llm import LLMRequest, fake_instance, register_fake_responder
from qemem.llm.fake import fake_text
from qemem.prompts import render

_ASKED = re.compile(r"^(?:Question|Information needed):\s*(.*)$", re.MULTILINE)
_TURN = re.compile(r"^\*?\[(?P<id>[^\]]+)\] (?P<speaker>[^:(\n][^:\n]*): (?P<text>.+)$", re.M)
_CARD = re.compile(r"^\[1\] (?P<claim>.+)$", re.MULTILINE)
_QUOTE = re.compile(r'^\s+quote: "(?P<quote>.*)" \(', re.MULTILINE)
_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
QUOTE_WORDS = 20


def _terms(text: str) -> set[str]:
    return {
        w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in OFFLINE_MATCH_STOPWORDS
    }


def _opening(text: str) -> str:
    return " ".join(text.split()[:QUOTE_WORDS])


def _asked(prompt: str) -> set[str]:
    return _terms(" ".join(m.group(1) for m in _ASKED.finditer(prompt)))


def _best_sentence(text: str, terms: set[str]) -> str:
    """The opening words of the sentence of ``text`` sharing the most words with ``terms``."""
    sentences = [s for s in _SENTENCE.split(text) if s.strip()] or [text]
    best = max(sentences, key=lambda s: len(terms & _terms(s)))
    return _opening(best)


def _best_turns(prompt: str, limit: int) -> list[re.Match[str]]:
    """The prompt's turn lines sharing the most words with its question and need lines."""
    terms = _asked(prompt)
    scored = []
    for n, m in enumerate(_TURN.finditer(prompt)):
        overlap = len(terms & _terms(m.group("text")))
        if overlap:
            scored.append((-overlap, n, m))
    return [m for _, _, m in sorted(scored, key=lambda s: (s[0], s[1]))[:limit]]


def _generic(request: LLMRequest) -> Any:
    """What the fake LLM answers when no responder is registered."""
    if request.schema is not None:
        return fake_instance(request.schema, request.prompt_text)
    return fake_text(request)


def fake_construct(request: LLMRequest) -> Any:
    """Cards for the pool turns with the most word overlap with the question and need."""
    if request.system != render("construct"):
        return _generic(request)
    prompt = request.messages[-1].content if request.messages else ""
    terms = _asked(prompt)
    cards = [
        {
            "claim": f"{m.group('speaker')} said: {_best_sentence(m.group('text'), terms)}",
            "sources": [m.group("id")],
            "quote": _best_sentence(m.group("text"), terms),
            "time": "",
            "relation": "answer candidate",
        }
        for m in _best_turns(prompt, 3)
    ]
    return {"cards": cards, "sufficient": True, "missing": "", "follow_up_queries": []}


def fake_answer(request: LLMRequest) -> Any:
    """A short answer from the first card (or the best-matching memory turn)."""
    if request.system != render("answer"):
        return _generic(request)
    prompt = request.messages[-1].content if request.messages else ""
    quote, card, turns = _QUOTE.search(prompt), _CARD.search(prompt), _best_turns(prompt, 1)
    if quote and quote.group("quote").strip():
        answer = quote.group("quote").strip()
    elif card:
        answer = card.group("claim").strip()
    elif turns:
        answer = _best_sentence(turns[0].group("text"), _asked(prompt))
    else:
        answer = "no information"
    return f"From the evidence shown: {answer}\nFINAL ANSWER: {answer}"


register_fake_responder("construct", fake_construct)
register_fake_responder("answer", fake_answer)
