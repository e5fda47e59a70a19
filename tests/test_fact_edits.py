"""Facts you can trust (issue 23, items 2 and 5): supersession of stale facts with cited turns,
facts as of a date, and forgetting or correcting one thing, on both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest

from qemem.build import BuildConfig
from qemem.build.supersede import cited_turns, known_facts, on_or_before, parse_as_of
from qemem.embed.base import HashEmbedder
from qemem.errors import InputError, NotFoundError, StoreError
from qemem.llm import LLMClient
from qemem.llm.types import LLMRequest
from qemem.locks import writer_lock
from qemem.memory import Memory
from qemem.memory_file import dumps, parse
from qemem.models import REDACTED, SemanticFact, Supersession
from qemem.retrieve.index import search_index
from qemem.store import open_store
from qemem.testing import OfflineLLM, offline_answer

C = "evan"
CONFIG = BuildConfig(snapshot_lag=1)
FIRST = [
    "I want to try yoga classes soon.",
    "That sounds calming.",
    "My old Prius broke down last week.",
    "Oh no, sorry to hear.",
    "I fixed it though.",
    "Good for you.",
]
SECOND = [
    "Hello again, how are you?",
    "Yoga classes helped my back, I no longer just want to try yoga.",
    "That is great news.",
    "I paint watercolors now too.",
    "Lovely hobby.",
    "Thanks a lot.",
]


def _messages(texts: list[str], session: str, day: str) -> list[dict[str, str]]:
    return [
        {
            "id": f"{session}:{n}",
            "session_id": session,
            "timestamp": f"{day}T10:{n:02d}:00",
            "speaker": "Evan" if n % 2 else "Sam",
            "text": text,
        }
        for n, text in enumerate(texts, start=1)
    ]


def _memory(url: str, handler: Any = None, offline: OfflineLLM | None = None) -> Memory:
    llm = LLMClient(offline or OfflineLLM(handler)) if handler or offline else "fake"
    memory = Memory(open_store(url), HashEmbedder(), llm=llm)
    memory.add_messages(C, _messages(FIRST, "D1", "2024-03-01"))
    memory.add_messages(C, _messages(SECOND, "D2", "2024-04-01"))
    return memory


@pytest.fixture
def built(store_url: str) -> Iterator[Memory]:
    memory = _memory(store_url)
    [report] = memory.build(C, config=CONFIG)
    assert report.facts_superseded == 1
    yield memory
    memory.close()


def test_a_contradicting_episode_supersedes_with_a_cited_turn(built: Memory) -> None:
    [record] = built.supersessions(C)
    old, new = built.facts(C, [record.old, record.new])
    assert "want to try yoga" in old.content and "helped my back" in new.content
    assert (record.kind, record.turn_ids) == ("build", ("D2:2",))  # message 2 of episode E2
    assert record.at == datetime(2024, 4, 1, 10, 1)  # the date of the episode that showed it
    assert old.episode_ids == ("E1",) and new.episode_ids == ("E2",)  # both keep provenance
    current = [f.id for f in built.facts(C)]
    assert old.id not in current and new.id in current
    assert old.id in [f.id for f in built.facts(C, include_superseded=True)]


def test_facts_as_of_a_date_show_what_was_known_then(built: Memory) -> None:
    [record] = built.supersessions(C)
    march = [f.id for f in built.facts(C, as_of="2024-03-15")]
    assert record.old in march and record.new not in march
    april = [f.id for f in built.facts(C, as_of=date(2024, 4, 1))]
    assert record.new in april and record.old not in april
    assert built.facts(C, as_of="2024-02-01") == []
    with pytest.raises(InputError, match="ISO 8601"):
        built.facts(C, as_of="last week")


def test_retrieval_prefers_the_current_fact(built: Memory) -> None:
    [record] = built.supersessions(C)
    pool = built.retrieve(C, "Does Evan want to try yoga classes?")
    assert record.old not in [i.record.id for i in pool.facts]
    hits = built.search(C, "want to try yoga classes soon", k=None, space="fact")
    assert record.old not in [h.record.id for h in hits] and hits


def _uncited(request: LLMRequest) -> Any:
    out = offline_answer(request)
    if request.stage.startswith("build.calibrate") and isinstance(out, dict):
        for n, fact in enumerate(out["facts"]):
            if isinstance(fact, dict):  # no turn, or one that is not of the episode
                fact["turns"] = [] if n % 2 else [99, "D1:1"]
    return out


def test_no_cited_turn_no_supersession(store_url: str) -> None:
    memory = _memory(store_url, _uncited)
    [report] = memory.build(C, config=CONFIG)
    assert report.facts_superseded == 0 and memory.supersessions(C) == []
    assert any("helped my back" in f.content for f in memory.facts(C))  # still a new fact
    memory.close()


def test_cited_turns_keep_only_turns_of_the_episode() -> None:
    ids = ["D2:1", "D2:2", "D2:3"]
    assert cited_turns([2, "3", "D2:1", 0, 4, True, "D1:1", 2], ids) == ("D2:2", "D2:3", "D2:1")
    assert cited_turns([], ids) == ()


def test_known_facts_on_the_timeline() -> None:
    facts = [SemanticFact(i, C, i, s, ("E1",)) for i, s in (("S1", 1), ("S2", 2), ("S3", 3))]
    dates = {1: datetime(2024, 1, 1), 2: datetime(2024, 2, 1), 3: datetime(2024, 3, 1)}
    chain = [
        Supersession("S1", "S2", ("D2:1",), dates[2], "build", datetime(2024, 5, 1)),
        Supersession("S2", "S3", ("D3:1",), dates[3], "build", datetime(2024, 5, 1)),
    ]
    ids = [f.id for f in known_facts(facts, chain, dates)]
    assert ids == ["S3"]
    assert [f.id for f in known_facts(facts, chain, dates, as_of=date(2024, 2, 15))] == ["S2"]
    every = known_facts(facts, chain, dates, as_of=date(2024, 2, 15), include_superseded=True)
    assert [f.id for f in every] == ["S1", "S2"]
    assert on_or_before(datetime(2024, 2, 1, 23, 59), date(2024, 2, 1))
    assert on_or_before(
        datetime.fromisoformat("2024-02-01T10:00+05:00"), parse_as_of("2024-02-01T10:00")
    )


# ---------------------------------------------------------------- forget or correct one thing


def test_delete_a_message_removes_what_only_it_gave(built: Memory) -> None:
    [record] = built.supersessions(C)
    before = {f.id: f for f in built.facts(C, include_superseded=True)}
    done = built.delete_message(C, "D2:2")
    assert done.deleted == ["D2:2"] and done.episodes == ["E2"]
    assert record.new in done.facts and done.supersessions == [record.old]
    assert "D2:2" not in [t.id for t in built.turns(C)]
    assert built.supersessions(C) == [] and record.old in [f.id for f in built.facts(C)]
    assert all(e.id != "E2" for e in built.episodes(C))
    left = {f.id for f in built.facts(C)}
    assert left == set(before) - set(done.facts)
    assert built.search(C, "helped my back", k=3)[0].record.id != "D2:2"
    [report] = built.build(C, config=CONFIG)  # the episode's other turns are built again
    assert report.episodes == 1
    assert all("D2:2" not in e.turn_ids for e in built.episodes(C))


def test_a_fact_supported_elsewhere_loses_only_that_link(built: Memory) -> None:
    scope = built.scope(C)
    [fact] = built.facts(C)[:1]
    vectors = built.store.vectors(scope, "fact")
    row = vectors[0].index(fact.id)
    built.store.put_facts(
        scope,
        [SemanticFact(fact.id, C, fact.content, fact.session, ("E1", "E2"))],
        vectors[1][row : row + 1],
        built.embedder.id,
    )
    done = built.delete_message(C, "D1:3")  # in E1 only
    assert done.episodes == ["E1"] and fact.id in done.unlinked and fact.id not in done.facts
    assert built.facts(C, [fact.id])[0].episode_ids == ("E2",)


def test_redact_keeps_the_place_and_leaves_search(built: Memory, tmp_path: Path) -> None:
    hits = built.search(C, "Prius broke down", k=1)
    assert hits[0].record.id == "D1:3"
    done = built.redact_message(C, "D1:3")
    assert done.redacted == ["D1:3"] and done.episodes == ["E1"]
    turn = built.turns(C, ["D1:3"])[0]
    assert (turn.text, turn.position, turn.speaker) == (REDACTED, 2, "Evan")
    assert all("Prius" not in h.record.text for h in built.search(C, "Prius broke down", k=6))
    # a source appended or ingested again leaves it redacted (no conflict)
    built.add_messages(C, _messages(FIRST, "D1", "2024-03-01"))
    source = tmp_path / "again.jsonl"
    lines = [json.dumps({**m, "conversation_id": C}) for m in _messages(FIRST, "D1", "2024-03-01")]
    source.write_text("\n".join(lines) + "\n", "utf-8")
    assert built.ingest(source).turns_added == 0
    assert built.turns(C, ["D1:3"])[0].text == REDACTED


def test_delete_and_correct_one_fact(built: Memory) -> None:
    [record] = built.supersessions(C)
    done = built.delete_fact(C, record.new)
    assert done.facts == [record.new] and done.supersessions == [record.old]
    assert record.old in [f.id for f in built.facts(C)]  # current again
    target = built.facts(C, [record.old])[0]
    fixed = built.correct_fact(C, target.id, "Evan does yoga every week.", turns=["D2:2"])
    assert (fixed.old, fixed.kind, fixed.turn_ids) == (target.id, "manual", ("D2:2",))
    new = built.facts(C, [fixed.new])[0]
    assert new.content == "Evan does yoga every week." and new.episode_ids == ()
    assert fixed.new in [f.id for f in built.facts(C, as_of="2024-03-01")]  # for all history
    assert target.id not in [f.id for f in built.facts(C, as_of="2024-03-01")]
    with pytest.raises(InputError, match="already superseded"):
        built.correct_fact(C, target.id, "Evan does yoga.")
    done = built.delete_message(C, "D1:1")  # the old fact goes; the correction, sourceless, stays
    assert target.id in done.facts and fixed.new not in done.facts
    assert fixed.new in [f.id for f in built.facts(C)] and built.supersessions(C) == []


def test_bad_edits_are_refused_and_change_nothing(built: Memory) -> None:
    exported = dumps(built.export_memory(C))
    turns = built.turns(C)
    for call in (
        lambda: built.delete_message(C, "D9:9"),
        lambda: built.redact_message(C, "nope"),
        lambda: built.delete_fact(C, "S999"),
        lambda: built.correct_fact(C, "S999", "x"),
        lambda: built.correct_fact(C, "S1", "Evan paints.", turns=["D9:9"]),
        lambda: built.delete_message("nobody", "D1:1"),
    ):
        with pytest.raises(NotFoundError):
            call()
    for text in ("", "   ", "x" * 2001, "bad\x00"):
        with pytest.raises(InputError):
            built.correct_fact(C, "S1", text)
    assert dumps(built.export_memory(C)) == exported and built.turns(C) == turns


def test_the_memory_file_carries_supersessions(built: Memory, tmp_path: Path) -> None:
    built.correct_fact(C, built.facts(C)[0].id, "Evan lives in Denver.")
    exported = built.export_memory(C)
    assert len(exported.supersessions) == 2
    text = dumps(exported)
    assert '"format": "qemem-memory/2"' in text
    other = Memory(open_store(str(tmp_path / "other.db")), HashEmbedder())
    other.add_messages(C, _messages(FIRST, "D1", "2024-03-01"))
    other.add_messages(C, _messages(SECOND, "D2", "2024-04-01"))
    report = other.import_memory(parse(json.loads(text)))
    assert report.supersessions_added == 2
    assert dumps(other.export_memory(C)) == text
    assert [f.id for f in other.facts(C)] == [f.id for f in built.facts(C)]
    again = other.import_memory(parse(json.loads(text)))
    assert again.supersessions_added == 0
    other.close()


def test_a_memory_file_with_a_bad_supersession_is_refused(built: Memory) -> None:
    data = json.loads(dumps(built.export_memory(C)))
    built.delete(C)
    for change, message in (
        ({"turn_ids": []}, "non-empty list"),
        ({"kind": "guess"}, "kind"),
        ({"at": "soon"}, "ISO 8601"),
    ):
        bad = {**data, "supersessions": [{**data["supersessions"][0], **change}]}
        with pytest.raises(InputError, match=message):
            parse(bad)
    bad = {**data, "supersessions": [{**data["supersessions"][0], "new": "S404"}]}
    memory = built
    memory.add_messages(C, _messages(FIRST, "D1", "2024-03-01"))
    memory.add_messages(C, _messages(SECOND, "D2", "2024-04-01"))
    with pytest.raises(InputError, match="S404"):
        memory.import_memory(parse(bad))
    assert memory.facts(C) == [] and memory.supersessions(C) == []
    memory.import_memory(parse(data))
    other = {**data["supersessions"][0], "turn_ids": ["D2:1"]}
    with pytest.raises(StoreError, match="other supersessions"):
        memory.import_memory(parse({**data, "supersessions": [other]}))


def test_a_redaction_during_a_reembedding_drops_the_staged_vector(built: Memory) -> None:
    scope = built.scope(C)
    store = built.store
    store.begin_reembed("hash-next", built.embedder.dim)
    ids = store.unstaged(scope, "turn")
    store.stage_vectors(scope, "turn", ids, built.embed_documents(built.turns(C, ids)))
    assert store.unstaged(scope, "turn") == []
    built.redact_message(C, "D1:3")
    assert store.unstaged(scope, "turn") == ["D1:3"]  # staged again from the marker text
    assert "E1" not in store.unstaged(scope, "episode")  # its episode is gone, staged or not


def test_an_edit_is_refused_while_a_build_runs(built: Memory) -> None:
    with writer_lock(built.store, built.scope(C), "build"):  # as a running build holds it
        for edit in (
            lambda: built.delete_message(C, "D1:1"),
            lambda: built.redact_message(C, "D1:1"),
            lambda: built.delete_fact(C, "S1"),
            lambda: built.correct_fact(C, "S1", "Evan paints."),
        ):
            with pytest.raises(StoreError, match="another build"):
                edit()
    assert "D1:1" in [t.id for t in built.turns(C)] and built.facts(C, ["S1"])
    assert built.delete_fact(C, "S1").facts == ["S1"]  # once the build is done


def test_the_calibrate_prompt_shows_known_ids_and_asks_for_proof(store_url: str) -> None:
    offline = OfflineLLM()
    memory = _memory(store_url, offline=offline)
    memory.build(C, config=CONFIG)
    prompts = [r.prompt_text for r in offline.calls if r.stage == "build.calibrate"]
    first, second = prompts
    assert "supersedes" not in first and "Nothing is known" in first
    assert "- [S1] Evan mentioned I want to try yoga classes soon" in second
    assert '"supersedes": "<id of the known fact>"' in second and "never name" in second
    memory.close()


def test_a_version_1_memory_file_still_imports(built: Memory, tmp_path: Path) -> None:
    data = json.loads(dumps(built.export_memory(C)))
    old = {k: v for k, v in data.items() if k != "supersessions"} | {"format": "qemem-memory/1"}
    other = Memory(open_store(str(tmp_path / "v1.db")), HashEmbedder())
    other.add_messages(C, _messages(FIRST, "D1", "2024-03-01"))
    other.add_messages(C, _messages(SECOND, "D2", "2024-04-01"))
    report = other.import_memory(parse(old))
    assert (report.facts_added, report.supersessions_added) == (len(data["facts"]), 0)
    assert other.supersessions(C) == [] and len(other.facts(C)) == len(data["facts"])
    assert json.loads(dumps(other.export_memory(C)))["format"] == "qemem-memory/2"
    other.close()


@pytest.mark.slow
def test_hnsw_top_k_leaves_superseded_facts_out(pg_url: str) -> None:
    from qemem.store.postgres import PostgresStore

    memory = _memory(pg_url)
    memory.build(C, config=CONFIG)
    [record] = memory.supersessions(C)
    hnsw = Memory(PostgresStore(pg_url, hnsw_min_rows=1), HashEmbedder())
    with memory, hnsw:
        queries = hnsw.embedder.embed(["want to try yoga classes soon"], query=True)
        [found] = hnsw.store.nearest(hnsw.scope(C), "fact", queries, 10)  # type: ignore[attr-defined]
        assert found and record.old not in found and record.new in found
        assert found == [
            f for f, _ in search_index(memory.store, memory.scope(C), "fact").dense(queries, 10)[0]
        ]
