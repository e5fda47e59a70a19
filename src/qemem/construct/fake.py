"""Offline answers for the build stages, so that ``LLMClient(FakeLLM())`` builds sensible
memory deterministically: episodes of about six turns, a title from the first turn's salient
words, a narrative quoting the turns, no prediction and one fact per episode."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from qemem.construct.episodes import salient_title
from qemem.construct.prompting import TURN_LINE
from qemem.llm.fake import register_fake_responder
from qemem.llm.types import LLMRequest
from qemem.models import Turn

FAKE_EPISODE_SIZE = 6


def _turns(request: LLMRequest) -> list[Turn]:
    """The turns shown in a build prompt (first user message), rebuilt from their lines."""
    content = request.messages[0].content if request.messages else ""
    turns: list[Turn] = []
    for line in content.splitlines():
        match = TURN_LINE.match(line.strip())
        if match:
            label = match["label"]
            turns.append(
                Turn(label, "", 0, len(turns), match["speaker"], match["text"], datetime.min)
            )
    return turns


def _segment(request: LLMRequest) -> dict[str, Any]:
    count = len(_turns(request))
    numbers = list(range(1, count + 1))
    return {
        "groups": [numbers[i : i + FAKE_EPISODE_SIZE] for i in range(0, count, FAKE_EPISODE_SIZE)]
    }


def _episode(request: LLMRequest) -> dict[str, Any]:
    turns = _turns(request)
    narrative = " ".join(f'{t.speaker} said: "{t.text}"' for t in turns) or "Nothing was said."
    return {"title": salient_title(turns), "narrative": narrative}


def _predict(request: LLMRequest) -> dict[str, Any]:
    return {"prediction": []}


def _calibrate(request: LLMRequest) -> dict[str, Any]:
    turns = _turns(request)
    if not turns:
        return {"facts": []}
    words = re.sub(r"\[shares a photo:[^\]]*\]", "", turns[0].text).split()[:8]
    span = " ".join(words).rstrip(".,!?;:") or "something"
    return {"facts": [f"{turns[0].speaker} mentioned {span}"]}


def register() -> None:
    """Register the build responders with FakeLLM (idempotent)."""
    register_fake_responder("build.segment", _segment)
    register_fake_responder("build.episode", _episode)
    register_fake_responder("build.predict", _predict)
    register_fake_responder("build.calibrate", _calibrate)
