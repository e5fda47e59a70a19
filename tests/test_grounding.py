"""The grounding audit: card records and the run-level shares (the cited context is the
assembler's own record, tested with assembly)."""

from __future__ import annotations

from datetime import date, datetime

from qemem.eval.grounding import card_records, grounding, render_grounding
from qemem.evidence.agreement import time_kind
from qemem.evidence.cards import ViewCard
from qemem.evidence.times import TimeResolution

WHEN = datetime(2023, 5, 8, 13, 56)


def test_time_kinds() -> None:
    kinds = {e: time_kind(e) for e in ("Yesterday", "last weekend", "on Friday", "last year")}
    assert list(kinds.values()) == [
        "yesterday/last night",
        "last week/weekend",
        "weekday",
        "last month/year",
    ]
    assert (time_kind("tomorrow"), time_kind("")) == ("other", "none (session date)")


def card(verified: bool, grounded: str | None, agrees: bool | None, expression: str) -> ViewCard:
    resolved = TimeResolution(expression, date(2023, 5, 7), date(2023, 5, 7), "day", "7 May 2023")
    return ViewCard(
        "claim",
        ["D1:1"],
        "quote",
        "7 May 2023",
        "answer",
        verified=verified,
        grounded_in=grounded,  # type: ignore[arg-type]
        resolved_time=resolved,
        time_agrees=agrees,
    )


def test_grounding_shares_and_kinds() -> None:
    first = card_records([card(True, "turn", True, "yesterday"), card(True, "episode", False, "")])
    second = card_records([card(False, "turn", None, "last week"), card(True, "turn", False, "")])
    assert first[0]["resolved_range"] == ["2023-05-07", "2023-05-07"]
    assert (
        first[0]["time_kind"] == "yesterday/last night" and first[0]["model_time"] == "7 May 2023"
    )
    records = [{"cards": first}, {"cards": second}, {"cards": None}]
    block = grounding(records)
    assert (block["questions"], block["cards"], block["cards_per_question"]) == (2, 4, 2.0)
    assert block["verified"] == 0.75 and block["verified_against_turns"] == 0.5
    assert block["grounded_in"] == {"turn": 3, "episode": 1, "fact": 0, "none": 0}
    assert block["time_cards"] == 3 and block["time_agreement"] == round(1 / 3, 4)
    by_kind = block["time_agreement_by_kind"]
    assert by_kind["yesterday/last night"] == {"cards": 1, "agreement": 1.0}
    assert by_kind["none (session date)"] == {"cards": 2, "agreement": 0.0}
    assert by_kind["weekday"] == {"cards": 0, "agreement": None}
    text = "\n".join(render_grounding(block))
    assert "| yesterday/last night | 1 | 100.0% |" in text
    assert "No cards" in "\n".join(render_grounding(grounding([{"cards": None}])))
