"""ViewCards: the evidence constructor (one structured LLM call) and deterministic verification.

The constructor reads a formatted pool and the plan's need and returns cards (claim, sources,
quote, time, relation) plus a sufficiency verdict. Verification needs no LLM: a card is
*verified* when its quote matches the text of at least one cited source (``best_check``);
unverified cards are kept and marked; cited ids that name nothing are recorded. Each card's
time is resolved deterministically (``card_time``: the relative expression inside the quote,
else one of a cited turn's that the model's own ``time`` agrees with, else the session date,
marked as such) and compared with the model's ``time`` as periods, not phrasings
(``time_agrees``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import pydantic

from qemem.errors import StructuredOutputError
from qemem.evidence.agreement import time_agrees
from qemem.evidence.card_time import (
    CitedText,
    TimeBasis,
    card_time,
    shown_time,
)
from qemem.evidence.context import FoundRecord, SourceIndex, clean_id, format_pool, pool_records
from qemem.evidence.layout import SharedPrefix
from qemem.evidence.quotes import DEFAULT_THRESHOLD, QuoteCheck, best_check, quote_checks
from qemem.evidence.times import TimeResolution
from qemem.llm import Ledger, LLMClient, LLMRequest, LLMResponse, Message
from qemem.llm.stages import CONSTRUCT
from qemem.models import (
    OMIT_NONE,
    Episode,
    Plan,
    Pool,
    Ref,
    SemanticFact,
    Space,
    Turn,
    search_text,
)
from qemem.prompts import render
from qemem.statements import Relation

MAX_FOLLOW_UPS = 3


class CardDraft(pydantic.BaseModel):
    """One evidence card as the model writes it."""

    claim: str = pydantic.Field(description="a self-contained fact, with names")
    sources: list[str] = pydantic.Field(description="ids of the cited memories, turns preferred")
    quote: str = pydantic.Field(default="", description="a short verbatim span of a source")
    time: str = pydantic.Field(default="", description="when it happened; empty if irrelevant")
    relation: str = pydantic.Field(default="", description="how the card bears on the question")

    @pydantic.field_validator("sources", mode="before")
    @classmethod
    def _one_source(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class ConstructorOutput(pydantic.BaseModel):
    """The constructor's whole output: cards and the sufficiency feedback."""

    cards: list[CardDraft] = pydantic.Field(default_factory=list)
    sufficient: bool
    missing: str = ""
    follow_up_queries: list[str] = pydantic.Field(
        default_factory=list, json_schema_extra={"maxItems": MAX_FOLLOW_UPS}
    )

    @pydantic.field_validator("follow_up_queries", mode="after")
    @classmethod
    def _at_most_three(cls, value: list[str]) -> list[str]:
        return [q.strip() for q in value if q.strip()][:MAX_FOLLOW_UPS]

    @pydantic.field_validator("missing", mode="before")
    @classmethod
    def _missing_text(cls, value: Any) -> Any:
        return "" if value is None else value


@dataclass
class Feedback:
    """The constructor's sufficiency verdict for one round."""

    sufficient: bool
    missing: str = ""
    follow_up_queries: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Conflict:
    """A card's disagreement with card ``other`` (numbered from 1, as the answer prompt shows
    the cards): an ``update`` or a ``contradiction``, and whether this card is the ``later``
    statement of the two."""

    kind: Relation
    other: int
    later: bool


