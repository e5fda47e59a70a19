"""The results.jsonl record of one question: what the answer showed of the annotated evidence
(each visibility read from the evidence record), its scores, its cost per stage and its
refinement."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from qemem.answer import Answer
from qemem.answer.wire import answer_to_json
from qemem.eval.coverage import budget_positions, evidence_rank, exposure_groups
from qemem.eval.grounding import card_records
from qemem.eval.judge import Judgement
from qemem.eval.metrics import bleu1, f1_common, f1_locomo
from qemem.evidence.refine import Evidence
from qemem.ingest.locomo import LocomoQuestion
from qemem.llm import stage_group
from qemem.llm.stages import ANSWER_ROUND0, CONSTRUCT
from qemem.models import Turn
from qemem.view.record import RUN_REASONS

#: the results.jsonl record format: 2 keeps the answer's compact JSON under ``answer``; format
#: 1 (records without ``format``, written before the evidence record) kept the viewer's record
#: under ``evidence_view``, which ``eval report`` and the run page still read
RECORD_FORMAT = 2


def evidence_share(
    ids: Iterable[str], evidence: Sequence[str], aliases: Mapping[str, object]
) -> float | None:
    """Share of the evidence turns shown by ``ids`` (an alias counts); None for no evidence."""
    needed = {aliases.get(e, ("missing", e)) for e in evidence}
    if not needed:
        return None
    shown = {aliases.get(i, ("missing", i)) for i in ids}
    return len(needed & shown) / len(needed)


def evidence_visible(
    ids: Sequence[str], evidence: Sequence[str], aliases: Mapping[str, object]
) -> bool | None:
    """Whether ``ids`` show every evidence turn (or an alias of it); None for no evidence."""
    if not evidence:
        return None
    return evidence_rank(ids, evidence, aliases) is not None


def stage_costs(calls: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Calls, tokens (the provider's prompt-cache writes and reads among the input) and
    nominal cost per stage group (cost None when a call had no price)."""
    out: dict[str, dict[str, Any]] = {}
    for call in calls:
        tally = out.setdefault(
            stage_group(str(call["stage"])),
            {
                "calls": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_write_tokens": 0,
                "cache_read_tokens": 0,
                "cost_usd": 0.0,
            },
        )
        tally["calls"] += 1
        for name in ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens"):
            tally[name] += int(call.get(name, 0))
        cost = call.get("cost_usd")
        tally["cost_usd"] = (
            None if cost is None or tally["cost_usd"] is None else (tally["cost_usd"] + float(cost))
        )
    return dict(sorted(out.items()))


def refinement_info(answer: Answer, round0: Judgement | None = None) -> dict[str, Any]:
    """Whether round 0 asked for refinement (full mode), rounds run, and the refinement calls:
    the constructor calls of the rounds after the first (repairs included), as the evidence
    record keeps them per round; the answer from the round-0 cards (``Answer.round0``, made
    only when refinement was triggered), its judgement ``round0`` and the cost of its answer
    call (stage ``answer_round0``, an analysis cost outside the method's)."""
    evidence = answer.evidence
    first = evidence.rounds[0].feedback if evidence.rounds else None
    triggered = answer.mode == "full" and first is not None and not first.sufficient
    extra = [c for r in evidence.rounds[1:] for c in r.calls]
    cost = stage_costs(extra).get(CONSTRUCT, {})
    rounds = len(evidence.rounds) - 1 if answer.mode in ("full", "no-refine") else 0
    before = stage_costs(answer.trace.calls).get(ANSWER_ROUND0, {})
    return {
        "triggered": triggered,
        "rounds": max(0, rounds),
        "termination": evidence.termination,
        "extra_calls": len(extra),
        "extra_input_tokens": int(cost.get("input_tokens", 0)),
        "extra_output_tokens": int(cost.get("output_tokens", 0)),
        "extra_cost_usd": cost.get("cost_usd", 0.0),
        "round0_answer": answer.round0.text if answer.round0 is not None else None,
        "round0_judge_labels": list(round0.labels) if round0 else [],
        "round0_score": round0.score if round0 else None,
        "round0_calls": int(before.get("calls", 0)),
        "round0_cost_usd": before.get("cost_usd", 0.0),
    }


