"""The offline LLM's query-time answers: ``plan``, ``construct``, ``answer``, ``respond`` and
``judge``.

Each reads the structured inputs its stage attaches to the request (``LLMRequest.inputs``),
never the prompt text, and returns None when the inputs it needs are missing (the request then
gets the generic answer). Deterministic and naive; for tests and demos, never for measuring.

* plan: the rule flags of the question and four queries from its own words: the question
  without its question word, its content words, each capitalised name with the other content
  words, and a first-person paraphrase ("I <content words>").
* construct: the shown memories that read ``who: what`` sharing the most words with the
  question and the need (at most three, only those sharing at least one), one card each
  quoting (at most twenty words of) the sentence sharing the most words; sufficient when the
  cards' memories share at least half of the question's content words, else insufficient,
  missing (and asking a follow-up query for) the question words they lack.
* answer: the first card's quote (else its claim; with no cards, the best sentence of the
  shown memory sharing the most words with the question), ending with ``FINAL ANSWER: <that>``.
* respond: a reply naming the standing instructions and preferences it follows (by id), then
  the quotes of the first three cards with their first source in brackets (with no cards, the
  best-matching shown memory), or, with nothing that shares a word with the request, that
  there is no record of it in the conversation.
* judge: CORRECT when ``f1_common(prediction, gold) >= 0.5`` or the gold occurs in the
  prediction (case-insensitive), else WRONG.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from qemem.eval.metrics import f1_common
from qemem.lexicon import OFFLINE_MATCH_STOPWORDS, OFFLINE_PLAN_STOPWORDS
from qemem.models import Episode, SemanticFact, Turn
from qemem.prompts import as_data
from qemem.retrieve.query_rules import rule_flags

QUOTE_WORDS = 20
CONSTRUCT_CARDS = 3

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SAID = re.compile(r"^(?P<speaker>[^:(\n][^:\n]*): (?P<text>.+)$")
_WH = re.compile(
    r"^\s*(what|when|where|who|whom|which|why|how( many| often| long)?|did|does|do|"
    r"is|are|was|were|has|have|would|could|will)\b\s*",
    re.IGNORECASE,
)
_PLAN_WORD = re.compile(r"[A-Za-z0-9']+")


def plan(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """A schema-valid plan built from the question's own words."""
    question = str(inputs.get("question", "")).strip()
    if not question:
        return None
    answer_type, aggregate, temporal = rule_flags(question)
    words = [
        w for w in _PLAN_WORD.findall(question) if w.lower() not in OFFLINE_PLAN_STOPWORDS
    ] or [question]
    names = [w for w in words if w[:1].isupper()] or words[:1]
    plain = [w for w in words if w not in names] or words
    queries = [
        _WH.sub("", question).rstrip("?") or question,
        " ".join(words),
        *(f"{name} {' '.join(plain)}" for name in names[:2]),
        "I " + " ".join(w.lower() for w in plain),
    ]
    while len(queries) < 4:
        queries.append(" ".join(reversed(words)))
    return {
        "need": f"What the conversation says about: {question}",
        "answer_type": answer_type,
        "aggregate": aggregate,
        "temporal": temporal,
        "queries": queries[:6],
    }


def _terms(text: str) -> set[str]:
    return {
        w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in OFFLINE_MATCH_STOPWORDS
    }


def _best_sentence(text: str, terms: set[str]) -> str:
    """The opening words of the sentence of ``text`` sharing the most words with ``terms``."""
    sentences = [s for s in _SENTENCE.split(text) if s.strip()] or [text]
    best = max(sentences, key=lambda s: len(terms & _terms(s)))
    return " ".join(best.split()[:QUOTE_WORDS])