@dataclass
class ViewCard:
    """A verified (or marked unverified) evidence card.

    ``sources`` are the cited ids as the answerer is shown them (decoration stripped, repeats
    dropped), ``refs`` the records the resolvable ones name; ``matched_source`` is the cited
    source the quote matched best (None when no cited id resolved) and ``grounded_in`` its
    space: "turn" when the quote was checked against a speaker's original words, "episode" or
    "fact" when against model-written memory text (so a verified card is never mistaken for
    one verified against original words); ``resolved_time`` the deterministic time, ``time``
    the model's, and ``time_agrees`` their
    agreement (None when the model gave no time or nothing resolved); ``conflict`` its
    disagreement with another card, when the constructor named one
    (:mod:`qemem.evidence.conflicts`).
    """

    claim: str
    sources: list[str]
    quote: str
    time: str
    relation: str
    verified: bool = False
    score: float = 0.0
    matched_source: str | None = None
    grounded_in: Space | None = None
    unresolved_sources: list[str] = field(default_factory=list)
    resolved_time: TimeResolution | None = None
    time_agrees: bool | None = None
    round: int = 0
    refs: list[Ref] = field(default_factory=list)
    time_basis: TimeBasis | None = None
    time_source: str | None = None
    time_event: str = ""
    planned: bool = False
    conflict: Annotated[Conflict | None, OMIT_NONE] = None

    @property
    def shown_time(self) -> str:
        """The time a reader is shown for the card (``card_time.shown_time``)."""
        return shown_time(self.time, self.resolved_time, self.time_basis)

    @property
    def model_written(self) -> bool:
        """Whether the quote was checked only against text a model wrote (an episode or a
        fact), which shows what the memory says, not what was said."""
        return self.grounded_in in ("episode", "fact")


@dataclass
class Construction:
    """One constructor call's outcome; ``degraded`` says why there are no cards, if so."""

    cards: list[CardDraft]
    feedback: Feedback
    responses: list[LLMResponse] = field(default_factory=list)
    degraded: str | None = None


def summarise_cards(cards: Sequence[ViewCard]) -> str:
    """A numbered summary of existing cards for a refinement round."""
    lines = []
    for n, card in enumerate(cards, start=1):
        time = f"; time: {card.time}" if card.time else ""
        lines.append(f"{n}. {card.claim} (sources: {', '.join(card.sources)}{time})")
    return "\n".join(lines)


def construct_cards(
    llm: LLMClient,
    index: SourceIndex,
    pool: Pool,
    plan: Plan,
    *,
    existing: Sequence[ViewCard] = (),
    refining: bool = False,
    max_tokens: int = 4096,
    ledger: Ledger | None = None,
    prefix: SharedPrefix | None = None,
) -> Construction:
    """One constructor call over ``pool``. When ``refining``, the pool holds only new
    candidates and the ``existing`` cards are summarised. With a shared ``prefix`` (the
    ``cached`` layout) the initial pool is in the prefix and the call's own part follows it;
    without, the published layout. Invalid output degrades to no cards."""
    episodes, facts, turns = pool_records(pool)
    inputs = {
        "question": plan.question,
        "need": plan.need,
        "episodes": episodes,
        "facts": facts,
        "turns": index.in_order(turns),
    }
    own = _construct_input(index, pool, plan, existing, refining, cached=prefix is not None)
    if prefix is not None:
        request = prefix.request(CONSTRUCT, own, max_tokens=max_tokens, inputs=inputs)
    else:
        request = LLMRequest(
            render("construct", **index.participants.prompt_fields()),
            [Message("user", own)],
            CONSTRUCT,
            max_tokens=max_tokens,
            inputs=inputs,
        )
    try:
        result = llm.structured(request, ConstructorOutput, ledger=ledger)
    except StructuredOutputError as exc:
        responses: list[LLMResponse] = getattr(exc, "responses", [])
        return Construction(
            [], Feedback(sufficient=False), responses, degraded="construct output invalid"
        )
    out = result.value
    feedback = Feedback(out.sufficient, out.missing.strip(), list(out.follow_up_queries))
    return Construction(list(out.cards), feedback, list(result.responses))


