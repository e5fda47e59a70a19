"""Offline behaviour of the fake LLM for the ``plan`` stage (registered on import).

The fake planner keeps the rule flags and writes four queries from the question itself: the
question without its question words, its content words, each capitalised name with the content
words, and a first-person paraphrase ("I <content words>"). Deterministic; for offline demos and
tests, never for measuring anything. Requests without our planner's system prompt get the
generic fake output.
"""

from __future__ import annotations

import re
from typing import Any

from qemem.lexicon import OFFLINE_PLAN_STOPWORDS
from qemem.llm import LLMRequest, fake_instance, register_fake_responder
from qemem.llm.fake import fake_text
from qemem.retrieve.plan import PLAN_SYSTEM
from qemem.retrieve.query_rules import rule_flags

_QUESTION = re.compile(r"^Question:\s*(.+)$", re.MULTILINE)
_WH = re.compile(
    r"^\s*(what|when|where|who|whom|which|why|how( many| often| long)?|did|does|do|"
    r"is|are|was|were|has|have|would|could|will)\b\s*",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z0-9']+")


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in OFFLINE_PLAN_STOPWORDS]


def fake_plan(request: LLMRequest) -> Any:
    """A schema-valid plan built from the question's own words."""
    found = _QUESTION.search(request.prompt_text)
    if request.system != PLAN_SYSTEM or found is None:
        if request.schema is not None:
            return fake_instance(request.schema, request.prompt_text)
        return fake_text(request)
    question = found.group(1).strip()
    answer_type, aggregate, temporal = rule_flags(question)
    words = _content_words(question) or [question]
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


register_fake_responder("plan", fake_plan)
