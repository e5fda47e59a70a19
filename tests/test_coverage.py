from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from qemem.embed.base import HashEmbedder
from qemem.eval.coverage import (
    budget_positions,
    category_coverage,
    coverage_curve,
    evaluate_coverage,
    evaluate_pool_coverage,
    exposure_groups,
    milestone,
)
from qemem.ingest.locomo import LocomoQuestion
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.models import Pool, PoolItem, Reason, SemanticFact, Turn
from qemem.passages import turn_tokens
from qemem.retrieve.budgets import RetrievalConfig
from qemem.store.sqlite import SQLiteStore
from qemem.testing import OfflineLLM

SAMPLE = Path(__file__).parents[1] / "src" / "qemem" / "data" / "sample.json"
WHEN = datetime(2024, 3, 14, 19, 15)


def test_strict_and_inclusive_budget_rules() -> None:
    groups = [["a", "b", "c"], ["d", "e", "f", "g"]]
    aliases = {t: t for t in "abcdefg"}
    assert budget_positions(groups, ["f"], aliases) == (7, 4)
    assert budget_positions(groups, ["b"], aliases) == (3, 1)
    assert budget_positions(groups, ["a", "x"], aliases) == (None, None)
    assert budget_positions(groups, [], aliases) == (0, 0)
    strict, inclusive = budget_positions(groups, ["f"], aliases)
    # budget 5: strict stops before the 4-turn candidate (3 + 4 > 5); inclusive takes it
    assert coverage_curve([strict], [3, 5, 7]) == {3: 0.0, 5: 0.0, 7: 1.0}
    assert coverage_curve([inclusive], [3, 5, 7]) == {3: 0.0, 5: 1.0, 7: 1.0}


def test_token_budgets_and_aliases() -> None:
    groups = [["a", "b"], ["c"], ["d"]]
    cost = {"a": 100, "b": 250, "c": 400, "d": 50}
    aliases = {"a": 1, "b": 2, "c": 3, "d": 4, "c2": 3}
    assert budget_positions(groups, ["c2"], aliases, cost) == (750, 351)  # c2 is an alias of c
    assert budget_positions(groups, ["a", "d"], aliases, cost) == (800, 751)
    turn = Turn("D1:1", "c", 1, 0, "Ann", "x" * 11, WHEN)  # "Ann: " + 11 chars = 16 chars
    assert turn_tokens(turn) == 4
    assert turn_tokens(Turn("D1:2", "c", 1, 1, "Ann", "x" * 12, WHEN)) == 5


def _item(tid: str, position: int | None, reasons: list[Reason]) -> PoolItem:
    turn = Turn(tid, "c", 1, int(tid[1:]), "A", tid, WHEN)
    return PoolItem("turn", turn, 0.0, reasons, position)


def test_exposure_groups_follow_positions_and_deduplicate() -> None:
    ranked = Reason("ranked", query=0, method="dense", rank=1)
    pool = Pool(
        "c",
        ["q"],
        facts=[PoolItem("fact", SemanticFact("S1", "c", "f", 1, ("E1",)), 0.05, [], 1)],
        turns=[
            _item("t1", 2, [ranked]),
            _item("t2", None, [Reason("context", via="t1")]),
            _item("t3", None, [Reason("provenance", via="S1"), Reason("context", via="t4")]),
            _item("t4", 0, [ranked]),
            _item("t5", None, [Reason("context", via="t4"), Reason("context", via="t1")]),
        ],
    )
    # S1's t3 already shown
    assert exposure_groups(pool.entries()) == [["t3", "t4", "t5"], ["t1", "t2"]]


def test_pool_coverage_end_to_end() -> None:
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder())
    report = evaluate_pool_coverage(memory, SAMPLE, config=RetrievalConfig(budget_turns=5))
    data = json.loads(json.dumps(report.to_dict()))
    assert data["questions"] == report.questions > 0
    assert set(data["curves"]) == {
        "turns/strict",
        "turns/inclusive",
        "tokens/strict",
        "tokens/inclusive",
    }
    assert list(data["coverage"]) == [str(b) for b in range(10, 121, 10)]
    curves = report.curves
    for budget in range(10, 121, 10):  # the inclusive rule never covers less
        assert curves["turns/inclusive"][budget] >= curves["turns/strict"][budget]
    assert data["auc"] == pytest.approx(sum(curves["turns/strict"].values()) / 12, abs=1e-4)
    assert 0 < report.pool_turns <= 5 * 5
    plain = evaluate_coverage(memory, SAMPLE).to_dict()
    assert {"questions", "coverage", "auc"} <= set(plain)


