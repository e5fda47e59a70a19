"""The answer audit: a stratified sample of questions, one shared verification context per
question, each answer split into claims and every claim labelled by a judge blind to the run,
the gold answer and the correctness label."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qemem.answer import is_abstention
from qemem.answer.check import ClaimLabel, Split, passage_lines, split_claims
from qemem.answer.sampling import stratified_sample, weighted_share
from qemem.errors import InputError, StructuredOutputError
from qemem.eval.audit.common import Run, load_run, write_audit
from qemem.eval.stats import paired_bootstrap
from qemem.llm import LLMClient, LLMRequest
from qemem.llm.prompted import prompted_request
from qemem.llm.stages import AUDIT_ANSWER, AUDIT_SPLIT
from qemem.prompts import as_data
from qemem.retrieve.bm25 import BM25Index, tokenize

ANSWERS_FILE = "audit-answers.json"
NEIGHBOURS, PASSAGES = 2, 3


class Conversation:
    """A conversation's turns in order, with a BM25 index over them."""

    def __init__(self, sources: Mapping[str, Any]) -> None:
        turns = sorted(
            sources.get("turns", {}).items(), key=lambda kv: (kv[1]["session"], kv[1]["position"])
        )
        sessions = sources.get("sessions", {})
        self.passages = [
            {
                "id": tid,
                "speaker": t["speaker"],
                "text": t["text"],
                "date": str(sessions.get(str(t["session"]), ""))[:10],
            }
            for tid, t in turns
        ]
        self.order = {p["id"]: n for n, p in enumerate(self.passages)}
        self.sessions = [t["session"] for _, t in turns]
        self.index = BM25Index([tokenize(f"{p['speaker']} {p['text']}") for p in self.passages])

    def window(self, evidence: Sequence[str]) -> list[int]:
        """Positions of the evidence turns and two neighbours each side in their session."""
        keep: set[int] = set()
        for tid in evidence:
            at = self.order.get(tid)
            if at is None:
                continue
            for n in range(at - NEIGHBOURS, at + NEIGHBOURS + 1):
                if 0 <= n < len(self.passages) and self.sessions[n] == self.sessions[at]:
                    keep.add(n)
        return sorted(keep)

    def retrieve(self, text: str, skip: set[int], k: int) -> list[int]:
        """The ``k`` best BM25 passages for ``text`` outside ``skip``."""
        ranked = self.index.rank(tokenize(text))
        return [i for i, _ in ranked if i not in skip][:k]


def split_request(question: str, answer: str) -> LLMRequest:
    """Split an answer into factual claims (the question, for telling core from auxiliary)."""
    return prompted_request(
        "audit_split",
        AUDIT_SPLIT,
        Split,
        "claims",
        {"question": question, "answer": answer},
        max_tokens=1024,
        question=as_data(question),
        answer=as_data(answer),
    )


def label_request(claim: str, passages: Sequence[Mapping[str, str]], attempt: int) -> LLMRequest:
    """Label one claim against the passages (no run, gold answer or correctness label)."""
    return prompted_request(
        "audit_answer",
        AUDIT_ANSWER,
        ClaimLabel,
        "claim_label",
        {"claim": claim, "passages": [dict(p) for p in passages]},
        claim=as_data(claim),
        attempt=attempt,
        passages=passage_lines(passages),
    )


def _label(llm: LLMClient, claim: str, passages: list[dict[str, str]], attempt: int) -> str:
    try:
        return llm.structured(label_request(claim, passages, attempt), ClaimLabel).value.label
    except StructuredOutputError:
        return "unverifiable"


def check_claim(
    llm: LLMClient, convo: Conversation, window: list[int], claim: str
) -> dict[str, Any]:
    """A claim's final label: against the window and its BM25 passages, and once more with
    further passages when the first pass found no support."""
    shown = window + convo.retrieve(claim, set(window), PASSAGES)
    label = _label(llm, claim, [convo.passages[i] for i in shown], 1)
    if label in ("unsupported", "unverifiable"):
        shown += convo.retrieve(claim, set(shown), PASSAGES)
        label = _label(llm, claim, [convo.passages[i] for i in shown], 2)
    return {"label": label, "passages": [convo.passages[i]["id"] for i in shown]}


def audit_answer(llm: LLMClient, convo: Conversation, record: Mapping[str, Any]) -> dict[str, Any]:
    """The claims of one run's answer to one question, each with its label."""
    answer = str(record.get("prediction") or "")
    if is_abstention(answer):
        return {"abstained": True, "claims": []}
    claims, _ = split_claims(llm, split_request(str(record["question"]), answer), answer)
    window = convo.window([str(e) for e in record.get("evidence") or []])
    return {
        "abstained": False,
        "claims": [
            {"text": c.text, "core": c.core, **check_claim(llm, convo, window, c.text)}
            for c in claims
        ],
    }


