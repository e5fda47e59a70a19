"""A BEAM run's probes (read from the LoCoMo-shaped file ``qemem data beam`` writes) and the
``results.jsonl`` record of one answered, judged probe.

A record keeps the answer, the judge's item scores and reasons, the event-ordering alignment
and scores, the probe's score (``tau_norm`` for event ordering, else the rubric mean; None when
nothing judged it), what the answer showed of the evidence (LLM-free: whether the initial pool
and the answer prompt held every evidence turn, and the token budget at which the exposure
order held it), and the cost of each stage. ``score``, ``f1``, ``f1_locomo`` and
``visibility.final`` have the meaning ``qemem eval compare`` reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qemem.errors import InputError
from qemem.eval.answering import Answered, shared_record
from qemem.eval.beam_judge import answer_lines, judge_rubric, match_order
from qemem.eval.beam_scoring import ORDERING_ABILITY, aligned_items, ordering_score, rubric_score
from qemem.llm import Ledger, LLMClient

RECORD_FORMAT = "beam/1"


@dataclass(frozen=True)
class BeamProbe:
    """One probe: where it is (conversation, index in the sample's ``qa``), what it asks and
    how it is scored."""

    conversation: str
    index: int
    question: str
    answer: str
    ability: str
    rubric: tuple[str, ...]
    evidence: tuple[str, ...]
    ordering_items: tuple[str, ...] = ()


def _probe(item: Any, cid: str, index: int, file: str) -> BeamProbe:
    def fail(message: str, name: str) -> InputError:
        return InputError(message, file=file, record=f"sample {cid}, qa {index}", field=name)

    if not isinstance(item, dict):
        raise fail("a QA item must be an object", "qa")
    if not isinstance(item.get("ability"), str):
        raise fail(
            "not a BEAM probe (no 'ability'): convert BEAM with `qemem data beam`", "ability"
        )
    rubric = item.get("rubric")
    if not isinstance(rubric, list) or not rubric or not all(isinstance(r, str) for r in rubric):
        raise fail("'rubric' must be a non-empty list of strings", "rubric")
    for name in ("question", "answer"):
        if not isinstance(item.get(name), str) or not item[name].strip():
            raise fail(f"missing or empty {name!r}", name)
    evidence = item.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise fail("'evidence' must be a list of turn ids", "evidence")
    return BeamProbe(
        cid,
        index,
        item["question"],
        item["answer"],
        item["ability"],
        tuple(rubric),
        tuple(evidence),
        tuple(str(i) for i in item.get("ordering_items", [])),
    )


def beam_probes(samples: Sequence[dict[str, Any]], file: str = "<input>") -> list[BeamProbe]:
    """Every probe of the samples, in file order; InputError names what is not a BEAM probe."""
    probes: list[BeamProbe] = []
    for n, sample in enumerate(samples):
        cid = str(sample.get("sample_id") or f"sample-{n}")
        items = sample.get("qa", [])
        if not isinstance(items, list):
            raise InputError("'qa' must be a list", file=file, record=f"sample {cid}", field="qa")
        probes.extend(_probe(item, cid, i, file) for i, item in enumerate(items))
    return probes


def judge_probe(
    judge: LLMClient, probe: BeamProbe, prediction: str, *, max_tokens: int, ledger: Ledger
) -> dict[str, Any]:
    """The judge's verdicts on ``prediction``: rubric items, and for event ordering the
    alignment and order scores; ``score`` is the probe's score."""
    rubric = judge_rubric(
        judge, probe.question, probe.rubric, prediction, max_tokens=max_tokens, ledger=ledger
    )
    verdict: dict[str, Any] = {
        "rubric_scores": rubric.scores,
        "rubric_reasons": rubric.reasons,
        "rubric_score": rubric_score(rubric.scores),
        "judge_parse_failures": rubric.parse_failures,
        "ordering": None,
    }
    verdict["score"] = verdict["rubric_score"]
    if probe.ability == ORDERING_ABILITY:
        reference = list(probe.ordering_items or probe.rubric)
        lines = answer_lines(prediction)
        matches, parsed = match_order(judge, reference, lines, max_tokens=max_tokens, ledger=ledger)
        order = ordering_score(reference, aligned_items(reference, lines, matches))
        verdict["judge_parse_failures"] += 0 if parsed else 1
        verdict["ordering"] = {
            "lines": lines,
            "matches": matches,
            "precision": order.precision,
            "recall": order.recall,
            "f1": order.f1,
            "tau_norm": order.tau_norm,
            "tau_norm_x_f1": order.final,
        }
        verdict["score"] = order.tau_norm
    return verdict


def beam_record(
    probe: BeamProbe,
    mode: str,
    answered: Answered,
    verdict: Mapping[str, Any] | None,
    judge_calls: Sequence[Mapping[str, Any]],
    aliases: Mapping[str, object],
    tokens: Mapping[str, int],
    latency: Mapping[str, float],
) -> dict[str, Any]:
    """The results.jsonl record of one probe."""
    evidence = list(probe.evidence)
    shared = shared_record(answered, evidence, judge_calls, aliases, tokens, latency)
    return {
        "conversation": probe.conversation,
        "index": probe.index,
        "mode": mode,
        "question": probe.question,
        "gold": probe.answer,
        "ability": probe.ability,
        "rubric": list(probe.rubric),
        "evidence": evidence,
        "rubric_scores": list(verdict["rubric_scores"]) if verdict else [],
        "rubric_reasons": list(verdict["rubric_reasons"]) if verdict else [],
        "rubric_score": verdict["rubric_score"] if verdict else None,
        "ordering": verdict["ordering"] if verdict else None,
        "judge_parse_failures": verdict["judge_parse_failures"] if verdict else 0,
        "score": verdict["score"] if verdict else None,
        "f1": None,
        "f1_locomo": None,
        **shared,
        "format": RECORD_FORMAT,
    }
