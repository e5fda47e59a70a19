"""``check``: a statement's claims labelled against the sample conversation with the offline LLM
(library, quote verification, JSON, cache replay, HTTP and the command line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qemem.answer.check import CheckResult
from qemem.answer.wire import check_from_json, check_to_json
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import InputError, LLMError, NotFoundError
from qemem.llm import LLMCache, LLMClient, LLMRequest
from qemem.memory import MAX_CHECK_CHARS, Memory
from qemem.store import SQLiteStore
from qemem.testing import OfflineLLM
from service_helpers import MESSAGES, served

STATEMENT = (
    "Priya went to her first pottery class. "
    "Tomas never signed up for the Riverside Half Marathon. "
    "Priya owns a horse named Thunder. "
    "The submarine was painted yellow."
)
LABELS = ["supported", "contradicted", "unsupported", "unverifiable"]


def _memory(sample_path: Path, llm: LLMClient | str | None = "fake") -> Memory:
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=llm)
    memory.ingest(sample_path)
    return memory


def _claims(result: CheckResult) -> list[dict[str, Any]]:
    return list(check_to_json(result)["claims"])


def test_claims_are_labelled_with_the_turns_that_support_or_contradict_them(
    sample_path: Path,
) -> None:
    with _memory(sample_path) as memory:
        result = memory.check("demo-1", STATEMENT)
    assert (result.conversation, result.text) == ("demo-1", STATEMENT)
    assert [c.label for c in result.claims] == LABELS
    assert [c.core for c in result.claims] == [True, False, False, False]
    supported, contradicted, unsupported, unverifiable = result.claims
    assert supported.turns("supports") == ["D1:3"]
    assert "first pottery class" in supported.citations[0].quote
    assert contradicted.turns("contradicts") == ["D1:2"] and not contradicted.turns()
    assert all(c.verified and c.score == 1.0 for c in supported.citations)
    assert not unsupported.citations and not unverifiable.citations
    assert all(len(c.candidates) == 8 and "D1:3" not in c.unknown for c in result.claims)
    assert "D1:3" in supported.candidates and not result.degradations
    assert [call["stage"] for call in result.trace.calls] == ["check.split"] + ["check.claim"] * 4
    assert result.trace.totals["total"]["calls"] == 5


def _scripted(quote: str, turn: str) -> OfflineLLM:
    def judge(request: LLMRequest) -> dict[str, Any]:
        if request.stage == "check.split":
            return {"claims": [{"text": "Priya made a mug in her first class.", "core": True}]}
        return {
            "label": "Supported",
            "reason": "the first class",
            "evidence": [
                {"turn": f"[{turn}]", "stance": "SUPPORTS", "quote": quote},
                {"turn": "D9:99", "stance": "supports", "quote": "made up"},
            ],
        }

    return OfflineLLM(judge)


def test_quotes_are_verified_against_the_cited_turn_and_unknown_ids_recorded(
    sample_path: Path,
) -> None:
    verbatim = _scripted("I ended up with a lopsided little mug", "D1:5")
    with _memory(sample_path, LLMClient(verbatim)) as memory:
        [claim] = memory.check("demo-1", "Priya made a mug.").claims
    assert claim.label == "supported" and claim.unknown == ["D9:99"]
    assert [(c.turn, c.stance, c.verified) for c in claim.citations] == [("D1:5", "supports", True)]
    invented = _scripted("I ended up with a beautiful perfect vase", "D1:5")
    with _memory(sample_path, LLMClient(invented)) as memory:
        [claim] = memory.check("demo-1", "Priya made a mug.").claims
    [citation] = claim.citations
    assert not citation.verified and citation.score < 0.85 and claim.turns() == []


def test_an_invalid_judge_output_degrades_to_unverifiable(sample_path: Path) -> None:
    def broken(request: LLMRequest) -> str:
        return '{"claims": [{"text": "Priya has a cat."}]}' if "split" in request.stage else "?"

    with _memory(sample_path, LLMClient(OfflineLLM(broken))) as memory:
        result = memory.check("demo-1", "Priya has a cat.")
    [claim] = result.claims
    assert claim.label == "unverifiable" and not claim.citations
    assert len(result.degradations) == 1 and "check.claim" in result.degradations[0]


def test_the_json_form_round_trips(sample_path: Path) -> None:
    with _memory(sample_path) as memory:
        result = memory.check("demo-1", STATEMENT)
    data = check_to_json(result)
    assert json.loads(json.dumps(data)) == data
    assert check_from_json(data) == result
    assert data["claims"][0]["citations"][0]["verified"] is True


def test_bad_input_unknown_conversation_and_no_llm_are_refused(sample_path: Path) -> None:
    with _memory(sample_path) as memory:
        for text in ("", "   \n"):
            with pytest.raises(InputError, match="empty"):
                memory.check("demo-1", text)
        with pytest.raises(InputError, match="more than"):
            memory.check("demo-1", "x" * (MAX_CHECK_CHARS + 1))
        with pytest.raises(NotFoundError):
            memory.check("nope", STATEMENT)
    with _memory(sample_path, None) as memory, pytest.raises(LLMError, match="needs an LLM"):
        memory.check("demo-1", STATEMENT)


def test_a_second_check_replays_from_the_cache(sample_path: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache.db"
    with _memory(sample_path, LLMClient(OfflineLLM(), cache=LLMCache(cache))) as memory:
        first = memory.check("demo-1", STATEMENT)

    def refuse(request: LLMRequest) -> str:
        raise AssertionError(f"replay called the model for {request.stage}")

    replay = LLMClient(OfflineLLM(refuse), cache=LLMCache(cache, "replay"))
    with _memory(sample_path, replay) as memory:
        again = memory.check("demo-1", STATEMENT)
    assert _claims(again) == _claims(first)
    assert all(call["cached"] for call in again.trace.calls)


def test_http_check_200_404_422_503() -> None:
    with served() as s:
        h = s.auth(s.alice)
        s.client.post("/v1/conversations/c1/messages", json={"messages": MESSAGES}, headers=h)
        text = "Ana adopted a grey cat named Pixel. Ben never started pottery classes."
        r = s.client.post("/v1/conversations/c1/check", json={"text": text}, headers=h)
        assert r.status_code == 200
        result = check_from_json(r.json())
        assert [c.label for c in result.claims] == ["supported", "contradicted"]
        assert result.claims[0].turns() == ["m1"] and result.claims[1].turns("contradicts") == [
            "m2"
        ]
        missing = s.client.post("/v1/conversations/nope/check", json={"text": text}, headers=h)
        assert missing.status_code == 404
        blank = s.client.post("/v1/conversations/c1/check", json={"text": " "}, headers=h)
        assert blank.status_code == 422 and "empty" in blank.json()["detail"]
        assert s.client.post("/v1/conversations/c1/check", json={}, headers=h).status_code == 422
    with served(llm=None) as s:
        h = s.auth(s.alice)
        s.client.post("/v1/conversations/c1/messages", json={"messages": MESSAGES}, headers=h)
        r = s.client.post("/v1/conversations/c1/check", json={"text": "Ana has a cat."}, headers=h)
        assert r.status_code == 503 and "LLM" in r.json()["detail"]
        r = s.client.post("/v1/conversations/nope/check", json={"text": "Ana"}, headers=h)
        assert r.status_code == 404


def test_the_check_command_prints_claims_and_json(
    tmp_path: Path, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.delenv("QEMEM_LLM", raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    runner = CliRunner()
    store = str(tmp_path / "m.db")
    runner.invoke(app, ["ingest", str(sample_path), "--store", store, "-q"], catch_exceptions=False)
    args = ["check", STATEMENT, "-c", "demo-1", "--store", store, "--llm", "fake"]
    shown = runner.invoke(app, args, catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    for label in LABELS:
        assert label in shown.output
    assert "D1:3 supports" in shown.output and "D1:2 contradicts" in shown.output
    assert "5 LLM calls" in shown.output and "offline LLM (fake)" in shown.output
    as_json = runner.invoke(app, [*args, "--json"], catch_exceptions=False)
    data = json.loads(as_json.output.splitlines()[-1])
    assert [c["label"] for c in data["claims"]] == LABELS
    no_llm = runner.invoke(app, args[:-2])
    assert isinstance(no_llm.exception, LLMError) and "needs an LLM" in str(no_llm.exception)
