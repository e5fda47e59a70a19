"""Corrections are first-class (issue 30, finding 2): a fact corrected by hand keeps its own
provenance, outlives the fact it corrected and unrelated deletes, and a rebuild never brings
the corrected statement back as current; deleting a correction or a corrected fact says what
it changed on every entry point. Both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from qemem import RemoteMemory
from qemem.build import BuildConfig
from qemem.build.corrections import corrected_again, near_correction
from qemem.cli import app
from qemem.embed.base import HashEmbedder
from qemem.llm import LLMClient
from qemem.llm.types import LLMRequest
from qemem.memory import Memory
from qemem.memory_file import dumps, parse
from qemem.models import Correction, SemanticFact, Supersession
from qemem.service.mcp_server import create_mcp_server
from qemem.store import open_store
from qemem.testing import OfflineLLM, offline_answer
from service_helpers import served

C = "evan"
CONFIG = BuildConfig(snapshot_lag=1)
WRONG = "S1"  # "Evan mentioned My sister lives in Boston now" (episode E1, session D1)
TRUTH = "Evan's sister lives in Denver."
TALK = {
    "D1": ["My sister lives in Boston now.", "Nice city.", "I also started painting.", "Cool."],
    "D2": ["I adopted a dog named Rex.", "Cute!", "He chews shoes.", "Ha."],
}


def _messages(session: str, day: str) -> list[dict[str, str]]:
    return [
        {
            "id": f"{session}:{n}",
            "session_id": session,
            "timestamp": f"{day}T10:{n:02d}:00",
            "speaker": "Evan" if n % 2 else "Sam",
            "text": text,
        }
        for n, text in enumerate(TALK[session], start=1)
    ]


def _built(url: str, llm: OfflineLLM | None = None, namespace: str = "default") -> Memory:
    """E1 (the turns of D1) gave S1, E2 (those of D2) gave S2."""
    client = LLMClient(llm or OfflineLLM())
    memory = Memory(open_store(url), HashEmbedder(), llm=client, namespace=namespace)
    memory.add_messages(C, _messages("D1", "2024-03-01"))
    memory.add_messages(C, _messages("D2", "2024-04-01"))
    memory.build(C, config=CONFIG)
    assert [f.episode_ids for f in memory.facts(C)] == [("E1",), ("E2",)]
    assert "Boston" in memory.facts(C, [WRONG])[0].content
    return memory


@pytest.fixture
def memory(store_url: str) -> Iterator[Memory]:
    with _built(store_url) as memory:
        yield memory


def _current(memory: Memory) -> list[str]:
    return [f.id for f in memory.facts(C)]


def test_a_correction_outlives_its_corrected_fact_and_unrelated_deletes(memory: Memory) -> None:
    fixed = memory.correct_fact(C, WRONG, TRUTH, turns=["D2:2"])
    assert (fixed.old, fixed.new) == (WRONG, "S3")
    scope = memory.scope(C)
    assert memory.store.corrections(scope) == [
        Correction("S3", ("D2:2",), ("D1:1", "D1:2", "D1:3", "D1:4"), fixed.recorded)
    ]
    done = memory.delete_message(C, "D1:2")  # a source turn of S1: S1 and the supersession go
    assert (done.facts, done.supersessions, done.restored) == ([WRONG], [WRONG], [])
    assert memory.supersessions(C) == []
    done = memory.delete_message(C, "D2:3")  # unrelated: E2 and S2 go, the correction stays
    assert (done.episodes, done.facts) == (["E2"], ["S2"])
    assert _current(memory) == ["S3"]
    done = memory.delete_message(C, "D2:2")  # the cited turn: it leaves the correction only
    assert done.facts == [] and _current(memory) == ["S3"]
    [kept] = memory.store.corrections(scope)
    assert (kept.turn_ids, kept.corrected_turns) == ((), ("D1:1", "D1:3", "D1:4"))


def test_a_rebuild_does_not_bring_the_corrected_fact_back(store_url: str) -> None:
    offline = OfflineLLM()
    with _built(store_url, offline) as memory:
        fixed = memory.correct_fact(C, WRONG, TRUTH)
        done = memory.redact_message(C, "D1:3")  # another turn of S1's episode
        assert done.episodes == ["E1"] and done.facts == [WRONG]
        offline.calls.clear()
        [report] = memory.build(C, config=BuildConfig(snapshot_lag=1, related_facts=0))
        again = memory.facts(C, include_superseded=True)[-1]
        assert "Boston" in again.content and again.episode_ids == ("E3",)  # derived again
        assert report.facts_corrected == 1 and report.facts_superseded == 0
        assert _current(memory) == ["S2", fixed.new]
        [record] = memory.supersessions(C)
        assert (record.old, record.new, record.kind) == (again.id, fixed.new, "manual")
        assert record.at == datetime(2024, 3, 1, 10, 1)  # from when the statement was learned
        # the extraction was shown the correction, though no related fact was asked for
        [prompt] = [r.prompt_text for r in offline.calls if r.stage == "build.calibrate"]
        assert f"[{fixed.new}] {TRUTH}" in prompt
        [report] = memory.build(C, config=CONFIG)  # nothing pending: nothing changes
        assert report.episodes == 0 and memory.supersessions(C) == [record]


def _claiming(request: LLMRequest) -> Any:
    """The offline answer, plus a new fact claiming to supersede the correction S3 with the
    first turn of the episode."""
    out = offline_answer(request)
    if request.stage == "build.calibrate" and "[S3]" in request.prompt_text:
        out["facts"].append(
            {"fact": "Evan's sister moved to Boston.", "supersedes": "S3", "turns": [1]}
        )
    return out


def test_a_claim_against_a_correction_from_its_own_turns_is_turned_round(store_url: str) -> None:
    with _built(store_url, OfflineLLM(_claiming)) as memory:
        memory.correct_fact(C, WRONG, TRUTH)
        memory.redact_message(C, "D1:4")
        memory.build(C, config=CONFIG)
        assert _current(memory) == ["S2", "S3"]
        olds = {s.old: s.new for s in memory.supersessions(C)}
        moved = next(f for f in memory.facts(C, include_superseded=True) if "moved" in f.content)
        assert olds == {"S4": "S3", moved.id: "S3"}


def test_the_similarity_rule() -> None:
    names = ["Evan", "Sam"]
    assert near_correction("Evan mentioned My sister lives in Boston now", TRUTH, names)
    assert near_correction("Jon lives in Boston.", "Jon lives in Denver.")  # 1 of 3: the least
    assert near_correction("Sam wants to adopt a dog.", "Sam does not want to adopt a dog.")
    assert not near_correction("Evan adopted a dog named Rex.", TRUTH, names)
    assert not near_correction("Evan's sister is a nurse.", TRUTH, names)  # 1 of 4
    assert near_correction("Evan visited Sam.", "Evan called Sam.")  # 2 of 4 stems
    assert not near_correction("Evan visited Sam.", "Evan called Sam.", names)  # names dropped
    assert not near_correction("", "")  # no content word at all


def test_corrected_again_needs_a_shared_turn_and_nearness_or_an_own_claim() -> None:
    at, now = datetime(2024, 3, 1), datetime(2024, 6, 1, tzinfo=UTC)
    fix = Correction("S3", ("D2:2",), ("D1:1", "D1:2"), now)
    texts = {"S3": TRUTH}

    def run(fact: str, turns: list[str], claims: dict[str, Any] | None = None) -> list[str]:
        new = [SemanticFact("S9", C, fact, 1, ("E9",))]
        found = corrected_again(new, turns, [fix], texts, claims or {}, ["Evan"], at, now)
        assert all(s == Supersession("S9", "S3", ("D2:2",), at, "manual", now) for s in found)
        return [s.old for s in found]

    near = "Evan's sister lives in Boston."
    assert run(near, ["D1:2", "D1:3"]) == ["S9"]
    assert run(near, ["D3:1"]) == []  # learned elsewhere: new evidence, not the old statement
    assert run("Evan paints.", ["D1:1"]) == []
    claim = {"Evan paints.": ("S3", ("D1:1",))}
    assert run("Evan paints.", ["D1:1", "D3:1"], claim) == ["S9"]
    later = {"Evan paints.": ("S3", ("D1:1", "D3:1"))}  # shown by a turn not corrected
    assert run("Evan paints.", ["D1:1", "D3:1"], later) == []


# ---------------------------------------------------------------- deleting either side


def test_deleting_a_correction_restores_the_corrected_fact(memory: Memory) -> None:
    fixed = memory.correct_fact(C, WRONG, TRUTH)
    done = memory.delete_fact(C, fixed.new)
    assert (done.facts, done.supersessions, done.restored) == ([fixed.new], [WRONG], [WRONG])
    assert WRONG in _current(memory) and memory.store.corrections(memory.scope(C)) == []


def test_deleting_a_corrected_fact_keeps_the_correction(memory: Memory) -> None:
    fixed = memory.correct_fact(C, WRONG, TRUTH)
    done = memory.delete_fact(C, WRONG)
    assert (done.facts, done.supersessions, done.restored) == ([WRONG], [WRONG], [])
    assert _current(memory) == ["S2", fixed.new] and memory.supersessions(C) == []
    memory.delete_message(C, "D2:1")
    assert _current(memory) == [fixed.new]


def test_a_correction_of_a_correction_inherits_what_it_corrected(memory: Memory) -> None:
    first = memory.correct_fact(C, WRONG, TRUTH, turns=["D2:2"])
    second = memory.correct_fact(C, first.new, "Evan's sister lives in Austin.")
    learned = ("D1:1", "D1:2", "D1:3", "D1:4", "D2:2")
    assert memory.store.corrections(memory.scope(C))[1].corrected_turns == learned
    memory.redact_message(C, "D1:3")
    memory.build(C, config=CONFIG)
    assert _current(memory) == ["S2", second.new]  # the statement derived again is superseded


async def _forget_over_mcp(memory: Memory) -> Any:
    async with Client(create_mcp_server(memory)) as client:
        fix = {"conversation": C, "fact": WRONG, "content": TRUTH}
        fixed = json.loads((await client.call_tool("correct_fact", fix)).content[0].text)
        forget = {"conversation": C, "fact": fixed["new"]}
        return json.loads((await client.call_tool("forget_fact", forget)).content[0].text)


def test_delete_fact_says_what_it_changed_over_mcp(memory: Memory) -> None:
    done = anyio.run(_forget_over_mcp, memory)
    assert (done["supersessions"], done["restored"]) == ([WRONG], [WRONG])


def test_a_correction_exports_and_imports_without_its_corrected_fact(
    memory: Memory, tmp_path: Path
) -> None:
    memory.correct_fact(C, WRONG, TRUTH, turns=["D2:2"])
    memory.delete_message(C, "D1:2")
    text = dumps(memory.export_memory(C))
    other = Memory(open_store(str(tmp_path / "other.db")), HashEmbedder())
    with other:
        other.add_messages(C, [m for m in _messages("D1", "2024-03-01") if m["id"] != "D1:2"])
        other.add_messages(C, _messages("D2", "2024-04-01"))
        report = other.import_memory(parse(json.loads(text)))
        assert report.corrections_added == 1 and dumps(other.export_memory(C)) == text
        assert "S3" in [f.id for f in other.facts(C)]
        other.delete_message(C, "D2:3")
        assert [f.id for f in other.facts(C)] == ["S3"]


def test_a_file_without_corrections_derives_them(memory: Memory) -> None:
    fixed = memory.correct_fact(C, WRONG, TRUTH, turns=["D2:2"])
    data = json.loads(dumps(memory.export_memory(C)))
    data.pop("corrections")
    assert parse(data).corrections == tuple(memory.store.corrections(memory.scope(C)))
    assert parse(data).corrections[0].recorded == fixed.recorded


def test_delete_fact_says_what_it_changed_over_http(store_url: str) -> None:
    _built(store_url, namespace="alice").close()
    with served(store_url=store_url) as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        fixed = remote.correct_fact(C, WRONG, TRUTH)
        gone = s.client.delete(f"/v1/conversations/{C}/facts/{fixed.new}", headers=s.auth(s.alice))
        assert gone.status_code == 200 and gone.json()["restored"] == [WRONG]
        again = remote.correct_fact(C, WRONG, TRUTH)
        done = remote.delete_fact(C, WRONG)
        assert (done.facts, done.supersessions, done.restored) == ([WRONG], [WRONG], [])
        assert [f.id for f in remote.facts(C)] == ["S2", again.new]


def test_delete_fact_says_what_it_changed_in_the_cli(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    _built(store).close()
    runner = CliRunner()

    def invoke(*args: str) -> str:
        result = runner.invoke(app, [*args, "--store", store, "-c", C])
        assert result.exit_code == 0, result.output
        return result.output

    def correct() -> str:
        return invoke("correct-fact", WRONG, TRUTH, "--embedder", "hash").split()[0]

    fixed = correct()
    out = " ".join(invoke("delete-fact", fixed).split())
    assert f"facts removed: {fixed};" in out and f"current again: {WRONG}" in out
    fixed = correct()
    done = json.loads(invoke("delete-fact", WRONG, "--json").splitlines()[-1])
    assert (done["facts"], done["supersessions"], done["restored"]) == ([WRONG], [WRONG], [])
    listed = json.loads(invoke("facts", "--json").splitlines()[-1])
    assert [f["id"] for f in listed] == ["S2", fixed]
