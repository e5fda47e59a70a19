"""Memory for an assistant (issue 33): roles through every entry point, the user's standing
instructions and preferences (found by rule at ingest, typed by the build, carried by
``context`` and the answer prompt), and mode ``respond``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from qemem import RemoteMemory
from qemem.answer import AskConfig
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import InputError
from qemem.ingest import read_conversations
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.memory_file import dumps, parse
from qemem.service.mcp_server import create_mcp_server
from qemem.store import SQLiteStore, open_store
from qemem.testing import OfflineLLM
from service_helpers import served

INSTRUCTION = (
    "Always format all code snippets with syntax highlighting when I ask about implementation "
    "details."
)
PREFERENCE = "I prefer simple, minimal dependencies"


def message(n: int, role: str, text: str, session: str = "s1", day: int = 11) -> dict[str, Any]:
    speaker = "User" if role == "user" else "Assistant"
    return {
        "session_id": session,
        "timestamp": f"2024-03-{day:02d}T10:{n:02d}:00",
        "speaker": speaker,
        "role": role,
        "text": text,
        "id": f"m{n}",
    }


CHAT = [
    message(1, "user", f"My budget app uses Flask 2.3.1, so {PREFERENCE}, how do I start?"),
    message(2, "assistant", "Start with one app.py and SQLite; no ORM yet."),
    message(3, "user", INSTRUCTION),
    message(4, "assistant", "Understood: fenced blocks with a language tag from now on."),
    message(5, "user", "I added the homepage route and it answers in 150ms.", "s2", 18),
    message(6, "assistant", "Good; cache the static parts.", "s2", 18),
]


def chat_file(tmp_path: Path, records: list[dict[str, Any]] = CHAT, cid: str = "c1") -> Path:
    path = tmp_path / f"{cid}.jsonl"
    lines = [json.dumps({"conversation_id": cid, **r}) for r in records]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    llm = OfflineLLM()
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=LLMClient(llm)) as memory:
        memory.ingest(chat_file(tmp_path))
        memory.llm_double = llm  # type: ignore[attr-defined]
        yield memory


def test_roles_are_read_from_the_generic_format_and_a_locomo_shaped_file(tmp_path: Path) -> None:
    [conv] = read_conversations(chat_file(tmp_path))
    assert [t.role for s in conv.sessions for t in s.turns] == [r["role"] for r in CHAT]
    sample = {
        "sample_id": "beam-1",
        "conversation": {
            "speaker_a": "User",
            "speaker_b": "Assistant",
            "session_1_date_time": "10:00 am on 11 March, 2024",
            "session_1": [
                {"speaker": "User", "dia_id": "D1:1", "text": "Hi", "role": "USER "},
                {"speaker": "Assistant", "dia_id": "D1:2", "text": "Hello", "role": "assistant"},
            ],
        },
    }
    path = tmp_path / "beam.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    [converted] = read_conversations(path)
    assert [t.role for t in converted.sessions[0].turns] == ["user", "assistant"]


@pytest.mark.parametrize("bad", ["bot", 3, ""])
def test_an_unknown_role_is_refused_naming_the_field_and_nothing_is_stored(
    tmp_path: Path, bad: object
) -> None:
    path = chat_file(tmp_path, [{**CHAT[0], "role": bad}])
    with Memory(SQLiteStore(":memory:"), HashEmbedder()) as memory:
        with pytest.raises(InputError, match="'role' must be one of user, assistant, other") as err:
            memory.ingest(path)
        assert err.value.field == "role" and memory.conversations() == []


def test_locomo_stays_two_people(sample_path: Path) -> None:
    with Memory(SQLiteStore(":memory:"), HashEmbedder()) as memory:
        memory.ingest(sample_path)
        assert {t.role for t in memory.turns("demo-1")} == {None}
        assert memory.facts("demo-1") == []


def test_the_rule_pass_stores_standing_facts_with_their_turn_as_provenance(
    store_url: str, tmp_path: Path
) -> None:
    with Memory(open_store(store_url), HashEmbedder()) as memory:
        memory.ingest(chat_file(tmp_path))
        assert [t.role for t in memory.turns("c1")] == [r["role"] for r in CHAT]
        facts = memory.facts("c1")
        assert [(f.kind, f.turn_ids, f.episode_ids) for f in facts] == [
            ("preference", ("m1",), ()),
            ("instruction", ("m3",), ()),
        ]
        assert facts[0].content == f'User said: "{PREFERENCE}"'
        assert facts[1].content == f'User asked: "{INSTRUCTION}"'
        memory.ingest(chat_file(tmp_path))  # idempotent: nothing new
        again = [
            message(7, "user", INSTRUCTION, "s3", 25),
            message(8, "user", "Never use tabs.", "s3", 25),
        ]
        memory.add_messages("c1", again)  # a restated instruction is not stored twice
        assert [f.content for f in memory.facts("c1")][2:] == ['User asked: "Never use tabs."']
        forgotten = memory.redact_message("c1", "m3")
        assert forgotten.facts == ["S2"]
        memory.delete_message("c1", "m8")
        assert [f.id for f in memory.facts("c1")] == ["S1"]


def test_a_memory_file_keeps_a_facts_kind_and_turns(memory: Memory, tmp_path: Path) -> None:
    exported = memory.export_memory("c1")
    data = json.loads(dumps(exported))
    assert data["facts"][1] | {"content": ""} == {
        "id": "S2",
        "content": "",
        "session": 1,
        "episode_ids": [],
        "kind": "instruction",
        "turn_ids": ["m3"],
    }
    assert parse(data).facts == exported.facts
    with Memory(SQLiteStore(":memory:"), HashEmbedder()) as other:
        other.ingest(chat_file(tmp_path))  # the rule pass finds the same facts again
        assert other.import_memory(exported).facts_unchanged == 2


def test_the_build_types_standing_facts_and_merges_them_with_the_rule_pass(
    memory: Memory,
) -> None:
    memory.build()
    kinds = [(f.id, f.kind, f.turn_ids, f.episode_ids) for f in memory.facts("c1")]
    assert ("S1", "preference", ("m1",), ("E1",)) in kinds
    assert ("S2", "instruction", ("m3",), ("E1",)) in kinds


def test_context_opens_with_the_standing_instructions_and_preferences(memory: Memory) -> None:
    block = memory.context("c1", "Could you show me how to implement a login feature?")
    assert block.text.startswith(
        "Standing instructions and preferences of the user (the current ones; follow those "
        "that apply):\n[S1] preference (11 March 2024): "
    )
    assert [r.id for r in block.standing] == ["S1", "S2"]
    assert [i.ref.id for i in block.items[:2]] == ["S1", "S2"]
    assert block.text.count("[S2]") == 1  # not repeated among the pool's facts
    assert block.tokens <= block.budget_tokens


def test_a_small_budget_keeps_the_standing_facts_closest_to_the_question(memory: Memory) -> None:
    # a quarter of 300 tokens holds the section's header and one of the two facts
    block = memory.context("c1", "How do I implement the login?", budget_tokens=300)
    assert [r.id for r in block.standing] == ["S2"]  # "implement" ~ "implementation"
    assert block.tokens <= 300 and block.left_out >= 1


def test_a_superseded_standing_fact_is_dropped(memory: Memory) -> None:
    memory.correct_fact("c1", "S2", "User asked: always format code as plain text.")
    block = memory.context("c1", "Show me the login code")
    assert [r.id for r in block.standing] == ["S1", "S3"]
    assert memory.facts("c1", ["S3"])[0].kind == "instruction"


def test_the_answer_prompt_carries_them_in_full_and_respond_mode(memory: Memory) -> None:
    llm: OfflineLLM = memory.llm_double  # type: ignore[attr-defined]
    question = "Could you show me how to implement a login feature?"
    for mode, stage in (("full", "answer"), ("respond", "respond")):
        llm.calls.clear()
        cached = AskConfig(prompt_layout="cached")
        answer = memory.ask("c1", question, mode=mode, config=cached)  # type: ignore[arg-type]
        request: LLMRequest = llm.calls[-1]
        assert request.stage == stage
        own = request.messages[0].parts[1].text
        assert f'[S2] instruction (11 March 2024): User asked: "{INSTRUCTION}"' in own
        assert [r.id for r in answer.evidence.shown.standing] == ["S1", "S2"]
        assert {"S1", "S2"} <= set(answer.sources.facts) and "m3" in answer.sources.turns
    assert request.messages[0].parts[1].text.startswith("Your task: the reply, by these")
    assert answer.text.startswith(
        "Following your standing instructions and preferences [S1], [S2]:"
    )
    assert answer.text == answer.reasoning


@pytest.mark.slow
def test_respond_reaches_every_adapter(tmp_path: Path) -> None:
    with served() as s:
        headers = s.auth(s.alice)
        body = {"messages": CHAT}
        assert s.client.post("/v1/conversations/c1/messages", json=body, headers=headers).is_success
        bad = {"messages": [{**CHAT[0], "id": "x", "role": "bot"}]}
        refused = s.client.post("/v1/conversations/c1/messages", json=bad, headers=headers)
        assert refused.status_code == 422
        asked = s.client.post(
            "/v1/conversations/c1/ask",
            json={"question": "Show me the login code", "mode": "respond"},
            headers=headers,
        )
        assert asked.status_code == 200 and asked.json()["mode"] == "respond"
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        assert remote.ask("c1", "Show me the login code", mode="respond").mode == "respond"
        assert [f.kind for f in remote.facts("c1")] == ["preference", "instruction"]
        assert remote.ingest(chat_file(tmp_path, cid="c2")).turns_added == len(CHAT)
        found = remote.search("c2", "homepage route", k=1)
        assert found[0].record.role == "user"
        assert [f.turn_ids for f in remote.facts("c2")] == [("m1",), ("m3",)]


async def _mcp(memory: Memory) -> dict[str, Any]:
    async with Client(create_mcp_server(memory)) as client:
        await client.call_tool("remember", {"conversation": "c1", "messages": CHAT})
        asked = await client.call_tool(
            "ask", {"conversation": "c1", "question": "Show me the login code", "mode": "respond"}
        )
        return {"ask": json.loads(asked.content[0].text)}


@pytest.mark.slow
def test_mcp_remember_keeps_roles_and_ask_responds() -> None:
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm="fake") as memory:
        out = anyio.run(_mcp, memory)
        assert [t.role for t in memory.turns("c1")] == [r["role"] for r in CHAT]
        assert out["ask"]["mode"] == "respond"
        assert out["ask"]["answer"].startswith("Following your standing instructions")


@pytest.mark.slow
def test_the_cli_asks_in_respond_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(tmp_path / "m.db")
    runner = CliRunner()
    ingested = runner.invoke(app, ["ingest", str(chat_file(tmp_path)), "--store", store, "--quiet"])
    assert ingested.exit_code == 0, ingested.output
    monkeypatch.setenv("QEMEM_LLM", "fake")
    asked = runner.invoke(
        app,
        [
            "ask",
            "Show me the login code",
            "--store",
            store,
            "-c",
            "c1",
            "--mode",
            "respond",
            "--json",
        ],
    )
    assert asked.exit_code == 0, asked.output
    answer = json.loads(asked.output.splitlines()[-1])
    assert answer["mode"] == "respond"
    assert answer["text"].startswith("Following your standing instructions and preferences")
    assert [r["id"] for r in answer["evidence"]["shown"]["standing"]] == ["S1", "S2"]


def test_a_memory_file_fact_of_an_unknown_kind_is_refused_and_its_turns_are_read() -> None:
    fact = {"id": "S1", "content": "User asked: x", "session": 1, "episode_ids": []}
    base = {"format": "qemem-memory/2", "conversation": "c1", "episodes": [], "supersessions": []}
    with pytest.raises(InputError, match="'kind' must be one of fact, instruction, preference"):
        parse({**base, "facts": [{**fact, "kind": "rule"}]})
    read = parse({**base, "facts": [{**fact, "kind": "instruction", "turn_ids": ["m3"]}]})
    assert read.facts[0].kind == "instruction" and read.facts[0].turn_ids == ("m3",)