def test_pool_coverage_with_a_planner() -> None:
    def plan(request: LLMRequest) -> dict[str, object]:
        return {
            "need": "n",
            "answer_type": "list",
            "aggregate": True,
            "temporal": False,
            "queries": ["books Priya read", "novel", "pottery", "half marathon"],
        }

    fake = OfflineLLM(plan)
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder())
    report = evaluate_pool_coverage(memory, SAMPLE, llm=LLMClient(fake), categories=(1,))
    assert report.questions == len(fake.calls) > 0
    assert report.planner.startswith("LLMClient(fake")
    assert "Priya and Tomas" in fake.calls[0].messages[0].content


def test_milestone_is_the_smallest_budget_reaching_the_target() -> None:
    ranks = [5, 10, None, 20, 30]
    assert milestone(ranks, 0.8) == 30  # four of five covered by 30
    assert milestone(ranks, 0.6) == 20
    assert milestone(ranks, 0.2) == 5
    assert milestone([5, None, None, 20, 30], 0.8) is None  # never within the pool
    assert milestone([], 0.8) is None
    assert milestone([0, 0], 0.8) == 0  # no evidence to find
    ten = [3, 1, 4, 1, 5, 9, 2, 6, 8, 7]
    assert milestone(ten, 0.8) == 7  # the eighth smallest
    for budget in range(0, 12):  # it agrees with the curve: first budget at or above 80%
        reached = coverage_curve(ten, [budget])[budget] >= 0.8
        assert reached == (budget >= 7)
    with pytest.raises(ValueError, match="target"):
        milestone(ten, 0.0)


def question(category: int) -> LocomoQuestion:
    return LocomoQuestion("c", 0, "q", "a", category, ())


def test_category_coverage_within_20_turns_and_whole_pool() -> None:
    ranks = [5, 25, None, 20, None]
    questions = [question(c) for c in (1, 1, 1, 2, 2)]
    assert category_coverage(ranks, questions, (1, 2, 3)) == {
        1: {"questions": 3, "at_20": 1 / 3, "whole_pool": 2 / 3},
        2: {"questions": 2, "at_20": 0.5, "whole_pool": 0.5},
        3: {"questions": 0, "at_20": 0.0, "whole_pool": 0.0},
    }


def test_planning_ablation_pool_coverage() -> None:
    """With a planner and baseline_plan False the baseline is the same pool built from the
    question alone with rule flags: same questions, its own curves, categories, milestones."""
    fake = OfflineLLM()
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder())
    report = evaluate_pool_coverage(memory, SAMPLE, llm=LLMClient(fake), baseline_plan=False)
    base = report.baseline
    assert base is not None and report.baseline_name == "no plan"
    assert base.planner == "rules" and report.planner.startswith("LLMClient(fake")
    assert base.config == report.config and base.questions == report.questions == 14
    assert len(fake.calls) == 14  # one plan per question, shared by nothing else
    for pool in (report, base):
        strict = pool.ranks["turns/strict"]
        assert pool.curves["turns/strict"] == coverage_curve(strict, list(range(10, 121, 10)))
        n = sum(b["questions"] for b in pool.categories.values())
        whole = sum(b["whole_pool"] * b["questions"] for b in pool.categories.values())
        assert n == 14 and whole == pytest.approx(sum(r is not None for r in strict))
        assert pool.milestones() == {
            "turns": milestone(strict),
            "tokens": milestone(pool.ranks["tokens/strict"]),
        }
    data = json.loads(json.dumps(report.to_dict()))
    assert data["baseline"]["name"] == "no plan" and data["baseline"]["planner"] == "rules"
    assert set(data["by_category"]) == {"1", "2", "3", "4"}
    assert data["milestones"]["target"] == 0.8


def test_questions_without_evidence_are_counted_apart(tmp_path: Path) -> None:
    """A question without evidence turns is neither covered nor missed: it is left out of every
    share and counted apart (the BEAM fixture: its summary probe names no source messages)."""
    from qemem.datasets.beam import convert_beam, write_beam

    data = tmp_path / "beam.json"
    write_beam(convert_beam(Path(__file__).parent / "fixtures" / "beam", ["100K"], [1]), data)
    with Memory(SQLiteStore(":memory:"), HashEmbedder()) as memory:
        plain = evaluate_coverage(memory, data)
        pool = evaluate_pool_coverage(memory, data)
    # categories 1-4: 9 probes, the summary (category 3) has no evidence; abstention is 5
    assert (plain.questions, plain.without_evidence) == (8, 1)
    assert (pool.questions, pool.without_evidence) == (8, 1)
    assert len(pool.ranks["turns/strict"]) == 8 and 0 not in pool.ranks["turns/strict"]
    assert pool.to_dict()["questions_without_evidence"] == 1
    assert pool.whole_pool == sum(r is not None for r in pool.ranks["turns/strict"]) / 8
