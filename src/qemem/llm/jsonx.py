"""Robust extraction of one JSON value from model text (fences, prose around it)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _balanced_spans(text: str) -> Iterator[str]:
    """Every balanced ``{...}`` or ``[...]`` span starting at an opening bracket, in order."""
    pairs = {"{": "}", "[": "]"}
    for start, ch in enumerate(text):
        if ch not in pairs:
            continue
        stack: list[str] = []
        in_str = escaped = False
        for i in range(start, len(text)):
            c = text[i]
            if in_str:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c in pairs:
                stack.append(pairs[c])
            elif c in "}]":
                if not stack or stack.pop() != c:
                    break
                if not stack:
                    yield text[start : i + 1]
                    break


def extract_json(text: str) -> Any:
    """The first JSON object/array found in ``text``.

    Tries the whole text, then fenced code blocks, then the first balanced ``{}``/``[]`` span
    that parses. Raises ``ValueError`` when nothing parses.
    """
    stripped = text.strip()
    candidates = [stripped, *(m.strip() for m in _FENCE.findall(text))]
    for cand in candidates:
        try:
            value = json.loads(cand)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict | list):
            return value
    for cand in candidates:
        for span in _balanced_spans(cand):
            try:
                return json.loads(span)
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON object or array found in the model output")
