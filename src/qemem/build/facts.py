"""Semantic facts of an episode: predict from what is known, calibrate against the turns,
check that each names its subject, then de-duplicate against the facts so far."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from qemem.build.config import BuildConfig, CalibrateRule
from qemem.build.factcheck import (
    PARAPHRASE_MAX_EXTRA,
    check_pronouns,
    fact_subject,
    numbers_of,
    same_statement,
)
from qemem.build.prompting import (
    CalibrateOut,
    NewFact,
    PredictOut,
    context_block,
    degradable,
    request,
    session_date,
    turn_lines,
)
from qemem.build.supersede import cited_turns
from qemem.errors import LLMError
from qemem.llm.client import LLMClient
from qemem.llm.ledger import Ledger
from qemem.llm.stages import BUILD_CALIBRATE, BUILD_PREDICT
from qemem.models import Episode, FactKind, SemanticFact, Turn
from qemem.participants import Participants
from qemem.statements import relation_between

SUPERSEDE_RULE = (
    "\nEach known fact starts with its id in brackets. When these messages show that a known "
    "fact no longer holds because its value changed (a later count, deadline, setting, choice "
    "or preference replaces it), return the fact that holds now as "
    '{"fact": "...", "supersedes": "<id of the known fact>", "turns": [numbers of the '
    "messages that show it]}; never name a known fact without the messages that show it. "
    "When they only contradict a known fact (one says something never happened that the "
    'other says did), return the new fact without "supersedes": both stay known.'
)
"""How the calibrate prompt asks for supersessions (only when known facts are shown): the
rule of :mod:`qemem.statements` (an update supersedes; a contradiction keeps both)."""

Claims = dict[str, tuple[str, tuple[str, ...]]]
"""New fact text -> (the known fact id it supersedes, the episode's turn ids that show it)."""
Kinds = dict[str, FactKind]
"""New fact text -> its kind, for the facts that are not plain facts."""


@dataclass(frozen=True)
class Extracted:
    """An episode's new facts, why extraction degraded (None when it did not), how many facts
    the pronoun rule rewrote or refused, the supersessions the new facts claim, the kinds of
    those that are standing instructions or preferences, and how many claimed supersessions
    were contradictions (kept as two current facts, :func:`~qemem.statements.relation_between`)."""

    facts: list[str]
    degraded: str | None = None
    rewritten: int = 0
    refused: int = 0
    claims: Claims = field(default_factory=dict)
    kinds: Kinds = field(default_factory=dict)
    contradictions: int = 0


def extract_facts(
    llm: LLMClient,
    episode: Episode,
    turns: Sequence[Turn],
    known: Sequence[SemanticFact],
    speakers: Sequence[str],
    config: BuildConfig,
    ledger: Ledger | None = None,
    before: Sequence[Turn] = (),
    participants: Participants | None = None,
) -> Extracted:
    """New durable facts of an episode and the supersessions claimed (see :class:`Extracted`):
    a claim names a known fact shown to the model and cites at least one turn of the episode
    (any other claim is dropped; its fact stays new), and a claim the statements rule reads as
    a contradiction is dropped too (both facts stay current).

    With known facts, one call predicts the episode from its title and those facts and a
    second extracts what the prediction missed or got wrong; without, facts are extracted
    directly. ``before`` (the messages just before the episode) is shown as context only. With
    ``config.pronoun_rule == "name"`` facts that do not name their subject are rewritten or
    refused (:func:`~qemem.build.factcheck.check_pronouns`). A failed call yields no facts.
    """
    when = session_date(episode.timestamp)
    who = participants or Participants.of(speakers)
    try:
        context, rule = _known_context(llm, episode, turns, known, who, config, ledger)
        out = llm.structured(
            request(
                BUILD_CALIBRATE,
                speakers,
                config.calibrate_max_tokens,
                participants=who,
                session_date=when,
                known=context,
                scope_rule=rule,
                context=context_block(before),
                supersede_rule=SUPERSEDE_RULE if known else "",
                lines=turn_lines(turns),
                inputs={"turns": turns, "known": list(known), "context": before},
            ),
            CalibrateOut,
            ledger=ledger,
        ).value
    except LLMError as exc:
        if not degradable(exc):
            raise
        return Extracted([], str(exc))
    found = _facts_of(out, known, [t.id for t in turns])
    if config.pronoun_rule == "keep":
        return found
    return _named(found, speakers, [t.speaker for t in turns], known)


def _named(
    found: Extracted,
    speakers: Sequence[str],
    episode_speakers: Sequence[str],
    known: Sequence[SemanticFact],
) -> Extracted:
    """The facts that name their subject (:func:`~qemem.build.factcheck.check_pronouns`, one
    by one so that a rewritten fact keeps its claim and kind; a refused one's go)."""
    kept: list[str] = []
    kept_claims: Claims = {}
    kept_kinds: Kinds = {}
    rewritten = refused = 0
    for text in found.facts:
        named, fixed, dropped = check_pronouns(
            [text], speakers, episode_speakers, [f.content for f in known]
        )
        rewritten, refused = rewritten + fixed, refused + dropped
        if named and text in found.claims:
            kept_claims.setdefault(named[0], found.claims[text])
        if named and text in found.kinds:
            kept_kinds.setdefault(named[0], found.kinds[text])
        kept += named
    return Extracted(
        list(dict.fromkeys(kept)),
        None,
        rewritten,
        refused,
        kept_claims,
        kept_kinds,
        found.contradictions,
    )


def _known_context(
    llm: LLMClient,
    episode: Episode,
    turns: Sequence[Turn],
    known: Sequence[SemanticFact],
    participants: Participants,
    config: BuildConfig,
    ledger: Ledger | None,
) -> tuple[str, str]:
    """The calibrate prompt's known-facts block and rule: with known facts, after a predict
    call from the episode's title and those facts."""
    if not known:
        nobody = "the user" if participants.with_assistant else "these people"
        return f"Nothing is known about {nobody} yet.", "these messages state"
    speakers = participants.speakers
    here = [s for s in speakers if any(t.speaker == s for t in turns)]
    marked = here if config.mark_speakers else ()
    predicted = llm.structured(
        request(
            BUILD_PREDICT,
            speakers,
            config.predict_max_tokens,
            participants=participants,
            facts=known_block(known, marked),
            title=episode.title,
            session_date=session_date(episode.timestamp),
        ),
        PredictOut,
        ledger=ledger,
    ).value.prediction
    prediction = "\n".join(f"- {p}" for p in predicted) or "- (nothing predicted)"
    labelled = known_block(known, marked, ids=True)
    return calibrate_context(labelled, prediction, config.calibrate_rule)


def known_block(
    known: Sequence[SemanticFact], speakers: Sequence[str], *, ids: bool = False
) -> str:
    """The known facts as prompt lines ``- fact`` (``- [S3] fact`` with ``ids``); with
    ``speakers`` (the people speaking in the episode), a fact naming one of them ends in
    ``(about Name)``, under a line saying what the mark means."""
    lines = []
    for fact in known:
        label = f"[{fact.id}] " if ids else ""
        named = [s for s in speakers if _names(fact.content, s)]
        mark = f" (about {', '.join(named)})" if named else ""
        lines.append(f"- {label}{fact.content}{mark}")
    if not speakers:
        return "\n".join(lines)
    legend = f"(A fact ending in (about Name) is about {_who(speakers)}, speaking in this episode.)"
    return "\n".join([legend, *lines])


def _names(text: str, speaker: str) -> bool:
    return re.search(rf"\b{re.escape(speaker)}\b", text, re.IGNORECASE) is not None


def _who(speakers: Sequence[str]) -> str:
    return speakers[0] if len(speakers) == 1 else ", ".join(speakers[:-1]) + " or " + speakers[-1]


def _facts_of(
    out: CalibrateOut, known: Sequence[SemanticFact], turn_ids: Sequence[str]
) -> Extracted:
    """The cleaned new facts of a calibrate answer, their valid supersession claims (a claim
    the statements rule reads as a contradiction is counted and dropped) and their kinds."""
    shown = {f.id: f.content for f in known}
    texts: list[str] = []
    claims: Claims = {}
    kinds: Kinds = {}
    contradictions = 0
    for item in out.facts:
        text = " ".join((item if isinstance(item, str) else item.fact).split())
        if not text:
            continue
        texts.append(text)
        if not isinstance(item, NewFact):
            continue
        if item.kind != "fact":
            kinds.setdefault(text, item.kind)
        old = shown.get(str(item.supersedes))
        cited = cited_turns(item.turns, turn_ids) if old is not None else ()
        if old is None or not cited or text in claims:
            continue
        if relation_between(old, text) == "contradiction":
            contradictions += 1
            continue
        claims[text] = (str(item.supersedes), cited)
    return Extracted(
        list(dict.fromkeys(texts)), claims=claims, kinds=kinds, contradictions=contradictions
    )


def calibrate_context(known: str, prediction: str, rule: CalibrateRule) -> tuple[str, str]:
    """The calibrate prompt's known-facts block and extraction rule (see
    ``BuildConfig.calibrate_rule``)."""
    if rule == "method":
        return (
            f"Facts already known:\n{known}\n\nWhat we predicted this episode would say:\n"
            f"{prediction}",
            "these messages state and that the known facts and the prediction miss or get "
            "wrong; do not repeat anything already known",
        )
    return (
        f"Facts already known:\n{known}\n\nA guess of what this episode would say, made from "
        f"its title before reading it (a guess, not known facts):\n{prediction}",
        "these messages state and that no known fact states, including facts the guess "
        "foresaw (a fact the guess got right is still new when no known fact states it; "
        "use the guess only to notice what is surprising); do not repeat a known fact",
    )


def compatible(a: str, b: str) -> bool:
    """Whether two facts may be restatements: same subject word, same numbers mentioned."""
    return fact_subject(a) == fact_subject(b) and numbers_of(a) == numbers_of(b)


def find_duplicate(
    text: str,
    vector: np.ndarray,
    texts: Sequence[str],
    matrix: np.ndarray,
    threshold: float,
    paraphrase_cosine: float | None = None,
    names: Sequence[str] = (),
) -> int | None:
    """Row of the closest fact ``text`` restates (rows and ``vector`` unit-norm), or None: a
    compatible one with cosine >= ``threshold``, or, with ``paraphrase_cosine``, one it says the
    same as in other words (:func:`~qemem.build.factcheck.same_statement`, ``names`` the
    speakers) with cosine >= ``paraphrase_cosine``."""
    if not len(texts):
        return None
    scores = matrix @ vector
    floor = threshold if paraphrase_cosine is None else min(threshold, paraphrase_cosine)
    for row in np.argsort(-scores, kind="stable"):
        score = float(scores[row])
        if score < floor:
            return None
        if score >= threshold and compatible(text, texts[row]):
            return int(row)
        if paraphrase_cosine is not None and same_statement(
            text,
            texts[row],
            score,
            min_cosine=paraphrase_cosine,
            max_extra=PARAPHRASE_MAX_EXTRA,
            names=names,
        ):
            return int(row)
    return None
