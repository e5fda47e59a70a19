"""The one JSON form of an ``Answer`` (and of a ``Pool``, a context block ``Context``, a
``CheckResult`` and a ``MemoryAudit``): what the CLI prints with ``--json``, what the HTTP
service and MCP return, what ``RemoteMemory`` reads back, and (compact) what a run keeps per
question.

The form is pydantic's serialisation of the dataclasses themselves, so it has no hand-written
twin to drift: a ``Ref`` is an object ``{"space": "turn", "id": "D3:12"}``, never a string to
parse. ``compact`` leaves out what a run stores once per conversation or does not need per
question: the source records (``sources``, and ``across.sources`` of an answer across
conversations), the pool times, and the merged pool's records (it keeps only its candidates'
refs, in pool order: each round's entries carry the rest, their reasons without empty fields).
Fields that only results across conversations set (a ref's ``conversation``, ``across``) are
left out while unset, so single-conversation JSON does not change.

``answer_brief`` is the profile of that form an agent's tool returns (MCP): the text, the cards'
claims, quotes and shown times, the citations; ``record_brief`` a record as the tools show it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import TypeAdapter

from qemem.answer.ask import Answer
from qemem.answer.check import CheckResult
from qemem.answer.memory_audit import MemoryAudit
from qemem.evidence.block import Context
from qemem.models import Episode, Pool, SemanticFact, Turn, format_datetime


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def answer_to_json(
    answer: Answer, *, compact: bool = False, max_reasons: int | None = None
) -> dict[str, Any]:
    """The answer as JSON-ready data (see the module doc for ``compact``; ``max_reasons``
    caps the reasons a compact round entry keeps, counting the rest in ``more_reasons``)."""
    data: dict[str, Any] = _adapter(Answer).dump_python(answer, mode="json")
    if not compact:
        return data
    del data["sources"], data["pool_times"]
    pool = data["evidence"]["pool"]
    for space in ("episodes", "facts", "turns"):
        pool[space] = [
            {"space": i["space"], "id": i["record"]["id"]}
            | ({"conversation": i["conversation"]} if "conversation" in i else {})
            for i in pool[space]
        ]
    if "across" in data:
        del data["across"]["sources"]
    for round_ in data["evidence"]["rounds"]:
        for entry in round_["pool"]:
            reasons = entry["reasons"]
            kept = reasons[:max_reasons] if max_reasons is not None else reasons
            entry["more_reasons"] = len(reasons) - len(kept)
            entry["reasons"] = [{k: v for k, v in r.items() if v is not None} for r in kept]
    return data


def answer_from_json(data: Any) -> Answer:
    """An ``Answer`` from its (full) JSON form, as :func:`answer_to_json` wrote it."""
    answer: Answer = _adapter(Answer).validate_python(data)
    return answer


def record_brief(record: Turn | Episode | SemanticFact) -> dict[str, Any]:
    """A record as an agent's tool shows it: a turn's id, date, speaker and text; an
    episode's id, date, title, text and turns; a fact's id, text and episodes."""
    if isinstance(record, Turn):
        return {
            "id": record.id,
            "date": format_datetime(record.timestamp),
            "speaker": record.speaker,
            "text": record.text,
        }
    if isinstance(record, Episode):
        return {
            "id": record.id,
            "date": format_datetime(record.timestamp),
            "title": record.title,
            "text": record.content,
            "turns": list(record.turn_ids),
        }
    return {"id": record.id, "text": record.content, "episodes": list(record.episode_ids)}


TOOL_CARD = {
    "claim": "claim",
    "quote": "quote",
    "verified": "verified_quote",
    "planned": "planned",
    "grounded_in": "grounded_in",
    "sources": "sources",
}
"""The card fields of :func:`answer_brief`: field of the JSON form -> its name there."""


def answer_brief(answer: Answer) -> dict[str, Any]:
    """The profile of :func:`answer_to_json` an agent's tool returns: ``answer`` (the text),
    ``mode``, ``citations`` and per card the ``TOOL_CARD`` fields with ``time``, the time a
    reader is shown (``ViewCard.shown_time``); across conversations each card's ``cited``
    refs (conversation, space and id of each source). In mode ``retrieval`` (no answer),
    ``evidence`` holds the pool's turns (``record_brief``, with their conversation across
    conversations)."""
    data = answer_to_json(answer)
    across = answer.across is not None
    cards = []
    for card, form in zip(answer.cards, data["evidence"]["cards"], strict=True):
        brief = {name: form[field] for field, name in TOOL_CARD.items()}
        brief = {**brief, "time": card.shown_time} | ({"cited": form["refs"]} if across else {})
        cards.append(brief)
    evidence = [
        ({"conversation": item.conversation} if item.conversation is not None else {})
        | record_brief(item.record)
        for item in (answer.pool.turns if answer.mode == "retrieval" else [])
    ]
    return {
        "answer": data["text"],
        "mode": data["mode"],
        "cards": cards,
        "citations": data["citations"],
        "evidence": evidence,
    }


def pool_to_json(pool: Pool) -> dict[str, Any]:
    """A pool as JSON-ready data (the same form as an answer's ``evidence.pool``)."""
    data: dict[str, Any] = _adapter(Pool).dump_python(pool, mode="json")
    return data


def context_to_json(context: Context) -> dict[str, Any]:
    """A context block as JSON-ready data: ``text``, ``items`` (each with its ``ref``),
    ``tokens`` and the rest of :class:`~qemem.evidence.block.Context`."""
    data: dict[str, Any] = _adapter(Context).dump_python(context, mode="json")
    return data


def context_from_json(data: Any) -> Context:
    """A ``Context`` from :func:`context_to_json`'s form."""
    context: Context = _adapter(Context).validate_python(data)
    return context


def check_to_json(result: CheckResult) -> dict[str, Any]:
    """A check result as JSON-ready data (what ``--json``, HTTP and MCP return)."""
    data: dict[str, Any] = _adapter(CheckResult).dump_python(result, mode="json")
    return data


def check_from_json(data: Any) -> CheckResult:
    """A ``CheckResult`` from the JSON form :func:`check_to_json` wrote."""
    result: CheckResult = _adapter(CheckResult).validate_python(data)
    return result


def audit_to_json(audit: MemoryAudit) -> dict[str, Any]:
    """A memory audit as JSON-ready data (what ``--json``, HTTP and a run folder keep)."""
    data: dict[str, Any] = _adapter(MemoryAudit).dump_python(audit, mode="json")
    return data


def audit_from_json(data: Any) -> MemoryAudit:
    """A ``MemoryAudit`` from the JSON form :func:`audit_to_json` wrote."""
    audit: MemoryAudit = _adapter(MemoryAudit).validate_python(data)
    return audit
