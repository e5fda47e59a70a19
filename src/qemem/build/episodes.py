"""An episode's title and narrative: one LLM call, or a plain account of the turns."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from qemem.build.config import BuildConfig
from qemem.build.prompting import (
    EpisodeOut,
    context_block,
    degradable,
    request,
    session_date,
    turn_lines,
)
from qemem.errors import LLMError
from qemem.lexicon import TITLE_STOPWORDS
from qemem.llm.client import LLMClient
from qemem.llm.ledger import Ledger
from qemem.llm.stages import BUILD_EPISODE
from qemem.models import Turn, format_datetime
from qemem.participants import Participants


def salient_title(turns: Sequence[Turn], words: int = 5) -> str:
    """A title from the first turn's salient words (stopwords and short words dropped)."""
    for turn in turns:
        tokens = [w.strip(".,!?;:\"'()[]") for w in turn.text.split()]
        picked = [w for w in tokens if len(w) > 2 and w.lower() not in TITLE_STOPWORDS][:words]
        if picked:
            return f"{turn.speaker}: " + " ".join(picked)
    return f"{turns[0].speaker}: conversation" if turns else "Conversation"


def plain_narrative(turns: Sequence[Turn]) -> str:
    """A third-person narrative made of the turns themselves: ``Caroline said: "…"``."""
    if not turns:
        return ""
    said = " ".join(f'{t.speaker} said: "{" ".join(t.text.split())}"' for t in turns)
    return f"On {format_datetime(turns[0].timestamp)}, {said}"


def write_episode(
    llm: LLMClient,
    turns: Sequence[Turn],
    speakers: Sequence[str],
    when: datetime,
    config: BuildConfig,
    ledger: Ledger | None = None,
    before: Sequence[Turn] = (),
    participants: Participants | None = None,
) -> tuple[str, str, str | None]:
    """(title, narrative, why it degraded or None) for the episode made of ``turns``, the
    messages ``before`` it shown as context not to summarise (the prompt names
    ``participants``).

    On a failed call the title comes from the first turn's salient words and the narrative
    from the turns themselves.
    """
    req = request(
        BUILD_EPISODE,
        speakers,
        config.episode_max_tokens,
        participants=participants,
        session_date=session_date(when),
        context=context_block(before),
        lines=turn_lines(turns),
        inputs={"turns": turns, "context": before},
    )
    try:
        out = llm.structured(req, EpisodeOut, ledger=ledger).value
    except LLMError as exc:
        if not degradable(exc):
            raise
        return salient_title(turns), plain_narrative(turns), str(exc)
    title = re.sub(r"\s+", " ", out.title).strip()
    narrative = out.narrative.strip()
    if not title or not narrative:
        reason = "the model returned an empty title or narrative"
        return title or salient_title(turns), narrative or plain_narrative(turns), reason
    return title, narrative, None
