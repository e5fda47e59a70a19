"""The claim audit: a stratified sample of a run's cards, each judged from only its claim, its
time and its cited sources (never the question, the gold answer, the label or the run)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pydantic

from qemem.answer.sampling import Drawn, stratified_sample, weighted_share
from qemem.audit_names import CLAIM_LABELS, ClaimLabel
from qemem.errors import StructuredOutputError
from qemem.eval.audit.common import load_run, record_cards, session_date, write_audit
from qemem.llm import LLMClient, LLMRequest
from qemem.llm.prompted import prompted_request
from qemem.llm.stages import AUDIT_CLAIM
from qemem.prompts import as_data

CLAIMS_FILE = "audit-claims.json"
_SPACES = {"turn": "turns", "episode": "episodes", "fact": "facts"}


class ClaimVerdict(pydantic.BaseModel):
    """The judge's output for one card."""

    label: ClaimLabel
    reason: str = ""

    @pydantic.field_validator("label", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return (
            " ".join(value.lower().replace("_", " ").split()) if isinstance(value, str) else value
        )


def card_refs(card: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """The (space, id) pairs a card cites (space None for an old card without refs)."""
    refs = card.get("refs")
    if refs:
        return [(str(r["space"]), str(r["id"])) for r in refs]
    return [(None, str(s)) for s in card.get("sources") or []]


def source_entry(sources: Mapping[str, Any], space: str | None, rid: str) -> dict[str, str] | None:
    """A cited record's id, kind, date and text (None when the id resolves to nothing)."""
    for kind, key in _SPACES.items():
        found = sources.get(key, {}).get(rid) if space in (None, kind) else None
        if found is None:
            continue
        if kind == "turn":
            text = f"{found['speaker']}: {found['text']}"
        elif kind == "episode":
            text = f"{found['title']}: {found['content']}"
        else:
            text = str(found["content"])
        return {
            "id": rid,
            "kind": kind,
            "date": session_date(sources, found["session"]),
            "text": text,
        }
    return None


def grounding(card: Mapping[str, Any]) -> str:
    """What a card's quote is grounded in: turn, episode or fact."""
    kind = card.get("grounded_in")
    if kind in _SPACES:
        return str(kind)
    refs = card_refs(card)
    return refs[0][0] or "turn" if refs else "turn"


def card_time(card: Mapping[str, Any]) -> str:
    """The card's time field, with the rule's resolution when it has one (a session-date
    fallback as the day it was said; a plan marked)."""
    parts = [str(card.get("time") or "")]
    resolved = card.get("resolved_time") or {}
    fallback = card.get("time_basis") == "session" or resolved.get("expression") == ""
    if resolved.get("phrase"):
        parts.append(f"{'said on' if fallback else 'rule:'} {resolved['phrase']}")
    if card.get("planned"):
        parts.append("planned")
    return "; ".join(p for p in parts if p) or "(none)"


def claim_request(claim: str, time: str, cited: Sequence[Mapping[str, str]]) -> LLMRequest:
    """The judge request for one card: its claim, time and cited sources, nothing else."""
    lines = [
        f"[{s['id']}] ({s['kind']}, {s['date'] or 'undated'}) {as_data(s['text'])}" for s in cited
    ] or ["(no cited source could be found)"]
    return prompted_request(
        "audit_claim",
        AUDIT_CLAIM,
        ClaimVerdict,
        "claim_verdict",
        {"claim": claim, "time": time, "sources": [dict(s) for s in cited]},
        claim=as_data(claim),
        time=as_data(time),
        sources="\n".join(lines),
    )


def population(
    records: Sequence[Mapping[str, Any]], sources: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Every card of the run with its stratum inputs and its resolved cited sources."""
    cards = []
    for record in records:
        convo = sources.get(str(record["conversation"]), {})
        for number, card in enumerate(record_cards(record)):
            refs = card_refs(card)
            cited = [e for s, i in refs if (e := source_entry(convo, s, i)) is not None]
            cards.append(
                {
                    "key": f"{record['conversation']}#{record['index']}/{number}",
                    "category": int(record["category"]),
                    "grounded_in": grounding(card),
                    "claim": str(card.get("claim", "")),
                    "time": card_time(card),
                    "cited": cited,
                    "unresolved": len(cited) < len(refs) or bool(card.get("unresolved_sources")),
                }
            )
    return cards


def judge_card(llm: LLMClient, card: Mapping[str, Any]) -> dict[str, Any]:
    """The judge's label and reason for one card (label None when its output never parsed)."""
    request = claim_request(card["claim"], card["time"], card["cited"])
    try:
        verdict = llm.structured(request, ClaimVerdict).value
    except StructuredOutputError as exc:
        return {"label": None, "reason": f"judge output did not parse: {exc}"[:200]}
    return {"label": verdict.label, "reason": " ".join(verdict.reason.split())[:300]}


def shares(judged: Sequence[Mapping[str, Any]], seed: int) -> dict[str, Any]:
    """Weighted share (with CI) of every label and of 'fully or partially supported'."""
    rows = [j for j in judged if j["label"] is not None]
    weights = [j["weight"] for j in rows]
    strata = [j["stratum"] for j in rows]
    out: dict[str, Any] = {
        label: weighted_share([j["label"] == label for j in rows], weights, strata, seed=seed)
        for label in CLAIM_LABELS
    }
    out["supported_or_partial"] = weighted_share(
        [j["label"] in CLAIM_LABELS[:2] for j in rows], weights, strata, seed=seed
    )
    out["counts"] = dict(Counter(str(j["label"]) for j in judged))
    return out


def audit_claims(out: Path, llm: LLMClient, *, sample: int = 60, seed: int = 0) -> dict[str, Any]:
    """Run the claim audit on the run folder ``out``; write and return its record."""
    run = load_run(out)
    cards = population(run.records, run.sources)
    drawn: list[Drawn] = (
        stratified_sample(cards, lambda c: f"{c['category']}|{c['grounded_in']}", sample, seed)
        if cards
        else []
    )
    judged = [
        {**d.item, "stratum": d.stratum, "weight": d.weight, **judge_card(llm, d.item)}
        for d in drawn
    ]
    by_stratum = {
        key: {
            "population": sum(1 for c in cards if f"{c['category']}|{c['grounded_in']}" == key),
            **shares([j for j in judged if j["stratum"] == key], seed),
        }
        for key in sorted({j["stratum"] for j in judged})
    }
    record = {
        "audit": "claims",
        "judge": f"{llm.provider.name}:{llm.provider.model}",
        "sample": sample,
        "seed": seed,
        "population": len(cards),
        "sampled": len(judged),
        "unresolved_share": round(sum(c["unresolved"] for c in cards) / len(cards), 4)
        if cards
        else None,
        "overall": shares(judged, seed),
        "by_stratum": by_stratum,
        "cards": [
            {
                k: j[k]
                for k in (
                    "key",
                    "stratum",
                    "weight",
                    "claim",
                    "time",
                    "label",
                    "reason",
                    "unresolved",
                )
            }
            | {"sources": [c["id"] for c in j["cited"]]}
            for j in judged
        ],
    }
    write_audit(out, CLAIMS_FILE, record)
    return record