def _evidence_spread(evidence: Sequence[str], turns: Mapping[str, Turn]) -> dict[str, Any]:
    """The sessions of the evidence turns, the days they span, and the ids the store lacks."""
    known = [turns[e] for e in evidence if e in turns]
    dates = [t.timestamp.date() for t in known]
    return {
        "evidence_sessions": sorted({t.session for t in known}),
        "evidence_span_days": (max(dates) - min(dates)).days if dates else None,
        "evidence_unknown": [e for e in evidence if e not in turns],
    }


def _initial_rank(
    record: Evidence, evidence: Sequence[str], aliases: Mapping[str, object]
) -> int | None:
    """The strict budget position at which the round-0 pool covers the evidence."""
    if not evidence:
        return None
    groups = exposure_groups(record.rounds[0].pool)
    return budget_positions(groups, evidence, aliases)[0]


def make_record(
    question: LocomoQuestion,
    answer: Answer,
    judgement: Judgement | None,
    judge_calls: Sequence[Mapping[str, Any]],
    turns: Mapping[str, Turn],
    aliases: Mapping[str, object],
    latency: Mapping[str, float],
    round0: Judgement | None = None,
) -> dict[str, Any]:
    """The results.jsonl record of one answered (and judged) question; scores are None in
    retrieval mode (no answer), cards and card citations None in modes without cards. Every
    turn set is read from the evidence record: the turns each round's candidates expose, and
    what the answer prompt showed (``Evidence.shown``; the "cited" visibility counts the turns
    of its cited-sources section, not every turn behind a cited episode or fact). ``round0``
    judges the answer from the round-0 cards, when the question triggered refinement."""
    evidence = list(question.evidence)
    record = answer.evidence
    initial = record.turn_ids([0])
    refined = record.turn_ids(range(len(record.rounds)))
    visible = list(record.shown.turns)
    cited = list(record.shown.cited_context)
    gold, prediction = question.answer, answer.text
    answers, cards = answer.mode != "retrieval", answer.mode in ("full", "no-refine")
    return {
        "conversation": question.conversation,
        "index": question.index,
        "mode": answer.mode,
        "question": question.question,
        "gold": gold,
        "category": question.category,
        "category_name": question.category_name,
        "evidence": evidence,
        "prediction": prediction,
        "judge_labels": list(judgement.labels) if judgement else [],
        "judge_parse_failures": judgement.parse_failures if judgement else 0,
        "score": judgement.score if judgement else None,
        "f1": f1_common(prediction, gold) if answers else None,
        "f1_locomo": f1_locomo(prediction, gold, question.category) if answers else None,
        "bleu1": bleu1(prediction, gold) if answers else None,
        "llm": stage_costs([*answer.trace.calls, *judge_calls]),
        "latency_s": {k: round(v, 3) for k, v in latency.items()},
        "refinement": refinement_info(answer, round0),
        "visible_turn_ids": visible,
        "cited_turn_ids": list(answer.citations),
        "cited_context_turn_ids": cited if cards else None,
        "cards": card_records(answer.cards) if cards else None,
        "initial_pool_turn_ids": initial,
        "refined_pool_turn_ids": refined,
        **_evidence_spread(evidence, turns),
        "visibility": {
            "initial": evidence_visible(initial, evidence, aliases),
            "refined": evidence_visible(refined, evidence, aliases),
            "final": evidence_visible(visible, evidence, aliases),
            "cited": evidence_visible(cited, evidence, aliases) if cards else None,
            "cited_share": evidence_share(cited, evidence, aliases) if cards else None,
            "initial_pool_rank": _initial_rank(record, evidence, aliases),
        },
        "degradations": list(record.degradations),
        "format": RECORD_FORMAT,
        "answer": answer_to_json(answer, compact=True, max_reasons=RUN_REASONS),
    }
