"""The offline LLM's build answers, from the ``turns`` a build request carries: episodes of
about six turns, a title from the first turn's salient words, a narrative quoting the turns,
no prediction and one fact per episode. Each returns None when the request carries no turns
(the request then gets the generic answer); ``predict`` needs none."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from qemem.build.episodes import salient_title
from qemem.models import Turn
from qemem.prompts import as_data

EPISODE_SIZE = 6


def _turns(inputs: Mapping[str, Any]) -> list[Turn] | None:
    """The request's turns as its prompt shows them (numbered from 1, text on one line)."""
    if "turns" not in inputs:
        return None
    given: Sequence[Turn] = inputs["turns"]
    return [
        Turn(str(n), "", 0, n - 1, as_data(t.speaker), as_data(t.text), datetime.min)
        for n, t in enumerate(given, start=1)
    ]


def segment(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """Consecutive groups of ``EPISODE_SIZE`` message numbers."""
    turns = _turns(inputs)
    if turns is None:
        return None
    numbers = list(range(1, len(turns) + 1))
    return {"groups": [numbers[i : i + EPISODE_SIZE] for i in range(0, len(numbers), EPISODE_SIZE)]}


def episode(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first turn's salient words as the title, the turns quoted as the narrative."""
    turns = _turns(inputs)
    if turns is None:
        return None
    narrative = " ".join(f'{t.speaker} said: "{t.text}"' for t in turns) or "Nothing was said."
    return {"title": salient_title(turns), "narrative": narrative}


def predict(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """No prediction."""
    return {"prediction": []}


def calibrate(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """One fact: the first speaker mentioned the first words of the first turn."""
    turns = _turns(inputs)
    if turns is None:
        return None
    if not turns:
        return {"facts": []}
    words = re.sub(r"\[shares a photo:[^\]]*\]", "", turns[0].text).split()[:8]
    span = " ".join(words).rstrip(".,!?;:") or "something"
    return {"facts": [f"{turns[0].speaker} mentioned {span}"]}