def _construct_input(
    index: SourceIndex,
    pool: Pool,
    plan: Plan,
    existing: Sequence[ViewCard],
    refining: bool,
    *,
    cached: bool = False,
) -> str:
    """The constructor's input text: the plan, the cards so far when ``refining``, and the
    pool's memories (in the ``cached`` layout the initial pool is in the shared prefix, so
    only a refinement round's new candidates are listed)."""
    suffix = "_cached" if cached else ""
    prior = ""
    if refining:
        prior = render(
            f"construct_existing{suffix}",
            cards=summarise_cards(existing) or "(none yet)",
            next_number=len(existing) + 1,
            memories=format_pool(index, pool),
        )
    fields = {
        "question": plan.question,
        "need": plan.need,
        "answer_type": plan.answer_type,
        "aggregate": "yes" if plan.aggregate else "no",
        "temporal": "yes" if plan.temporal else "no",
        "existing": prior,
    }
    if cached:
        return render("construct_input_cached", **fields)
    return render("construct_input", **fields, memories=format_pool(index, pool))


def source_text(record: Turn | Episode | SemanticFact) -> str:
    """The text a quote is checked against: a turn's message (without its speaker), an
    episode's title and narrative, a fact's content."""
    return record.text if isinstance(record, Turn) else search_text(record)


def _match_order(
    checks: Mapping[str, QuoteCheck], turns: Collection[str], matched: str
) -> list[str]:
    """The cited ids, the matched one first, then the other turns by how well the quote
    matched them (best first; ties in citation order)."""
    others = [sid for sid in checks if sid != matched and sid in turns]
    return [matched, *sorted(others, key=lambda sid: -checks[sid].score)]


def verify_card(
    card: CardDraft,
    index: SourceIndex,
    *,
    round: int = 0,
    threshold: float = DEFAULT_THRESHOLD,
) -> ViewCard:
    """Check a card's quote against its cited sources and resolve its time."""
    known: dict[str, FoundRecord] = {}
    unresolved: list[str] = []
    sources: list[str] = []
    for raw in card.sources:
        located = index.get(raw)
        name = located.record.id if located else clean_id(raw) or raw
        if name in sources:
            continue
        sources.append(name)
        if located is None:
            unresolved.append(name)
        else:
            known[name] = located
    texts = {sid: source_text(loc.record) for sid, loc in known.items()}
    speakers = {sid: r.speaker for sid, loc in known.items() if isinstance(r := loc.record, Turn)}
    checks = quote_checks(card.quote, texts, speakers=speakers, threshold=threshold)
    matched, check = best_check(checks)
    timing = None
    if matched is not None:
        cited = [
            CitedText(sid, texts[sid], index.session_date(known[sid].record))
            for sid in _match_order(checks, speakers, matched)
        ]
        timing = card_time(cited, check.span, model_time=card.time)
    return ViewCard(
        claim=card.claim.strip(),
        sources=sources,
        quote=card.quote.strip(),
        time=card.time.strip(),
        relation=card.relation.strip(),
        verified=check.verified,
        score=check.score,
        matched_source=matched,
        grounded_in=known[matched].space if matched is not None else None,
        unresolved_sources=unresolved,
        resolved_time=timing.resolution if timing else None,
        time_agrees=time_agrees(card.time, timing.resolution) if timing else None,
        time_basis=timing.basis if timing else None,
        time_source=timing.source if timing else None,
        time_event=timing.event if timing else "",
        planned=timing.planned if timing else False,
        round=round,
        refs=[Ref(loc.space, loc.record.id) for loc in known.values()],
    )


def _card_key(card: ViewCard) -> tuple[str, tuple[str, ...]]:
    return " ".join(card.claim.lower().split()), tuple(sorted(card.sources))


def merge_cards(existing: Sequence[ViewCard], new: Sequence[ViewCard]) -> list[ViewCard]:
    """Existing cards kept as they are, then the new ones that are not exact repeats
    (same claim, case and spacing ignored, and the same sources)."""
    seen = {_card_key(c) for c in existing}
    merged = list(existing)
    for card in new:
        if _card_key(card) not in seen:
            seen.add(_card_key(card))
            merged.append(card)
    return merged