def scores(audited: Mapping[str, Any], correct: bool) -> dict[str, float]:
    """The per-answer figures of one audited answer."""
    claims = audited["claims"]
    supported = [c["label"] == "supported" for c in claims]
    core = [s for s, c in zip(supported, claims, strict=True) if c["core"]]
    grounded = bool(claims) and all(supported)
    return {
        "fully_grounded": float(grounded),
        "core_grounded": float(bool(core) and all(core)),
        "supported_claims": float(sum(supported)),
        "claims": float(len(claims)),
        "abstention": float(audited["abstained"]),
        "correct_and_grounded": float(grounded and correct),
    }


def _key(record: Mapping[str, Any]) -> str:
    return f"{record['conversation']}#{record['index']}"


def _stratum(records: Sequence[Mapping[str, Any]]) -> str:
    first = records[0]
    turns = len(first.get("evidence") or [])
    complexity = "1" if turns <= 1 else "2" if turns == 2 else ">=3"
    marks = "".join("C" if float(r.get("score") or 0) >= 0.5 else "W" for r in records)
    return f"{first['category']}|{complexity}|{marks}"


def summary(rows: Sequence[Mapping[str, Any]], seed: int) -> dict[str, Any]:
    """Weighted figures (with CIs) of one run over the audited questions."""
    w, s = [r["weight"] for r in rows], [r["stratum"] for r in rows]
    out = {
        m: weighted_share([r["scores"][m] for r in rows], w, s, seed=seed)
        for m in ("fully_grounded", "core_grounded", "abstention", "correct_and_grounded")
    }
    out["claim_support"] = weighted_share(
        [r["scores"]["supported_claims"] for r in rows],
        w,
        s,
        seed=seed,
        denominators=[r["scores"]["claims"] for r in rows],
    )
    out["claims_per_answer"] = weighted_share(
        [r["scores"]["claims"] for r in rows], w, s, seed=seed
    )
    return out


def audit_answers(
    outs: Sequence[Path], llm: LLMClient, *, sample: int = 50, seed: int = 0
) -> dict[str, Any]:
    """Run the answer audit on the run folders ``outs`` (their shared questions); write its
    record into every folder and return it."""
    runs: list[Run] = [load_run(p) for p in outs]
    by_run = [{_key(r): r for r in run.records} for run in runs]
    shared = sorted(set.intersection(*(set(b) for b in by_run)))
    if not shared:
        raise InputError("the runs share no question: audit runs over the same questions")
    drawn = stratified_sample(shared, lambda k: _stratum([b[k] for b in by_run]), sample, seed)
    convos: dict[str, Conversation] = {}
    per_run: list[list[dict[str, Any]]] = [[] for _ in runs]
    for d in drawn:
        cid = str(by_run[0][d.item]["conversation"])
        merged = {k: v for run in reversed(runs) for k, v in run.sources.get(cid, {}).items()}
        convo = convos.setdefault(cid, Conversation(merged))
        for n, b in enumerate(by_run):
            audited = audit_answer(llm, convo, b[d.item])
            correct = float(b[d.item].get("score") or 0) >= 0.5
            per_run[n].append(
                {
                    "key": d.item,
                    "stratum": d.stratum,
                    "weight": d.weight,
                    **audited,
                    "scores": scores(audited, correct),
                }
            )
    record = _record(runs, llm, per_run, sample, seed, len(shared))
    for run in runs:
        write_audit(run.path, ANSWERS_FILE, record)
    return record


def _record(
    runs: Sequence[Run],
    llm: LLMClient,
    per_run: list[list[dict[str, Any]]],
    sample: int,
    seed: int,
    population: int,
) -> dict[str, Any]:
    names = [str(run.path) for run in runs]
    differences = {}
    for n in range(1, len(runs)):
        differences[f"{names[0]} - {names[n]}"] = (
            {
                m: vars(
                    paired_bootstrap(
                        [r["scores"][m] for r in per_run[0]],
                        [r["scores"][m] for r in per_run[n]],
                        seed=seed,
                    )
                )
                for m in ("fully_grounded", "correct_and_grounded")
            }
            if per_run[0]
            else {}
        )
    return {
        "audit": "answers",
        "judge": f"{llm.provider.name}:{llm.provider.model}",
        "sample": sample,
        "seed": seed,
        "population": population,
        "sampled": len(per_run[0]),
        "runs": [
            {"run": name, "summary": summary(rows, seed), "questions": rows}
            for name, rows in zip(names, per_run, strict=True)
        ],
        "differences": differences,
    }
