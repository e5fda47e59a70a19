"""Semantic facts of an episode: predict from what is known, calibrate against the turns,
check that each names its subject, then de-duplicate against the facts so far."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

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
    PredictOut,
    context_block,
    degradable,
    request,
    session_date,
    turn_lines,
)
from qemem.errors import LLMError
from qemem.llm.client import LLMClient
from qemem.llm.ledger import Ledger
from qemem.models import Episode, SemanticFact, Turn


@dataclass(frozen=True)
class Extracted:
    """An episode's new facts, why extraction degraded (None when it did not) and how many
    facts the pronoun rule rewrote or refused."""

    facts: list[str]
    degraded: str | None = None
    rewritten: int = 0
    refused: int = 0


def extract_facts(
    llm: LLMClient,
    episode: Episode,
    turns: Sequence[Turn],
    known: Sequence[SemanticFact],
    speakers: Sequence[str],
    config: BuildConfig,
    ledger: Ledger | None = None,
    before: Sequence[Turn] = (),
) -> Extracted:
    """New durable facts of an episode (see :class:`Extracted`).

    With known facts, one call predicts the episode from its title and those facts and a
    second extracts what the prediction missed or got wrong; without, facts are extracted
    directly. ``before`` (the messages just before the episode) is shown as context only. With
    ``config.pronoun_rule == "name"`` facts that do not name their subject are rewritten or
    refused (:func:`~qemem.build.factcheck.check_pronouns`). A failed call yields no facts.
    """
    when = session_date(episode.timestamp)
    try:
        context, rule = _known_context(llm, episode, turns, known, speakers, config, ledger)
        out = llm.structured(
            request(
                "calibrate",
                speakers,
                config.calibrate_max_tokens,
                session_date=when,
                known=context,
                scope_rule=rule,
                context=context_block(before),
                lines=turn_lines(turns),
                inputs={"turns": turns, "context": before},
            ),
            CalibrateOut,
            ledger=ledger,
        ).value
    except LLMError as exc:
        if not degradable(exc):
            raise
        return Extracted([], str(exc))
    cleaned = list(dict.fromkeys(c for f in out.facts if (c := " ".join(f.split()))))
    if config.pronoun_rule == "keep":
        return Extracted(cleaned)
    kept, rewritten, refused = check_pronouns(
        cleaned, speakers, [t.speaker for t in turns], [f.content for f in known]
    )
    return Extracted(list(dict.fromkeys(kept)), None, rewritten, refused)


def _known_context(
    llm: LLMClient,
    episode: Episode,
    turns: Sequence[Turn],
    known: Sequence[SemanticFact],
    speakers: Sequence[str],
    config: BuildConfig,
    ledger: Ledger | None,
) -> tuple[str, str]:
    """The calibrate prompt's known-facts block and rule: with known facts, after a predict
    call from the episode's title and those facts."""
    if not known:
        return "Nothing is known about these people yet.", "these messages state"
    here = [s for s in speakers if any(t.speaker == s for t in turns)]
    facts_block = known_block(known, here if config.mark_speakers else ())
    predicted = llm.structured(
        request(
            "predict",
            speakers,
            config.predict_max_tokens,
            facts=facts_block,
            title=episode.title,
            session_date=session_date(episode.timestamp),
        ),
        PredictOut,
        ledger=ledger,
    ).value.prediction
    prediction = "\n".join(f"- {p}" for p in predicted) or "- (nothing predicted)"
    return calibrate_context(facts_block, prediction, config.calibrate_rule)


def known_block(known: Sequence[SemanticFact], speakers: Sequence[str]) -> str:
    """The known facts as prompt lines ``- fact``; with ``speakers`` (the people speaking in
    the episode), a fact naming one of them is marked ``- [Name] fact`` under a line saying
    what the mark means."""
    if not speakers:
        return "\n".join(f"- {f.content}" for f in known)
    lines = []
    for fact in known:
        named = [s for s in speakers if _names(fact.content, s)]
        lines.append(f"- [{', '.join(named)}] {fact.content}" if named else f"- {fact.content}")
    legend = f"(A fact marked [Name] is about {_who(speakers)}, speaking in this episode.)"
    return "\n".join([legend, *lines])


def _names(text: str, speaker: str) -> bool:
    return re.search(rf"\b{re.escape(speaker)}\b", text, re.IGNORECASE) is not None


def _who(speakers: Sequence[str]) -> str:
    return speakers[0] if len(speakers) == 1 else ", ".join(speakers[:-1]) + " or " + speakers[-1]


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
