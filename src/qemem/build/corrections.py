"""Corrections by hand during a build: a build never brings a corrected statement back as
current.

A correction (:class:`~qemem.models.Correction`) records the turns its corrected statement was
learned from. When a build extracts an episode that covers one of those turns (after the
wrong fact went with its episode: a redacted neighbour, a rebuild, appended turns), the
extraction is shown the current corrections of those turns as known facts, so the model need
not derive the corrected statement again. If it does anyway, the build checks every new fact
of the episode against the corrections of its turns: a new fact near a correction
(:func:`near_correction`) is the corrected statement back, and the correction supersedes it
(a manual supersession, citing the correction's turns). A claim of the model that a new fact
supersedes a correction, shown only by turns the correction already corrected, says the same:
it is turned round the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from qemem.build.factcheck import content_stems
from qemem.models import Correction, SemanticFact, Supersession

CORRECTED_JACCARD = 1 / 3
"""The least Jaccard similarity of content stems at which a new fact is near a correction.

A correction keeps the subject and changes what is said of it, so the statement it corrected
shares much of its content: "Jon lives in Boston" / "Jon lives in Denver" share 1 of 3 stems
(one word of a two-word statement changed). Measured by ``benchmarks/correction_rule.py``
on 16 hand-written corrections (the wrong fact, its correction, another fact of the same
episode): the rule finds 13 of the 16 wrong facts and fires on 1 of the 16 other facts; on the
2,238 ordered pairs of facts first learned in one episode of the three LoCoMo dev memories
(each pair standing for a correction and another fact beside the corrected one) it fires on
5.5 %. Cosines do worse at the same false-alarm rate: e5 >= 0.94 fires on 5.3 % of the pairs
and finds 10 of the 16 wrong facts (>= 0.92 finds 15 but fires on 13.8 %), and a cosine means
something else with every embedder (the hash embedder needs 0.6 for 5 %). The corrections it
misses rewrite every content word ("Caroline is a nurse" / "Caroline is a counselor"): for
those, the extraction is shown the correction."""


def near_correction(fact: str, correction: str, names: Sequence[str] = ()) -> bool:
    """Whether ``fact`` says something near ``correction``: the Jaccard similarity of their
    content stems (:func:`~qemem.build.factcheck.content_stems`, the words of ``names``, the
    people of the conversation, dropped) is at least :data:`CORRECTED_JACCARD`."""
    a, b = content_stems(fact, names), content_stems(correction, names)
    return bool(a | b) and len(a & b) / len(a | b) >= CORRECTED_JACCARD


def touching(corrections: Sequence[Correction], turn_ids: Sequence[str]) -> list[Correction]:
    """The corrections whose corrected statement was learned from one of ``turn_ids``."""
    turns = set(turn_ids)
    return [c for c in corrections if turns.intersection(c.corrected_turns)]


def corrected_again(
    new: Sequence[SemanticFact],
    turn_ids: Sequence[str],
    corrections: Sequence[Correction],
    contents: Mapping[str, str],
    claims: Mapping[str, tuple[str, tuple[str, ...]]],
    names: Sequence[str],
    at: datetime,
    recorded: datetime,
) -> list[Supersession]:
    """The supersessions of an episode's ``new`` facts (learned from ``turn_ids``) by the
    corrections of those turns (``contents``: the correction facts' texts): a new fact near
    one (the first in order), or one that ``claims`` (fact text -> (id of the fact it
    supersedes, turns that show it)) supersedes a correction from turns it already
    corrected. Each is manual, held from ``at`` (the episode's date), citing the
    correction's turns."""
    mine = [c for c in touching(corrections, turn_ids) if c.fact in contents]
    out = []
    for fact in new:
        claimed, shown = claims.get(fact.content, ("", ()))
        for item in mine:
            undone = claimed == item.fact and set(shown) <= set(item.corrected_turns)
            if undone or near_correction(fact.content, contents[item.fact], names):
                out.append(Supersession(fact.id, item.fact, item.turn_ids, at, "manual", recorded))
                break
    return out
