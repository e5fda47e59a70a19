"""The grounding audit of a LoCoMo run (method §3): what the cards of each answer rest on.

Per question, ``card_records`` keeps every card as results.jsonl holds it (claim, sources,
quote, whether and how well the quote verified, what it was verified against, the model's and
the deterministic time, their agreement and its expression kind, the round). Over a run,
``grounding`` counts cards per question, the share of quotes verified (and verified against a
speaker's original words, ``grounded_in == "turn"``), and the share of card time fields that
agree with the deterministic rules, overall and by expression kind (``TIME_KINDS``).

The "cited" visibility counts the turns of the answer prompt's cited-sources section as the
assembler wrote them (``Evidence.shown.cited_context``): a cited turn with up to 2 turns on each
side in its session, a cited episode's first 12 turn ids that name a turn, nothing for a fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from qemem.evidence.agreement import TIME_KINDS, time_kind
from qemem.evidence.cards import ViewCard

Record = Mapping[str, Any]

#: How each visibility figure counts a turn as shown (named in the report).
VISIBILITY_RULES = {
    "initial": "turns of the round-0 pool: turn candidates and every turn of an episode "
    "candidate (a fact shows none)",
    "refined": "the same over the pools of all rounds",
    "final": "every turn the answer context shows (cited context and background)",
    "cited": "the turns the answer context shows for the cards' citations: a cited turn with up "
    "to 2 neighbours on each side in its session, a cited episode's first 12 turns, none for a "
    "fact",
}


def card_records(cards: Iterable[ViewCard]) -> list[dict[str, Any]]:
    """The cards of one answer as results.jsonl records them."""
    out = []
    for card in cards:
        resolved = card.resolved_time
        out.append(
            {
                "claim": card.claim,
                "sources": list(card.sources),
                "unresolved_sources": list(card.unresolved_sources),
                "quote": card.quote,
                "verified": card.verified,
                "score": card.score,
                "matched_source": card.matched_source,
                "grounded_in": card.grounded_in,
                "relation": card.relation,
                "model_time": card.time,
                "resolved_time": resolved.phrase if resolved else None,
                "resolved_range": [resolved.start.isoformat(), resolved.end.isoformat()]
                if resolved
                else None,
                "time_expression": resolved.expression if resolved else None,
                "time_kind": time_kind(resolved.expression) if resolved else None,
                "time_agrees": card.time_agrees,
                "round": card.round,
            }
        )
    return out


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def grounding(records: Sequence[Record]) -> dict[str, Any]:
    """The run's grounding audit over the records that carry cards (modes with cards)."""
    with_cards = [r for r in records if r.get("cards") is not None]
    cards = [c for r in with_cards for c in r["cards"]]
    timed = [c for c in cards if c["time_agrees"] is not None]
    by_kind: dict[str, Any] = {}
    for kind in TIME_KINDS:
        chosen = [c for c in timed if c["time_kind"] == kind]
        agreed = sum(1 for c in chosen if c["time_agrees"])
        by_kind[kind] = {"cards": len(chosen), "agreement": _share(agreed, len(chosen))}
    grounded = {
        space: sum(1 for c in cards if (c["grounded_in"] or "none") == space)
        for space in ("turn", "episode", "fact", "none")
    }
    return {
        "questions": len(with_cards),
        "cards": len(cards),
        "cards_per_question": _share(len(cards), len(with_cards)),
        "verified": _share(sum(1 for c in cards if c["verified"]), len(cards)),
        "verified_against_turns": _share(
            sum(1 for c in cards if c["verified"] and c["grounded_in"] == "turn"), len(cards)
        ),
        "grounded_in": grounded,
        "time_cards": len(timed),
        "time_agreement": _share(sum(1 for c in timed if c["time_agrees"]), len(timed)),
        "time_agreement_by_kind": by_kind,
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def render_grounding(block: Mapping[str, Any]) -> list[str]:
    """The report's grounding-audit section (markdown lines)."""
    lines = ["", "## Grounding audit", ""]
    if not block["questions"]:
        return [*lines, "No cards in this mode (cards are built in modes full and no-refine)."]
    g = block["grounded_in"]
    lines += [
        f"{block['cards']} cards over {block['questions']} questions "
        f"({block['cards_per_question']} per question); quotes verified "
        f"{_pct(block['verified'])}, verified against a speaker's original words (a turn) "
        f"{_pct(block['verified_against_turns'])}. Checked against: turns {g['turn']}, "
        f"episodes {g['episode']}, facts {g['fact']}, nothing {g['none']} (episode and fact "
        "text is model-written).",
        "",
        f"Card time fields agreeing with the deterministic rules: "
        f"{_pct(block['time_agreement'])} of {block['time_cards']} cards with a time.",
        "",
        "| expression kind | cards | agreement |",
        "| --- | --- | --- |",
    ]
    for kind, row in block["time_agreement_by_kind"].items():
        lines.append(f"| {kind} | {row['cards']} | {_pct(row['agreement'])} |")
    return lines
