"""Offline answerers of the audit stages (``audit.claim``, ``audit.split``, ``audit.answer``):
deterministic word-overlap judgements over the structured inputs the requests attach."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from qemem.tokens import tokenize


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


def split(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """One claim per sentence of the answer; the first is core."""
    if "answer" not in inputs:
        return None
    parts = [p.strip() for p in re.split(r"(?<=[.;!?])\s+", str(inputs["answer"])) if p.strip()]
    return {"claims": [{"text": p, "core": n == 0} for n, p in enumerate(parts)]}


def answer(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """Supported when most content words of the claim are in the passages, unverifiable when
    none is, else unsupported."""
    if "passages" not in inputs:
        return None
    share = _overlap(str(inputs["claim"]), (str(p["text"]) for p in inputs["passages"]))
    label = "supported" if share >= 0.6 else "unverifiable" if share == 0 else "unsupported"
    return {"label": label, "reason": f"{share:.0%} of the claim's words are in the passages"}
