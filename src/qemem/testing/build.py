"""The offline LLM's build answers, from the ``turns`` a build request carries: episodes of
about six turns, a title from the first turn's salient words, a narrative quoting the turns
(each up to :data:`QUOTE_CHARS` characters, as long as a capable model's account of them),
no prediction and one fact per episode, plus one superseding a known fact (of the request's
``known``) for each later turn that says something changed, and one typed fact for each standing
instruction or preference a user's turn states (the words the ingest's rule pass stores). Each
returns None when the request carries no turns (the request then gets the generic answer);
``predict`` needs none."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from qemem.build.episodes import salient_title
from qemem.ingest.standing import standing_content
from qemem.models import Turn
from qemem.prompts import as_data
from qemem.statements import standing_statements

EPISODE_SIZE = 6
QUOTE_CHARS = 300
"""The most of a turn the offline narrative quotes: a short message whole, a long reply's
beginning (cut at a word, marked ``…``), so an episode of long replies gets an account of a
few hundred words, as the build prompt's "detailed account" does, not the replies whole."""


def _quoted(text: str) -> str:
    """``text`` up to :data:`QUOTE_CHARS` characters, cut at a word and marked ``…``."""
    if len(text) <= QUOTE_CHARS:
        return text
    return text[:QUOTE_CHARS].rsplit(" ", 1)[0] + " …"


def _turns(inputs: Mapping[str, Any]) -> list[Turn] | None:
    """The request's turns as its prompt shows them (numbered from 1, text on one line)."""
    if "turns" not in inputs:
        return None
    given: Sequence[Turn] = inputs["turns"]
    return [
        Turn(str(n), "", 0, n - 1, as_data(t.speaker), as_data(t.text), datetime.min, t.role)
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
    """The first turn's salient words as the title, the turns quoted (:func:`_quoted`) as the
    narrative."""
    turns = _turns(inputs)
    if turns is None:
        return None
    narrative = " ".join(f'{t.speaker} said: "{_quoted(t.text)}"' for t in turns)
    narrative = narrative or "Nothing was said."
    return {"title": salient_title(turns), "narrative": narrative}


def predict(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """No prediction."""
    return {"prediction": []}


_CHANGE = re.compile(r"\b(?:no longer|not anymore|anymore|instead)\b", re.IGNORECASE)
"""Words of a turn that updates what was known (the offline rule for supersessions)."""


def _mention(turn: Turn) -> str:
    words = re.sub(r"\[shares a photo:[^\]]*\]", "", turn.text).split()[:8]
    span = " ".join(words).rstrip(".,!?;:") or "something"
    return f"{turn.speaker} mentioned {span}"


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 4}


def calibrate(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """One fact: the first speaker mentioned the first words of the first turn. For each
    later turn saying something changed ("no longer", "anymore", "instead"), a fact of that
    turn superseding the known fact sharing most of its words (at least two), citing it. And
    for each standing statement of a user's turn, a fact of its kind."""
    turns = _turns(inputs)
    if turns is None:
        return None
    if not turns:
        return {"facts": []}
    facts: list[Any] = [_mention(turns[0])]
    known = list(inputs.get("known", ()))
    for n, turn in enumerate(turns[1:], start=2):
        if not _CHANGE.search(turn.text) or not known:
            continue
        shared = [(len(_words(f.content) & _words(turn.text)), f.id) for f in known]
        count, fid = max(shared, key=lambda pair: pair[0])
        if count >= 2:
            facts.append({"fact": _mention(turn), "supersedes": fid, "turns": [n]})
    for turn in turns:
        if turn.role == "user":
            facts += [
                {"fact": standing_content(turn.speaker, said), "kind": said.kind}
                for said in standing_statements(turn.text)
            ]
    return {"facts": facts}
