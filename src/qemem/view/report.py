"""The run page: ``report.html`` of a LoCoMo evaluation folder.

The summary (accuracy by category, evidence visibility, refinement, cost) and the plots sit on
top; below, every question in a table that filters (category, correct/wrong, where the evidence
was lost) and sorts by any column. A row expands into the evidence view of its answer, with the
gold answer and the annotated evidence turns marked; each question's detail is embedded as its
own JSON block and parsed only when the row is opened, and the source records are stored once
per conversation (the run folder's sources.json), which keeps a 1,540-question run small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qemem.audit_names import ANSWER_METRICS, CLAIM_LABELS, MEMORY_LABELS
from qemem.llm.stages import ANSWER_ROUND0, JUDGE
from qemem.view.record import evidence_record
from qemem.view.render import render

Record = Mapping[str, Any]
#: the results.jsonl key holding a question's answer (compact ``answer_to_json``; format 2)
ANSWER_KEY = "answer"
#: where a format-1 record (today's main before the evidence record) kept the viewer's record
LEGACY_VIEW_KEY = "evidence_view"
#: where a wrongly answered question lost its evidence (the table's third filter)
DIAGNOSES = {
    "never_retrieved": "evidence never retrieved",
    "not_cited": "retrieved but not cited",
    "cited_wrong": "cited but wrong",
}


#: stages that measure the method rather than belong to it: the judge and the round-0 answer
#: of the refinement analysis
ANALYSIS_STAGES = (JUDGE, ANSWER_ROUND0)


def correctness(record: Record) -> str:
    """``correct`` (judge score >= 0.5), ``wrong``, or ``unjudged``."""
    score = record.get("score")
    if score is None:
        return "unjudged"
    return "correct" if float(score) >= 0.5 else "wrong"


def diagnosis(record: Record) -> str:
    """Where the annotated evidence was lost: ``never_retrieved`` (not all of it reached any
    pool), ``not_cited`` (pooled, but the cards do not cite all of it), ``cited_wrong`` (all
    cited, yet the answer was judged wrong); "" otherwise or without evidence."""
    if not record.get("evidence"):
        return ""
    seen = record.get("visibility", {})
    if seen.get("refined") is False:
        return "never_retrieved"
    if seen.get("cited") is False:
        return "not_cited"
    if seen.get("cited") and correctness(record) == "wrong":
        return "cited_wrong"
    return ""


def method_cost(record: Record) -> tuple[int, float | None]:
    """LLM calls and nominal USD of answering (the judge and the round-0 answer of the
    refinement analysis left out; USD None when unpriced)."""
    stages = [t for stage, t in record.get("llm", {}).items() if stage not in ANALYSIS_STAGES]
    costs = [t.get("cost_usd") for t in stages]
    usd = None if any(c is None for c in costs) else sum(float(c) for c in costs)
    return sum(int(t.get("calls", 0)) for t in stages), usd


def view_record(record: Record) -> dict[str, Any] | None:
    """The viewer's record of a results.jsonl record: built from its answer (format 2), or
    the one a format-1 record stored itself; None when it has neither."""
    if ANSWER_KEY in record:
        return evidence_record(record[ANSWER_KEY])
    legacy = record.get(LEGACY_VIEW_KEY)
    return dict(legacy) if legacy is not None else None


def row(number: int, record: Record) -> dict[str, Any]:
    """The table row of a record (what the template shows, sorts and filters on)."""
    seen = record.get("visibility", {})
    calls, usd = method_cost(record)
    refine = record.get("refinement", {})
    return {
        "n": number,
        "key": f"{record['conversation']}#{record['index']}",
        "category": int(record["category"]),
        "category_name": record.get("category_name", ""),
        "question": record.get("question", ""),
        "labels": "/".join(record.get("judge_labels", [])) or "–",
        "correctness": correctness(record),
        "f1": record.get("f1"),
        "initial": seen.get("initial"),
        "final": seen.get("final"),
        "cited": seen.get("cited"),
        "rounds": int(refine.get("rounds", 0)),
        "termination": refine.get("termination") or "",
        "calls": calls,
        "usd": usd,
        "diagnosis": diagnosis(record),
        "expandable": ANSWER_KEY in record or LEGACY_VIEW_KEY in record,
    }


def detail(record: Record, view: Mapping[str, Any]) -> dict[str, Any]:
    """What an expanded row renders: the viewer's record ``view`` less its sources (kept once
    per conversation), with the conversation, gold answer, annotated evidence and judge
    labels."""
    evidence = {k: v for k, v in view.items() if k != "sources"}
    return {
        "conversation": record["conversation"],
        "gold": record.get("gold", ""),
        "evidence_ids": list(record.get("evidence", [])),
        "labels": list(record.get("judge_labels", [])),
        "record": evidence,
    }


def conversation_sources(
    records: Sequence[Record], views: Mapping[int, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per conversation, the union of the source records the viewer's records (``views``, by
    record number) carry themselves."""
    out: dict[str, dict[str, Any]] = {}
    for n, record in enumerate(records):
        sources = views.get(n, {}).get("sources")
        if not sources:
            continue
        merged = out.setdefault(
            str(record["conversation"]),
            {"speakers": [], "sessions": {}, "turns": {}, "episodes": {}, "facts": {}},
        )
        merged["speakers"] = sources.get("speakers", merged["speakers"])
        for key in ("sessions", "turns", "episodes", "facts"):
            merged[key].update(sources.get(key, {}))
    for merged in out.values():
        turns = merged["turns"]
        merged["turns"] = dict(
            sorted(turns.items(), key=lambda kv: (kv[1]["session"], kv[1]["position"]))
        )
    return out


def report_html(
    records: Sequence[Record],
    summary: Mapping[str, Any],
    plots: Sequence[Mapping[str, str]] = (),
    sources: Mapping[str, Any] | None = None,
    audits: Mapping[str, Any] | None = None,
) -> str:
    """The run page for the results.jsonl ``records`` (in table order) with the run's
    ``summary`` (see the module doc). ``plots`` are ``{"name", "src"}`` images; ``sources`` are
    the source records by conversation (a run's sources.json); for a conversation it lacks, the
    sources the records carry themselves are used. ``audits`` are the run's audit records by
    kind (``claims``, ``answers``, ``memory``: its audit-*.json), each shown in its own
    section."""
    views = {n: v for n, r in enumerate(records) if (v := view_record(r)) is not None}
    asked = {str(r["conversation"]) for r in records}
    conversations = {cid: s for cid, s in (sources or {}).items() if cid in asked}
    for cid, own in conversation_sources(records, views).items():
        conversations.setdefault(cid, own)
    return render(
        "report.html.j2",
        title=f"qemem LoCoMo run: {summary.get('mode', '')}",
        summary=summary,
        rows=[row(n, r) for n, r in enumerate(records)],
        details={n: detail(records[n], view) for n, view in views.items()},
        conversations=conversations,
        categories=sorted({(int(r["category"]), r.get("category_name", "")) for r in records}),
        diagnoses=DIAGNOSES,
        plots=list(plots),
        audits=dict(audits or {}),
        audit_labels=CLAIM_LABELS,
        answer_metrics=ANSWER_METRICS,
        memory_labels=MEMORY_LABELS,
    )
