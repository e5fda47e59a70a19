"""The offline LLM's BEAM judge: rubric items and event-ordering matches, by word overlap.

* ``judge.rubric``: the item's words after its "LLM response should state:" style prefix;
  1 when at least 80% of its content words occur in the response, 0.5 from 40%, else 0.
* ``judge.order``: each answer line matches the first reference item not yet matched whose
  content words occur in it at least half.

Deterministic and naive; for tests and demos, never for measuring.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from qemem.lexicon import OFFLINE_MATCH_STOPWORDS

_WORD = re.compile(r"[a-z0-9]+")
_PREFIX = re.compile(r"^\s*LLM response should \w+:\s*", re.IGNORECASE)


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in OFFLINE_MATCH_STOPWORDS}


def _share(part: str, whole: str) -> float:
    """Share of ``part``'s content words found in ``whole`` (1.0 for no content words)."""
    words = _terms(part)
    return len(words & _terms(whole)) / len(words) if words else 1.0


def rubric_item(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The score of one rubric item by word overlap."""
    if "rubric_item" not in inputs or "response" not in inputs:
        return None
    share = _share(_PREFIX.sub("", str(inputs["rubric_item"])), str(inputs["response"]))
    score = 1.0 if share >= 0.8 else 0.5 if share >= 0.4 else 0.0
    return {"score": score, "reason": f"{share:.0%} of the item's words are in the response"}


def order_matches(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """One reference number (1-based, 0 for none) per answer line."""
    if "reference" not in inputs or "lines" not in inputs:
        return None
    reference = [str(r) for r in inputs["reference"]]
    taken: set[int] = set()
    matches = []
    for line in inputs["lines"]:
        found = next(
            (n for n, r in enumerate(reference) if n not in taken and _share(r, str(line)) >= 0.5),
            None,
        )
        if found is not None:
            taken.add(found)
        matches.append(0 if found is None else found + 1)
    return {"matches": matches}
