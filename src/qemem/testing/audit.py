"""Offline answerers of the audit stages (``audit.claim``, ``audit.split``, ``audit.answer``,
``audit.memory``) and of ``check`` (``check.split``, ``check.claim``): deterministic
word-overlap judgements over the structured inputs the requests attach."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from qemem.tokens import tokenize

_SENTENCE_END = re.compile(r"(?<=[.;!?])\s+")
_NEGATION = re.compile(r"\b(?:not|never|no|none|nothing|nobody|cannot)\b|n[’']t\b", re.IGNORECASE)


def _overlap(claim: str, texts: Iterable[str]) -> float:
    """Share of the claim's stemmed content words found in ``texts``."""
    wanted = set(tokenize(claim))
    if not wanted:
        return 0.0
    found = {t for text in texts for t in tokenize(text)}
    return len(wanted & found) / len(wanted)


def claim(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """Fully supported when every content word of the claim is in its sources, partially
    when half are, else unsupported."""
    if "claim" not in inputs:
        return None
    share = _overlap(str(inputs["claim"]), (str(s["text"]) for s in inputs.get("sources", [])))
    label = (
        "fully supported"
        if share == 1.0
        else "partially supported"
        if share >= 0.5
        else "unsupported"
    )
    return {"label": label, "reason": f"{share:.0%} of the claim's words are in its sources"}


def _sentences(text: str) -> list[str]:
    return [p.strip() for p in _SENTENCE_END.split(text) if p.strip()]


def split(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """One claim per sentence of the answer (``audit.split``) or of the text (``check.split``);
    the first is core."""
    text = inputs.get("answer", inputs.get("text"))
    if text is None:
        return None
    return {"claims": [{"text": p, "core": n == 0} for n, p in enumerate(_sentences(str(text)))]}


def answer(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """Supported when most content words of the claim are in the passages, unverifiable when
    none is, else unsupported."""
    if "passages" not in inputs:
        return None
    share = _overlap(str(inputs["claim"]), (str(p["text"]) for p in inputs["passages"]))
    label = "supported" if share >= 0.6 else "unverifiable" if share == 0 else "unsupported"
    return {"label": label, "reason": f"{share:.0%} of the claim's words are in the passages"}


def check(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """Cite the passage sharing most of the claim's content words (the speaker counts), with
    its best-matching sentence as the quote: supported when it holds at least 60% of them,
    contradicted when, besides, exactly one of claim and quote is negated; unsupported below
    60%, unverifiable when no word is shared."""
    if "passages" not in inputs:
        return None
    claim = str(inputs["claim"])
    scored = [(_overlap(claim, [f"{p['speaker']} {p['text']}"]), p) for p in inputs["passages"]]
    share, best = max(scored, key=lambda sp: sp[0], default=(0.0, None))
    reason = f"{share:.0%} of the claim's words are in the best turn"
    if best is None or share < 0.6:
        return {"label": "unverifiable" if share == 0 else "unsupported", "reason": reason}
    sentences = _sentences(str(best["text"])) or [str(best["text"])]
    quote = max(sentences, key=lambda s: _overlap(claim, [s]))
    negated = bool(_NEGATION.search(claim)) != bool(_NEGATION.search(quote))
    return {
        "label": "contradicted" if negated else "supported",
        "reason": reason,
        "evidence": [
            {"turn": best["id"], "stance": "contradicts" if negated else "supports", "quote": quote}
        ],
    }


def memory(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The memory audit's judge (``audit.memory``): supported when every content word of the
    statement is in the passages, partially when at least half are, else unsupported; but
    contradicted when at least 60% are and exactly one of the statement and the passages'
    sentence sharing most of its words is negated."""
    if "statement" not in inputs:
        return None
    statement = str(inputs["statement"])
    texts = [f"{p['speaker']} {p['text']}" for p in inputs.get("passages", [])]
    share = _overlap(statement, texts)
    sentences = [s for t in texts for s in _sentences(t)]
    best = max(sentences, key=lambda s: _overlap(statement, [s]), default="")
    negated = bool(_NEGATION.search(statement)) != bool(_NEGATION.search(best))
    reason = f"{share:.0%} of the statement's words are in the messages"
    if share >= 0.6 and negated:
        return {"label": "contradicted", "reason": reason}
    label = (
        "supported" if share == 1.0 else "partially supported" if share >= 0.5 else "unsupported"
    )
    return {"label": label, "reason": reason}
