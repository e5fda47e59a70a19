"""The viewer's record: one answer's evidence in the JSON shape the page script reads.

``evidence_record`` reads an answer's JSON form (:func:`qemem.answer.wire.answer_to_json`,
full or compact, as a run keeps it in results.jsonl under ``answer``) and returns a compact,
JSON-ready dict: the question and answer, the cost line, the plan, each round (the queries it
ran, its sufficiency feedback), the cards, the pool, the citations, the answer context and the
source records when the answer carries them. Each card carries ``shown_time``, the time a
reader is shown (``ViewCard.shown_time``). Each pool candidate is a list ``[space, id, round
it came in, score, why it was pooled, reasons left out]``, read from the rounds of the evidence
record; the answer page and the run report render it with the same script.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

from qemem.evidence.card_time import shown_time
from qemem.evidence.times import TimeResolution
from qemem.models import Plan

Data = Mapping[str, Any]

#: pool reasons kept per candidate in run records (the rest are counted), to keep them small
RUN_REASONS = 3
_RULE_TIME = TypeAdapter(TimeResolution | None)
PLAN_KEYS = ("need", "answer_type", "aggregate", "temporal", "queries", "source", "note")


def reason_label(reason: Data) -> str:
    """A short label for why a candidate was pooled (a reason's JSON form): ``q2 dense #3``
    (query 2 of its round, dense list, rank 3), ``provenance via S4``, ``context of D3:12``."""
    if reason["kind"] == "ranked":
        return f"q{reason['query']} {reason['method']} #{reason['rank']}"
    if reason["kind"] == "context":
        return f"context of {reason['via']}"
    via = f" via {reason['via']}" if reason.get("via") else ""
    return f"{reason['kind']}{via}"


def round_queries(evidence: Data) -> list[list[str]]:
    """The queries each round retrieved with, as the pool numbers them (``q0`` first): the
    plan's query set for the initial pool, the follow-up queries for refinement rounds."""
    plan: Plan = TypeAdapter(Plan).validate_python(evidence["plan"])
    out = []
    for trace in evidence["rounds"]:
        raw = plan.query_set if trace["queries"] is None else trace["queries"]
        texts = [" ".join(q.split()) for q in raw]
        out.append([q for q in dict.fromkeys(texts) if q])
    return out


def _pool_items(evidence: Data, max_reasons: int | None) -> list[list[Any]]:
    """The merged pool's candidates in pool order (a compact pool lists only refs), each with
    the round it came in."""
    entries: dict[tuple[str, str], tuple[int, Data]] = {}
    for r in evidence["rounds"]:
        for entry in r["pool"]:
            ref = entry["ref"]
            entries.setdefault((ref["space"], ref["id"]), (r["round"], entry))
    pool = evidence["pool"]
    out = []
    for item in (*pool["episodes"], *pool["facts"], *pool["turns"]):
        ref = {"space": item["space"], "id": item["record"]["id"]} if "record" in item else item
        number, entry = entries[(ref["space"], ref["id"])]
        labels = [reason_label(r) for r in entry["reasons"]]
        kept = labels if max_reasons is None else labels[:max_reasons]
        more = len(labels) - len(kept) + int(entry.get("more_reasons", 0))
        out.append(
            [ref["space"], ref["id"], number, round(entry["score"], 4), "; ".join(kept), more]
        )
    return out


def _cards(cards: list[Data]) -> list[dict[str, Any]]:
    """The cards' JSON, each with the time a reader is shown (``shown_time``)."""
    return [
        {
            **card,
            "shown_time": shown_time(
                card["time"], _RULE_TIME.validate_python(card["resolved_time"]), card["time_basis"]
            ),
        }
        for card in cards
    ]


def evidence_record(answer: Data, *, max_reasons: int | None = None) -> dict[str, Any]:
    """The viewer's record of an answer's JSON form (see the module doc). ``max_reasons``
    caps the reasons kept per pool candidate (None: all)."""
    evidence, trace = answer["evidence"], answer["trace"]
    total = trace["totals"].get("total", {}) if trace["totals"] else {}
    queries = round_queries(evidence)
    plan = evidence["plan"]
    record = {
        "question": answer["question"],
        "answer": answer["text"],
        "reasoning": answer["reasoning"],
        "mode": answer["mode"],
        "termination": evidence["termination"],
        "degradations": list(evidence["degradations"]),
        "cost": {
            "calls": int(total.get("calls", 0)),
            "input_tokens": int(total.get("input_tokens", 0)),
            "output_tokens": int(total.get("output_tokens", 0)),
            "usd": total.get("cost_nominal_usd"),
            "seconds": round(trace["seconds"], 3),
        },
        "plan": {k: plan[k] for k in PLAN_KEYS},
        "rounds": [
            {
                "round": r["round"],
                "queries": queries[n],
                "feedback": r["feedback"],
                "degraded": r["degraded"],
            }
            for n, r in enumerate(evidence["rounds"])
        ],
        "cards": _cards(evidence["cards"]),
        "citations": list(answer["citations"]),
        "visible": list(evidence["shown"]["turns"]),
        "pool": _pool_items(evidence, max_reasons),
    }
    if "sources" in answer:
        record["sources"] = answer["sources"]
    return record
