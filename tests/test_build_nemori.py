"""import_nemori: episodes and semantic memories of a NEMORI export mapped onto stored turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from qemem.build import build_memory, episode_turns, fact_episodes, import_nemori
from qemem.embed import HashEmbedder
from qemem.errors import InputError, StoreError
from qemem.llm import LLMClient
from qemem.memory import Memory
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM

FIXTURE = Path(__file__).parent / "fixtures" / "nemori"
SCOPE = Scope("demo-1")


def _store() -> SQLiteStore:
    store = SQLiteStore(":memory:")
    Memory(store, HashEmbedder()).ingest("src/qemem/data/sample.json")
    return store


def test_import_maps_messages_to_turns_and_reports_the_rest() -> None:
    store = _store()
    report = import_nemori(store, SCOPE, HashEmbedder(), FIXTURE)
    assert [Path(f).name for f in report.files] == ["demo.jsonl", "demo.jsonl"]
    episodes = store.episodes(SCOPE)
    assert [(e.id, e.turn_ids) for e in episodes] == [
        ("E1", ("D1:1", "D1:2")),
        ("E2", ("D1:3", "D1:4", "D1:5")),  # D1:5 has its photo caption folded in
    ]
    assert episodes[0].title == "Tomas signs up for the Riverside Half Marathon"
    assert episodes[1].content.startswith("Priya described her first pottery class")
    assert episodes[0].session == 1 and episodes[0].timestamp.isoformat() == "2024-03-14T19:15:00"
    assert (report.messages, report.matched) == (7, 5)
    assert report.unmatched == [
        "episode ep-a: Tomas: 'Also I adopted a parrot named Captain.'",
        "episode ep-c: Priya: \"Hey Tomas! It's been ages. How's everything going with you?\"",
    ]
    assert report.skipped_episodes == ["ep-c (demo.jsonl:3): no message matched a turn"]
    facts = store.facts(SCOPE)
    assert [(f.id, f.content, f.episode_ids, f.session) for f in facts] == [
        ("S1", "Tomas is training for the Riverside Half Marathon.", ("E1",), 1),
        ("S2", "Priya takes pottery classes at a studio near the canal.", ("E2", "E1"), 1),
    ]
    assert len(report.skipped_facts) == 2 and report.skipped_facts[0].startswith("demo.jsonl:3")
    assert [t.id for t in episode_turns(store, SCOPE, "E2")] == ["D1:3", "D1:4", "D1:5"]
    assert [e.id for e in fact_episodes(store, SCOPE, "S2")] == ["E2", "E1"]
    assert (report.episodes, report.facts) == (2, 2)


def test_import_refuses_a_conversation_with_memory() -> None:
    store = _store()
    import_nemori(store, SCOPE, HashEmbedder(), FIXTURE)
    with pytest.raises(StoreError, match="already has 2 episodes"):
        import_nemori(store, SCOPE, HashEmbedder(), FIXTURE)


def test_user_filter_and_bad_input(tmp_path: Path) -> None:
    store = _store()
    report = import_nemori(store, SCOPE, HashEmbedder(), FIXTURE, user="nobody")
    assert report.files == [] and report.episodes == 0
    with pytest.raises(InputError, match="not a directory"):
        import_nemori(store, SCOPE, HashEmbedder(), tmp_path / "missing")
    (tmp_path / "x_episodes.jsonl").write_text('{"title": "broken"\n')
    with pytest.raises(InputError, match="line 1"):
        import_nemori(store, SCOPE, HashEmbedder(), tmp_path)


def test_build_after_import_covers_only_the_remaining_turns() -> None:
    store = _store()
    import_nemori(store, SCOPE, HashEmbedder(), FIXTURE)
    report = build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM()))
    episodes = store.episodes(SCOPE)
    assert episodes[2].id == "E3" and episodes[2].turn_ids[0] == "D1:6"
    covered = [t for e in episodes for t in e.turn_ids]
    assert sorted(covered) == sorted(t.id for t in store.turns(SCOPE))
    assert report.episodes == len(episodes) - 2
