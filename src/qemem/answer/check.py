"""``check``: is a statement supported by what was said? The claim audit as a feature.

Any text (an answer another model wrote, an extracted fact, a summary) is split into claims
(one ``check.split`` call); each claim gets its candidate turns from the conversation by the
same hybrid search as ``Memory.search`` (dense + BM25, RRF) and one judge call
(``check.claim``) that labels it ``supported``, ``unsupported``, ``contradicted`` or
``unverifiable`` and cites the turns that support or contradict it, each with a verbatim quote.
Every quote is verified against its cited turn (:func:`~qemem.evidence.quotes.best_quote_match`);
a cited id that names no turn shown to the judge is recorded as unknown, never trusted.

One judge call per claim rather than one for all: each claim is shown the turns retrieved for
it (a shared prompt would show every claim every claim's turns, or too few of them), a weak
model labels one claim more reliably than a list, and each call is cached on its own, so the
same claim in another text replays for free.

The claim models, the split and the passage lines are shared with the answer audit
(:mod:`qemem.eval.audit.answers`): one implementation.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic

from qemem.answer.ask import Trace
from qemem.embed.base import Embedder
from qemem.errors import StructuredOutputError
from qemem.evidence.context import clean_id, show_date
from qemem.evidence.quotes import best_quote_match
from qemem.llm import Ledger, LLMClient, LLMRequest
from qemem.llm.prompted import prompted_request
from qemem.llm.stages import CHECK_CLAIM, CHECK_SPLIT
from qemem.models import Span, Turn
from qemem.passages import excerpt
from qemem.prompts import as_data, as_lines
from qemem.retrieve.search import hybrid_search
from qemem.store.base import MemoryStore, Scope

CANDIDATES = 8
"""Turns retrieved for each claim and shown to its judge."""

Label = Literal["supported", "unsupported", "contradicted", "unverifiable"]
Stance = Literal["supports", "contradicts"]


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


class Claim(pydantic.BaseModel):
    text: str
    core: bool = True


class Split(pydantic.BaseModel):
    claims: list[Claim] = []


class ClaimLabel(pydantic.BaseModel):
    label: Label
    reason: str = ""

    @pydantic.field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: Any) -> Any:
        return _lower(value)


class CitedTurn(pydantic.BaseModel):
    turn: str
    stance: Stance = "supports"
    quote: str = ""

    @pydantic.field_validator("stance", mode="before")
    @classmethod
    def _stance(cls, value: Any) -> Any:
        return _lower(value)


class CheckLabel(ClaimLabel):
    """The check judge's output: a label with the turns it rests on."""

    evidence: list[CitedTurn] = []


def passage_lines(passages: Sequence[Mapping[str, str]]) -> str:
    """Passages (id, date, speaker, text) as judge prompts show them, one per record (a text
    of several lines on continuation lines)."""
    lines = [
        f"[{p['id']}] ({p['date'] or 'undated'}) {p['speaker']}:{as_lines(p['text'])}"
        for p in passages
    ]
    return "\n".join(lines) or "(none)"


def split_claims(
    llm: LLMClient, request: LLMRequest, text: str, ledger: Ledger | None = None
) -> tuple[list[Claim], str | None]:
    """The claims ``request`` splits ``text`` into, and None; when the output does not
    validate, the whole text as one core claim and the degradation."""
    try:
        return llm.structured(request, Split, ledger=ledger).value.claims, None
    except StructuredOutputError as exc:
        return [Claim(text=text, core=True)], f"the split fell back to the whole text: {exc}"


@dataclass(frozen=True)
class Citation:
    """A turn the judge cited, with its stance and quote; ``verified`` when the quote is
    really in that turn (``score``: :func:`~qemem.evidence.quotes.verify_quote`'s)."""

    turn: str
    stance: Stance
    quote: str
    verified: bool
    score: float


@dataclass
class CheckedClaim:
    """One claim of the statement with its label, the judge's reason, its citations, the
    turns the judge was shown (``candidates``) and the cited ids that named none of them."""

    text: str
    core: bool
    label: Label
    reason: str
    citations: list[Citation] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def turns(self, stance: Stance = "supports") -> list[str]:
        """The cited turns of one stance whose quotes verified."""
        return [c.turn for c in self.citations if c.stance == stance and c.verified]