def shown_lines(inputs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(id, line)`` of the memories in ``inputs`` (``episodes``, ``facts``, ``turns`` in
    conversation order) in the order and one-line form a memory listing shows them: episodes,
    then facts, then turns, each grouped by session; an episode whose turns are all among the
    turns shows its title only."""
    episodes: Sequence[Episode] = inputs.get("episodes", ())
    facts: Sequence[SemanticFact] = inputs.get("facts", ())
    turns: Sequence[Turn] = inputs.get("turns", ())
    visible = {t.id for t in turns}
    lines: list[tuple[str, str]] = []
    for ep in sorted(episodes, key=lambda e: e.session):
        hidden = bool(ep.turn_ids) and visible.issuperset(ep.turn_ids)
        tail = " (its turns are shown)" if hidden else f": {as_data(ep.content)}"
        lines.append((ep.id, as_data(ep.title) + tail))
    lines.extend((f.id, as_data(f.content)) for f in sorted(facts, key=lambda f: f.session))
    lines.extend(
        (t.id, f"{as_data(t.speaker)}: {as_data(t.text)}")
        for t in sorted(turns, key=lambda t: t.session)
    )
    return lines


def best_said(inputs: Mapping[str, Any], terms: set[str], limit: int) -> list[tuple[str, str, str]]:
    """``(id, who, what)`` of the shown memories reading ``who: what`` that share the most
    words with ``terms`` (at least one), best first, ties in the order shown."""
    scored = []
    for n, (rid, line) in enumerate(shown_lines(inputs)):
        said = _SAID.match(line)
        if said is None:
            continue
        overlap = len(terms & _terms(said["text"]))
        if overlap:
            scored.append((-overlap, n, (rid, said["speaker"], said["text"])))
    return [found for _, _, found in sorted(scored, key=lambda s: (s[0], s[1]))[:limit]]


def construct(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """Cards for the shown memories with the most word overlap with the question and need;
    insufficient (asking for the missing words) when they cover under half the question's."""
    if "question" not in inputs:
        return None
    terms = _terms(f"{inputs['question']} {inputs.get('need', '')}")
    found = best_said(inputs, terms, CONSTRUCT_CARDS)
    cards = [
        {
            "claim": f"{who} said: {_best_sentence(what, terms)}",
            "sources": [rid],
            "quote": _best_sentence(what, terms),
            "time": "",
            "relation": "answer candidate",
        }
        for rid, who, what in found
    ]
    wanted = _terms(str(inputs["question"]))
    covered = set().union(*(_terms(what) for _, _, what in found)) & wanted
    if found and 2 * len(covered) >= len(wanted):
        return {"cards": cards, "sufficient": True, "missing": "", "follow_up_queries": []}
    missing = " ".join(sorted(wanted - covered)) or str(inputs["question"])
    return {"cards": cards, "sufficient": False, "missing": missing, "follow_up_queries": [missing]}


def answer(inputs: Mapping[str, Any]) -> str | None:
    """A short answer from the first card (or the best-matching shown memory), after a line
    of reasoning, on a ``FINAL ANSWER:`` line."""
    text = short_answer(inputs)
    return None if text is None else f"From the evidence shown: {text}\nFINAL ANSWER: {text}"


def short_answer(inputs: Mapping[str, Any]) -> str | None:
    """The short answer alone (the first card's quote or claim, else the opening words of the
    best-matching shown ``who: what`` memory, else "no information"), as a prompt that asks
    for the answer only (``answer.nemori``) gets it."""
    if "question" not in inputs:
        return None
    terms = _terms(str(inputs["question"]))
    cards: Sequence[Any] = inputs.get("cards", ())
    quote = as_data(cards[0].quote) if cards else ""
    claim = as_data(cards[0].claim) if cards else ""
    best = [] if cards else best_said(inputs, terms, 1)
    if quote:
        text = quote
    elif claim:
        text = claim
    elif best:
        text = _best_sentence(best[0][2], terms)
    else:
        text = "no information"
    return text


NO_RECORD = "I have no record of that in our conversation."


def respond(inputs: Mapping[str, Any]) -> str | None:
    """The assistant's reply (see the module docstring)."""
    if "question" not in inputs:
        return None
    lines = []
    standing: Sequence[SemanticFact] = inputs.get("standing", ())
    if standing:
        ids = ", ".join(f"[{fact.id}]" for fact in standing)
        lines.append(f"Following your standing instructions and preferences {ids}:")
    cards: Sequence[Any] = inputs.get("cards", ())
    if cards:
        lines += [
            f"- {as_data(c.quote or c.claim)} [{c.sources[0]}]" for c in cards[:3] if c.sources
        ]
    else:
        best = best_said(inputs, _terms(str(inputs["question"])), 1)
        if best:
            rid, who, what = best[0]
            lines.append(
                f"- {who}: {_best_sentence(what, _terms(str(inputs['question'])))} [{rid}]"
            )
    if len(lines) == (1 if standing else 0):
        lines.append(NO_RECORD)
    return "\n".join(lines)


def judge(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verdict of the word-overlap rule (see the module docstring)."""
    if "gold" not in inputs or "prediction" not in inputs:
        return None
    gold, prediction = str(inputs["gold"]).strip(), str(inputs["prediction"]).strip()
    contained = bool(gold) and gold.lower() in prediction.lower()
    correct = contained or f1_common(prediction, gold) >= 0.5
    return {"label": "CORRECT" if correct else "WRONG"}
