"""The single-conversation outputs whose JSON must not change when features across
conversations are added: ``tests/fixtures/single_conversation.json`` holds the SHA-256 of each
output's JSON text: recorded at commit b70be59 (main just before those features were merged;
the merged code gave the same digests), then re-recorded on purpose when the default budgets
became 40 / 2 / 4 and the build gained its fact and episode rules, and when the prompts came to
name the participants and the updates and contradictions rule (issue 33: the constructor's
input tokens and the prompts moved; answers, cards, pools and blocks did not), and when the
context block came to be cut from the pool's whole exposure order, each turn where that order
first shows it, as its longest beginning that fits (issue 31: only the two blocks moved),
and when the defaults became 25 / 2 / 8 with token-bounded context windows and a cap on the
pool (issue 31: pools, answers and prompts moved; the blocks did not), and when the answer's
background came to be bounded and the published prompt layout became the default (issue 31:
the answers' shown records, call records and prompts moved; their texts and cards, the pools
and the blocks did not);
``test_ask_across`` compares. A change that moves these outputs on purpose re-records them
with this module; to see a difference, write :func:`single_outputs` with both versions of the
code and diff them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from qemem.answer.wire import answer_to_json, context_to_json, pool_to_json
from qemem.embed import HashEmbedder
from qemem.llm import LLMClient
from qemem.memory import Memory
from qemem.store import SQLiteStore
from qemem.testing import OfflineLLM

QUESTIONS = ("What is the name of Priya's cat?", "When did Tomas sign up for the race?")


def single_outputs(sample: Path) -> dict[str, Any]:
    """The sample conversation built by the offline LLM: per question, its context block,
        rule pool, answers (full and retrieval, without their timing trace) as JSON data, and the
    prompts of the full answer's LLM calls."""
    out: dict[str, Any] = {}
    llm = OfflineLLM()
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=LLMClient(llm)) as memory:
        memory.ingest(sample)
        memory.build()
        for question in QUESTIONS:
            llm.calls.clear()
            full = answer_to_json(memory.ask("demo-1", question, mode="full"))
            prompts = [request.prompt_text for request in llm.calls]
            retrieval = answer_to_json(memory.ask("demo-1", question, mode="retrieval"))
            compact = answer_to_json(memory.ask("demo-1", question), compact=True)
            for answer in (full, retrieval, compact):
                del answer["trace"]
            out[question] = {
                "context": context_to_json(memory.context("demo-1", question, budget_tokens=600)),
                "pool": pool_to_json(memory.retrieve("demo-1", question)),
                "full": full,
                "retrieval": retrieval,
                "compact": compact,
                "prompts": prompts,
            }
    return out


def digests(outputs: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The SHA-256 of each output's JSON text (``json.dumps`` in field order)."""
    return {
        question: {
            kind: hashlib.sha256(json.dumps(data).encode()).hexdigest()
            for kind, data in kinds.items()
        }
        for question, kinds in outputs.items()
    }
