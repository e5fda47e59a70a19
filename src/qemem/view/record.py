"""The evidence record: one answer's evidence in the JSON shape the viewer reads.

``evidence_record`` turns an :class:`~qemem.answer.Answer` into a compact, JSON-ready dict: the
question and answer, the cost line, the plan, each round (the queries it ran, its sufficiency
feedback), the cards, the pool, the citations, the answer context and the source records
(``Answer.sources``). Each pool candidate is a list ``[space, id, round it came in, score, why
it was pooled, reasons left out]``, compact because a run stores one record per question. The
evaluation harness stores it in each results.jsonl record under ``evidence_view``; the answer
page and the run report render it with the same script.
"""

from __future__ import annotations

from typing import Any

from qemem.answer import Answer
from qemem.evidence.refine import Evidence
from qemem.models import Pool, PoolItem, Reason, Ref

#: pool reasons kept per candidate in run records (the rest are counted), to keep them small
RUN_REASONS = 3


def reason_label(reason: Reason) -> str:
    """A short label for why a candidate was pooled: ``q2 dense #3`` (query 2 of its round,
    dense list, rank 3), ``provenance via S4``, ``context of D3:12``."""
    if reason.kind == "ranked":
        return f"q{reason.query} {reason.method} #{reason.rank}"
    if reason.kind == "context":
        return f"context of {reason.via}"
    via = f" via {reason.via}" if reason.via else ""
    return f"{reason.kind}{via}"


def round_queries(evidence: Evidence) -> list[list[str]]:
    """The queries each round retrieved with, as the pool numbers them (``q0`` first): the
    plan's query set for the initial pool, the follow-up queries for refinement rounds."""
    out = []
    for trace in evidence.rounds:
        raw = evidence.plan.query_set if trace.queries is None else trace.queries
        texts = [" ".join(q.split()) for q in raw]
        out.append([q for q in dict.fromkeys(texts) if q])
    return out


def _pool_items(pool: Pool, rounds: dict[Ref, int], max_reasons: int | None) -> list[list[Any]]:
    def item(entry: PoolItem) -> list[Any]:
        labels = [reason_label(r) for r in entry.reasons]
        kept = labels if max_reasons is None else labels[:max_reasons]
        return [
            entry.space,
            entry.id,
            rounds.get(entry.ref, 0),
            round(entry.score, 4),
            "; ".join(kept),
            len(labels) - len(kept),
        ]

    return [item(entry) for entry in pool.items()]


def evidence_record(
    answer: Answer, *, max_reasons: int | None = None, sources: bool = True
) -> dict[str, Any]:
    """The answer's evidence as the viewer reads it (see the module doc). ``max_reasons`` caps
    the reasons kept per pool candidate (None: all); ``sources=False`` leaves the source
    records out (a run keeps them once per conversation: ``view.report.write_run_sources``)."""
    trace, evidence = answer.trace, answer.evidence
    first_round: dict[Ref, int] = {}
    for r in evidence.rounds:
        for ref in r.refs():
            first_round.setdefault(ref, r.round)
    total = trace.totals.get("total", {}) if trace.totals else {}
    queries = round_queries(evidence)
    plan = evidence.plan
    record = {
        "question": answer.question,
        "answer": answer.text,
        "reasoning": answer.reasoning,
        "mode": answer.mode,
        "termination": evidence.termination,
        "degradations": list(evidence.degradations),
        "cost": {
            "calls": int(total.get("calls", 0)),
            "input_tokens": int(total.get("input_tokens", 0)),
            "output_tokens": int(total.get("output_tokens", 0)),
            "usd": total.get("cost_nominal_usd"),
            "seconds": round(trace.seconds, 3),
        },
        "plan": {
            "need": plan.need,
            "answer_type": plan.answer_type,
            "aggregate": plan.aggregate,
            "temporal": plan.temporal,
            "queries": list(plan.queries),
            "source": plan.source,
            "note": plan.note,
        },
        "rounds": [
            {
                "round": r.round,
                "queries": queries[n],
                "feedback": r.feedback.to_dict() if r.feedback else None,
                "degraded": r.degraded,
            }
            for n, r in enumerate(evidence.rounds)
        ],
        "cards": [card.to_dict() for card in evidence.cards],
        "citations": list(answer.citations),
        "visible": list(evidence.shown.turns),
        "pool": _pool_items(evidence.pool, first_round, max_reasons),
    }
    if sources:
        record["sources"] = answer.sources.to_dict()
    return record