@dataclass
class CheckResult:
    """The claims of ``text`` checked against ``conversation``; ``degradations`` says which
    LLM outputs did not validate (their claims read ``unverifiable``), ``trace`` the calls."""

    conversation: str
    text: str
    claims: list[CheckedClaim]
    degradations: list[str] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)


def split_request(text: str) -> LLMRequest:
    """Split a statement into factual claims."""
    inputs = {"text": text}
    return prompted_request(
        "check_split", CHECK_SPLIT, Split, "claims", inputs, max_tokens=1024, text=as_data(text)
    )


def judge_request(claim: str, passages: Sequence[Mapping[str, str]]) -> LLMRequest:
    """Label one claim against the turns shown, citing those that support or contradict it."""
    return prompted_request(
        "check_claim",
        CHECK_CLAIM,
        CheckLabel,
        "checked_claim",
        {"claim": claim, "passages": [dict(p) for p in passages]},
        max_tokens=1024,
        claim=as_data(claim),
        passages=passage_lines(passages),
    )


def _passage(turn: Turn, span: Span | None, dates: Mapping[int, Any]) -> dict[str, str]:
    """A candidate turn as the judge reads it: of a long turn, the passage that matched."""
    date = dates.get(turn.session, turn.timestamp)
    text = excerpt(turn.text, None if span is None else [span])
    return {"id": turn.id, "speaker": turn.speaker, "date": show_date(date), "text": text}


def _cite(label: CheckLabel, shown: Mapping[str, Turn]) -> tuple[list[Citation], list[str]]:
    """The judge's citations with their quotes verified, and the ids that name no shown turn."""
    citations: list[Citation] = []
    unknown: list[str] = []
    for cited in label.evidence:
        turn = shown.get(cited.turn.strip()) or shown.get(clean_id(cited.turn))
        if turn is None:
            unknown.append(cited.turn)
            continue
        _, found = best_quote_match(
            cited.quote, {turn.id: turn.text}, speakers={turn.id: turn.speaker}
        )
        citations.append(Citation(turn.id, cited.stance, cited.quote, found.verified, found.score))
    return citations, unknown


def _check_claim(
    llm: LLMClient,
    claim: Claim,
    turns: Sequence[tuple[Turn, Span | None]],
    dates: Mapping[int, Any],
    ledger: Ledger,
) -> tuple[CheckedClaim, str | None]:
    """One claim judged against its candidate turns (of a long turn, the passage that
    matched; quotes are verified against the whole turn), and the degradation if any."""
    shown = {t.id: t for t, _ in turns}
    request = judge_request(claim.text, [_passage(t, span, dates) for t, span in turns])
    checked = CheckedClaim(claim.text, claim.core, "unverifiable", "", candidates=list(shown))
    try:
        label = llm.structured(request, CheckLabel, ledger=ledger).value
    except StructuredOutputError as exc:
        checked.reason = "the judge's output did not validate"
        return checked, f"claim {claim.text!r}: {exc}"
    checked.label, checked.reason = label.label, label.reason
    checked.citations, checked.unknown = _cite(label, shown)
    return checked, None


def check_statement(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    llm: LLMClient,
    text: str,
    *,
    candidates: int = CANDIDATES,
) -> CheckResult:
    """Check the claims of ``text`` against the turns of ``scope`` (NotFoundError for an
    unknown conversation); see the module doc."""
    started = time.perf_counter()
    conversation = store.get_conversation(scope)
    dates = {s.index: s.date_time for s in conversation.sessions}
    ledger = Ledger()
    claims, degraded = split_claims(llm, split_request(text), text, ledger)
    result = CheckResult(scope.conversation, text, [], [degraded] if degraded else [])
    for claim in claims:
        hits = hybrid_search(store, scope, "turn", [claim.text], embedder, k=candidates)
        found = {t.id: t for t in store.turns(scope, [h.id for h in hits])}
        turns = [(found[h.id], h.span) for h in hits if h.id in found]
        checked, problem = _check_claim(llm, claim, turns, dates, ledger)
        result.claims.append(checked)
        if problem:
            result.degradations.append(problem)
    result.trace.record(ledger, started)
    return result


__all__ = [
    "CheckLabel",
    "CheckResult",
    "CheckedClaim",
    "Citation",
    "CitedTurn",
    "Claim",
    "ClaimLabel",
    "Split",
    "check_statement",
    "judge_request",
    "passage_lines",
    "split_claims",
    "split_request",
]
