"""Semantic facts of an episode: predict from what is known, calibrate against the turns,
then de-duplicate against the facts so far."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from qemem.build.config import BuildConfig, CalibrateRule
from qemem.build.prompting import (
    CalibrateOut,
    PredictOut,
    degradable,
    request,
    session_date,
    turn_lines,
)
from qemem.errors import LLMError
from qemem.lexicon import NUMBER_WORDS
from qemem.llm.client import LLMClient
from qemem.llm.ledger import Ledger
from qemem.models import Episode, SemanticFact, Turn

_NUMBER = re.compile(
    rf"\b(?:\d+(?:[.,]\d+)?|{'|'.join(NUMBER_WORDS[:13])}|once|twice)\b", re.IGNORECASE
)


def extract_facts(
    llm: LLMClient,
    episode: Episode,
    turns: Sequence[Turn],
    known: Sequence[SemanticFact],
    speakers: Sequence[str],
    config: BuildConfig,
    ledger: Ledger | None = None,
) -> tuple[list[str], str | None]:
    """New durable facts of an episode and why extraction degraded (None when it did not).

    With known facts, one call predicts the episode from its title and those facts and a
    second extracts what the prediction missed or got wrong; without, facts are extracted
    directly. A failed call yields no facts.
    """
    when = session_date(episode.timestamp)
    try:
        if known:
            facts_block = "\n".join(f"- {f.content}" for f in known)
            predicted = llm.structured(
                request(
                    "predict",
                    speakers,
                    config.predict_max_tokens,
                    facts=facts_block,
                    title=episode.title,
                    session_date=when,
                ),
                PredictOut,
                ledger=ledger,
            ).value.prediction
            prediction = "\n".join(f"- {p}" for p in predicted) or "- (nothing predicted)"
            context, rule = calibrate_context(facts_block, prediction, config.calibrate_rule)
        else:
            context = "Nothing is known about these people yet."
            rule = "these messages state"
        out = llm.structured(
            request(
                "calibrate",
                speakers,
                config.calibrate_max_tokens,
                session_date=when,
                known=context,
                scope_rule=rule,
                lines=turn_lines(turns),
                inputs={"turns": turns},
            ),
            CalibrateOut,
            ledger=ledger,
        ).value
    except LLMError as exc:
        if not degradable(exc):
            raise
        return [], str(exc)
    cleaned = [" ".join(f.split()) for f in out.facts]
    return list(dict.fromkeys(f for f in cleaned if f)), None


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


def _subject(text: str) -> str:
    first = text.split()[0].lower() if text.split() else ""
    return re.sub(r"('s|’s|\W)+$", "", first)


def compatible(a: str, b: str) -> bool:
    """Whether two facts may be restatements: same subject word, same numbers mentioned."""
    numbers_a = sorted(n.lower() for n in _NUMBER.findall(a))
    numbers_b = sorted(n.lower() for n in _NUMBER.findall(b))
    return _subject(a) == _subject(b) and numbers_a == numbers_b


def find_duplicate(
    text: str, vector: np.ndarray, texts: Sequence[str], matrix: np.ndarray, threshold: float
) -> int | None:
    """Row of the closest compatible fact with cosine >= ``threshold`` (rows and ``vector``
    unit-norm), or None."""
    if not len(texts):
        return None
    scores = matrix @ vector
    for row in np.argsort(-scores, kind="stable"):
        if scores[row] < threshold:
            return None
        if compatible(text, texts[row]):
            return int(row)
    return None
