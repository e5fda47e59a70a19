"""The standing instructions and preferences a request is answered under: a short section of
the ``context`` block and of the answer prompt.

The section holds the conversation's current facts of kind ``instruction`` or ``preference``
(no supersession replaces them), one line each with its id, kind and the date of the session it
was learned in. When they do not all fit the section's token limit, those the question's
retrieval ranked among its facts go in first (the pool's order: dense and BM25 fused), then
those sharing the most search words with the question (ties: the newer first); the section
lists the chosen ones in conversation order. Tokens are estimated as characters / 4.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from qemem.evidence.context import SourceIndex
from qemem.lexicon import day_phrase
from qemem.llm.types import estimate_tokens
from qemem.models import SemanticFact
from qemem.prompts import as_data, render
from qemem.store.base import record_order
from qemem.tokens import tokenize

STANDING_SHARE = 0.25
"""The most of a ``context`` budget the section may take."""
STANDING_TOKENS = 600
"""The most tokens the answer prompt's section may take (``AskConfig.standing_tokens``)."""


@dataclass(frozen=True)
class StandingSection:
    """The section: the facts it shows (conversation order), its text ("" without any), its
    estimated tokens and how many current standing facts did not fit."""

    facts: list[SemanticFact] = field(default_factory=list)
    text: str = ""
    tokens: int = 0
    left_out: int = 0


def current_standing(index: SourceIndex) -> list[SemanticFact]:
    """The conversation's standing facts that no supersession replaces, in fact order."""
    return [f for f in index.facts if f.standing and f.id not in index.superseded]


def standing_line(index: SourceIndex, fact: SemanticFact) -> str:
    """One fact as the section shows it: ``[S3] instruction (14 March 2024): ...``."""
    said = day_phrase(index.session_date(fact))
    return f"[{fact.id}] {fact.kind} ({said}): {as_data(fact.content)}"


def _relevance(
    question: str, facts: Sequence[SemanticFact], ranked: Sequence[str]
) -> list[SemanticFact]:
    """``facts`` in the order of ``ranked`` (fact ids, best first), then by the search words
    they share with ``question`` (most first; ties: the newer first)."""
    words = set(tokenize(question))
    order = {f.id: n for n, f in enumerate(facts)}
    place = {fid: n for n, fid in enumerate(ranked)}

    def key(fact: SemanticFact) -> tuple[int, int, int]:
        shared = len(words & set(tokenize(fact.content)))
        return place.get(fact.id, len(place)), -shared, -order[fact.id]

    return sorted(facts, key=key)


def standing_section(
    index: SourceIndex, question: str, limit: int, ranked: Sequence[str] = ()
) -> StandingSection:
    """The section for ``question`` within ``limit`` tokens, ``ranked`` the fact ids the
    question's retrieval ranked, best first (see the module doc)."""
    candidates = current_standing(index)
    if not candidates or limit <= 0:
        return StandingSection(left_out=len(candidates))
    user = index.participants.user
    spent = estimate_tokens(render("standing", user=user, items=""))
    chosen: list[SemanticFact] = []
    for fact in _relevance(question, candidates, ranked):
        cost = estimate_tokens(standing_line(index, fact) + "\n")
        if spent + cost <= limit:
            chosen.append(fact)
            spent += cost
    if not chosen:
        return StandingSection(left_out=len(candidates))
    chosen.sort(key=lambda f: (f.session, record_order(f.id)))
    items = "\n".join(standing_line(index, f) for f in chosen)
    text = render("standing", user=user, items=items)
    return StandingSection(chosen, text, estimate_tokens(text), len(candidates) - len(chosen))
