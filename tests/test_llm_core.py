"""Types, JSON extraction, prices and the ledger of the LLM layer."""

from __future__ import annotations

import json
import threading

import pytest

from qemem.errors import ConfigError
from qemem.llm import LLMRequest, LLMResponse, Message, PriceTable, extract_json
from qemem.llm.ledger import Ledger, stage_group
from qemem.llm.prices import load_prices


def _resp(stage: str, cost: float | None, *, cached: bool = False, tin: int = 10) -> LLMResponse:
    return LLMResponse("x", None, tin, 5, 0.5, "m", cost, stage, cached)


def test_request_and_response_round_trip_through_json() -> None:
    req = LLMRequest("sys", [Message("user", "hi")], "plan", schema={"type": "object"})
    data = json.loads(json.dumps(req.to_dict()))
    assert data["messages"] == [{"role": "user", "content": "hi"}]
    assert data["stage"] == "plan" and data["max_tokens"] == 1024 and data["temperature"] == 0.0
    resp = LLMResponse("t", {"a": 1}, 3, 4, 0.25, "m", 0.001, "plan", cached=False)
    assert LLMResponse.from_dict(json.loads(json.dumps(resp.to_dict()))) == resp


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Here you go:\n```json\n{"a": [1, 2]}\n```\nDone.', {"a": [1, 2]}),
        (
            'Sure! The answer is {"a": "b}c", "d": {"e": 1}} hope it helps',
            {"a": "b}c", "d": {"e": 1}},
        ),
        ("prose [1, [2, 3]] trailing", [1, [2, 3]]),
        ('bad {not json} then {"ok": true}', {"ok": True}),
        ('```\n[{"x": "y"}]\n```', [{"x": "y"}]),
    ],
)
def test_extract_json_handles_fences_and_prose(text: str, expected: object) -> None:
    assert extract_json(text) == expected


def test_extract_json_raises_when_nothing_parses() -> None:
    with pytest.raises(ValueError, match="no JSON"):
        extract_json("no json here {oops")


def test_price_lookup_prefers_exact_then_longest_contained_key() -> None:
    table = PriceTable()
    assert table.lookup("us.anthropic.claude-haiku-4-5-20251001-v1:0") == (1.1, 5.5)
    assert table.lookup("claude-opus-4-5-20251101") == (5.0, 25.0)
    assert table.lookup("gpt-4.1-mini-2025-04-14") == (0.4, 1.6)
    assert table.lookup("gpt-4.1") == (2.0, 8.0)
    assert table.lookup("llama3.1:8b") is None
    # 1000 in * 1.1 + 2000 out * 5.5 per million = 0.0011 + 0.011
    assert table.cost("claude-haiku-4-5", 1000, 2000) == pytest.approx(0.0121)
    assert table.cost("mystery", 10, 10) is None
    assert PriceTable({"llama3.1:8b": (0.0, 0.0)}).cost("llama3.1:8b", 5, 5) == 0.0


def test_load_prices_accepts_both_forms_and_rejects_garbage(tmp_path) -> None:
    good = tmp_path / "p.json"
    good.write_text(json.dumps({"a": [1, 2], "b": {"input": 0.5, "output": 1.5}}))
    assert load_prices(good) == {"a": (1.0, 2.0), "b": (0.5, 1.5)}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"a": "cheap"}))
    with pytest.raises(ConfigError, match="bad price for 'a'"):
        load_prices(bad)
    with pytest.raises(ConfigError, match="QEMEM_PRICES"):
        load_prices(tmp_path / "missing.json")


def test_ledger_splits_by_stage_and_separates_spent_from_nominal() -> None:
    ledger = Ledger()
    ledger.record(_resp("plan", 0.01))
    ledger.record(_resp("construct", 0.10))
    ledger.record(_resp("construct.repair", 0.05, cached=True))
    ledger.record(_resp("answer", 0.20, cached=True))
    total = ledger.total()
    assert (total.calls, total.cached_calls, total.input_tokens, total.output_tokens) == (
        4,
        2,
        40,
        20,
    )
    assert total.cost_nominal_usd == pytest.approx(0.36)
    assert total.cost_spent_usd == pytest.approx(0.11)
    groups = ledger.by_stage(group=True)
    assert list(groups) == ["answer", "construct", "plan"]
    assert groups["construct"].calls == 2
    assert groups["construct"].cost_nominal_usd == pytest.approx(0.15)
    assert groups["construct"].cost_spent_usd == pytest.approx(0.10)
    assert set(ledger.by_stage()) == {"plan", "construct", "construct.repair", "answer"}
    data = json.loads(json.dumps(ledger.to_dict()))
    assert data["by_group"]["answer"]["cost_spent_usd"] == 0.0
    assert stage_group("build.segment") == "build"


def test_ledger_cost_is_null_when_any_call_is_unpriced() -> None:
    ledger = Ledger()
    ledger.record(_resp("judge", 0.5))
    ledger.record(_resp("judge", None))
    ledger.record(_resp("plan", 0.5))
    assert ledger.total().cost_nominal_usd is None
    assert ledger.by_stage()["judge"].cost_spent_usd is None
    assert ledger.by_stage()["plan"].cost_spent_usd == 0.5


def test_ledger_is_thread_safe() -> None:
    ledger = Ledger()

    def work() -> None:
        for _ in range(500):
            ledger.record(_resp("plan", 0.0, tin=1))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.total().calls == 4000 and ledger.total().input_tokens == 4000


def test_a_client_run_ledger_keeps_sums_not_every_response() -> None:
    from qemem.llm import LLMClient, LLMRequest, Message
    from qemem.testing import OfflineLLM

    client = LLMClient(OfflineLLM())
    for n in range(5):
        client.complete(LLMRequest("s", [Message("user", f"hello {n}")], stage="answer"))
    assert client.ledger.responses == []  # a long-lived server must not grow per call
    assert client.ledger.total().calls == 5
    assert client.ledger.by_stage()["answer"].calls == 5
    kept = Ledger()
    kept.record(client.complete(LLMRequest("s", [Message("user", "x")], stage="plan")))
    assert len(kept.responses) == 1 and kept.by_stage(group=True)["plan"].calls == 1
