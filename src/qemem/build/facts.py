"""Semantic facts of an episode: predict from what is known, calibrate against the turns,
then de-duplicate against the facts so far."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from qemem.build.config import BuildConfig, CalibrateRule
from qemem.build.prompting import (
    CalibrateOut,
    NewFact,
    PredictOut,
    degradable,
    request,
    session_date,
    turn_lines,
)
from qemem.build.supersede import cited_turns
from qemem.errors import LLMError
from qemem.lexicon import NUMBER_WORDS
from qemem.llm.client import LLMClient
from qemem.llm.ledger import Ledger
from qemem.models import Episode, SemanticFact, Turn

_NUMBER = re.compile(
    rf"\b(?:\d+(?:[.,]\d+)?|{'|'.join(NUMBER_WORDS[:13])}|once|twice)\b", re.IGNORECASE
)


SUPERSEDE_RULE = (
    "\nEach known fact starts with its id in brackets. When these messages show that a known "
    "fact no longer holds (it changed, or they contradict it), return the fact that holds now "
    'as {"fact": "...", "supersedes": "<id of the known fact>", "turns": [numbers of the '
    "messages that show it]}; never name a known fact without the messages that show it."
)
"""How the calibrate prompt asks for supersessions (only when known facts are shown)."""

Claims = dict[str, tuple[str, tuple[str, ...]]]
"""New fact text -> (the known fact id it supersedes, the episode's turn ids that show it)."""


def extract_facts(
    llm: LLMClient,
    episode: Episode,
    turns: Sequence[Turn],
    known: Sequence[SemanticFact],
    speakers: Sequence[str],
    config: BuildConfig,
    ledger: Ledger | None = None,
) -> tuple[list[str], str | None, Claims]:
    """New durable facts of an episode, why extraction degraded (None when it did not) and
    the supersessions claimed: a new fact naming a known fact shown to the model and citing
    at least one turn of the episode (any other claim is dropped; its fact stays new).

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
            labelled = "\n".join(f"- [{f.id}] {f.content}" for f in known)
            context, rule = calibrate_context(labelled, prediction, config.calibrate_rule)
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
                supersede_rule=SUPERSEDE_RULE if known else "",
                lines=turn_lines(turns),
                inputs={"turns": turns, "known": list(known)},
            ),
            CalibrateOut,
            ledger=ledger,
        ).value
    except LLMError as exc:
        if not degradable(exc):
            raise
        return [], str(exc), {}
    return _facts_of(out, known, [t.id for t in turns])


def _facts_of(
    out: CalibrateOut, known: Sequence[SemanticFact], turn_ids: Sequence[str]
) -> tuple[list[str], None, Claims]:
    """The cleaned new facts of a calibrate answer and their valid supersession claims."""
    shown = {f.id for f in known}
    texts: list[str] = []
    claims: Claims = {}
    for item in out.facts:
        text = " ".join((item if isinstance(item, str) else item.fact).split())
        if not text:
            continue
        texts.append(text)
        if isinstance(item, NewFact) and item.supersedes in shown and text not in claims:
            cited = cited_turns(item.turns, turn_ids)
            if cited:
                claims[text] = (str(item.supersedes), cited)
    return list(dict.fromkeys(texts)), None, claims


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
