"""Evidence construction, verification, refinement and time resolution."""

from qemem.evidence.agreement import time_agrees, time_ranges
from qemem.evidence.card_time import CardTime, CitedText, card_time, resolve_card_time
from qemem.evidence.cards import (
    CardDraft,
    Construction,
    ConstructorOutput,
    Feedback,
    ViewCard,
    construct_cards,
    merge_cards,
    verify_card,
)
from qemem.evidence.context import SourceIndex, format_memories, format_pool
from qemem.evidence.layout import LAYOUTS, Layout, SharedPrefix
from qemem.evidence.plans import is_planned
from qemem.evidence.quotes import QuoteCheck, best_quote_match, verify_quote
from qemem.evidence.refine import Evidence, RoundTrace, build_evidence, merge_pools
from qemem.evidence.times import (
    ANNOTATION,
    TimeResolution,
    annotate_times,
    event_expressions,
    normalise_time,
    resolve_times,
)

__all__ = [
    "ANNOTATION",
    "LAYOUTS",
    "CardDraft",
    "CardTime",
    "CitedText",
    "Construction",
    "ConstructorOutput",
    "Evidence",
    "Feedback",
    "Layout",
    "QuoteCheck",
    "RoundTrace",
    "SharedPrefix",
    "SourceIndex",
    "TimeResolution",
    "ViewCard",
    "annotate_times",
    "best_quote_match",
    "build_evidence",
    "card_time",
    "construct_cards",
    "event_expressions",
    "format_memories",
    "format_pool",
    "is_planned",
    "merge_cards",
    "merge_pools",
    "normalise_time",
    "resolve_card_time",
    "resolve_times",
    "time_agrees",
    "time_ranges",
    "verify_card",
    "verify_quote",
]
