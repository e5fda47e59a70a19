"""The evidence record an answer carries, the answer page and the run page (without a browser)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from typer.testing import CliRunner

from qemem.answer import Answer
from qemem.answer.wire import answer_brief, answer_to_json
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.eval.locomo import LocomoRunConfig, run_locomo
from qemem.eval.report import write_report_html
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.store import SQLiteStore
from qemem.testing import OfflineLLM
from qemem.view import answer_html, evidence_record, report_html
from qemem.view.record import reason_label
from qemem.view.report import correctness, diagnosis, view_record

QUESTION = "When did Priya go to her first pottery class?"
PLAN = {
    "need": "The date of Priya's first pottery class.",
    "answer_type": "date",
    "aggregate": False,
    "temporal": True,
    "queries": ["first pottery class", "pottery studio"],
}
POTTERY = {
    "claim": "Priya went to her first pottery class.",
    "sources": ["D1:3"],
    "quote": "I went to my first pottery class last Saturday",
    "time": "9 March 2024",
    "relation": "answer candidate",
}


def scripted(card: dict[str, Any]) -> LLMClient:
    """An LLM that plans PLAN, builds ``card`` (sufficient) and answers."""

    def respond(request: LLMRequest) -> Any:
        stage = request.stage.split(".")[0]
        if stage == "plan":
            return PLAN
        if stage == "construct":
            return {"cards": [card], "sufficient": True}
        return "It was the Saturday before 14 March.\nFINAL ANSWER: the Saturday before 14 March"

    return LLMClient(OfflineLLM(respond))


@pytest.fixture
def memory(sample_path: Path) -> Iterator[Memory]:
    """The sample conversation in memory, with an LLM that cites D1:3."""
    mem = Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=scripted(POTTERY))
    mem.ingest(sample_path)
    yield mem
    mem.close()


@pytest.fixture
def answer(memory: Memory) -> Answer:
    return memory.ask("demo-1", QUESTION)


def test_answer_carries_its_source_records(answer: Answer) -> None:
    turns = answer.sources.turns
    assert {"D1:1", "D1:2", "D1:3", "D1:4", "D1:5"} <= set(turns)  # cited turn, two each side
    assert {item.id for item in answer.pool.turns} <= set(turns)
    assert set(answer.evidence.shown.turns) <= set(turns)
    assert answer.sources.sessions[1].startswith("2024-03-14T19:15")
    data = answer_to_json(answer)["sources"]
    assert data["turns"]["D1:3"]["speaker"] == "Priya" and data["speakers"] == ["Priya", "Tomas"]


def test_the_tool_profile_of_an_answer_cuts_its_json_form_down(answer: Answer) -> None:
    brief, full = answer_brief(answer), answer_to_json(answer)
    assert (brief["answer"], brief["mode"]) == (full["text"], full["mode"]) == (answer.text, "full")
    assert brief["citations"] == answer.citations and brief["evidence"] == []
    assert [
        (c["claim"], c["quote"], c["verified_quote"], c["time"], c["sources"], c["grounded_in"])
        for c in brief["cards"]
    ] == [
        (c.claim, c.quote, c.verified, c.shown_time, c.sources, c.grounded_in) for c in answer.cards
    ]
    assert all("cited" not in c for c in brief["cards"])  # only across conversations


def test_evidence_record_is_compact_json(answer: Answer) -> None:
    record = evidence_record(answer_to_json(answer))
    json.dumps(record)
    assert record["question"] == QUESTION and record["answer"] == "the Saturday before 14 March"
    assert record["cards"][0]["matched_source"] == "D1:3" and record["cards"][0]["verified"]
    assert [c["shown_time"] for c in record["cards"]] == [c.shown_time for c in answer.cards]
    assert record["rounds"][0]["queries"][0] == QUESTION
    assert record["rounds"][0]["feedback"]["sufficient"] is True
    assert (
        record["cost"]["calls"] == len(answer.trace.calls)
        and record["plan"]["answer_type"] == "date"
    )
    space, _, rnd, score, _, _ = record["pool"][0]
    assert space in ("episode", "fact", "turn") and rnd == 0 and isinstance(score, float)
    ranked = [p for p in record["pool"] if p[4].startswith("q")]
    assert ranked and re.fullmatch(r"q\d+ (dense|bm25) #\d+.*", ranked[0][4])
    capped = evidence_record(answer_to_json(answer), max_reasons=1)
    assert all(p[4].count(";") == 0 for p in capped["pool"])
    assert any(p[5] > 0 for p in capped["pool"])
    # a run's compact answer: capped the same way, no sources
    compact = evidence_record(answer_to_json(answer, compact=True, max_reasons=1))
    assert compact["pool"] == capped["pool"] and "sources" not in compact


def test_reason_labels() -> None:
    from qemem.models import Reason

    def label(reason: Reason) -> str:
        return reason_label(TypeAdapter(Reason).dump_python(reason, mode="json"))

    assert label(Reason("ranked", query=2, method="dense", rank=3)) == "q2 dense #3"
    assert label(Reason("context", via="D3:12")) == "context of D3:12"
    assert label(Reason("provenance", via="S4")) == "provenance via S4"


def test_answer_page_escapes_conversation_text(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    path = tmp_path / "chat.json"
    message = {"conversation_id": "x", "session_id": "s1", "timestamp": "2024-01-02T10:00"}
    path.write_text(
        json.dumps([{**message, "speaker": "Eve</title>", "text": hostile, "id": "D1:1"}])
    )
    card = {"claim": hostile, "sources": ["D1:1"], "quote": "<script>alert(1)", "time": ""}
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=scripted(card)) as memory:
        memory.ingest(path)
        html = answer_html(answer_to_json(memory.ask("x", f"What did Eve say? {hostile}")))
    assert "<script>alert" not in html and "<img src=x" not in html and "Eve</title>" not in html
    assert "&lt;script&gt;alert(1)" in html  # the title, escaped by the template
    assert "\\u003cscript\\u003e" in html  # the embedded JSON cannot close its script element


def test_correctness_and_diagnosis() -> None:
    base = {"evidence": ["D1:1"], "score": 0.0}
    never = {**base, "visibility": {"refined": False, "cited": False}}
    not_cited = {**base, "visibility": {"refined": True, "cited": False}}
    cited = {**base, "visibility": {"refined": True, "cited": True}}
    assert diagnosis(never) == "never_retrieved" and diagnosis(not_cited) == "not_cited"
    assert diagnosis(cited) == "cited_wrong" and diagnosis({**cited, "score": 1.0}) == ""
    assert diagnosis({**cited, "evidence": []}) == ""
    assert correctness(cited) == "wrong" and correctness({"score": 0.5}) == "correct"
    assert correctness({"score": None}) == "unjudged"


@pytest.mark.slow
def test_eval_run_writes_report_html(tmp_path: Path, sample_path: Path) -> None:
    out = tmp_path / "run"
    config = LocomoRunConfig(
        sample_path, out, llm="fake", judge="fake", limit=3, plots=False, embedder="hash"
    )
    run_locomo(config)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert records[0]["format"] == 2 and "sources" not in records[0]["answer"]
    view = view_record(records[0])
    assert view is not None and all(len(p) == 6 for p in view["pool"])
    sources = json.loads((out / "sources.json").read_text())
    assert len(sources["demo-1"]["turns"]) == 65 and sources["demo-1"]["sessions"]["5"]
    html = (out / "report.html").read_text()
    assert html.count('<tr class="q"') == 3 and 'id="d-2"' in html
    assert 'id="conversations"' in html and "http" not in html.replace("http-equiv", "")
    (out / "report.html").unlink()
    assert write_report_html(out) == out / "report.html" and (out / "report.html").exists()


def test_report_of_records_without_an_answer() -> None:
    record = {
        "conversation": "c",
        "index": 0,
        "mode": "retrieval",
        "category": 2,
        "category_name": "temporal",
        "question": "When <b>?",
        "evidence": [],
        "judge_labels": [],
        "score": None,
        "f1": None,
        "llm": {},
        "refinement": {"rounds": 0},
        "visibility": {},
    }
    html = report_html([record], {"mode": "retrieval"})
    assert "When &lt;b&gt;?" in html and "button" in html and 'class="expand"' not in html


@pytest.mark.slow
def test_cli_ask_writes_html(tmp_path: Path, sample_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    store, page = tmp_path / "m.db", tmp_path / "answer.html"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(sample_path), "--store", str(store)]).exit_code == 0
    args = ["ask", QUESTION, "--store", str(store), "-c", "demo-1", "--llm", "fake"]
    result = runner.invoke(app, [*args, "--html", str(page)])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and 'id="evidence-data"' in html
