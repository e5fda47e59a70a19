"""Ids are never reused within one life of a conversation, on both backends: fact, episode and
server-given message ids come from per-conversation counters that deletes never lower (a
migrated store counts on from the highest ids it held); a conversation deleted and created
again is a new one (ids from 1 again, a new ``created_at`` in every listing)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fence_helpers import messages
from legacy_store import (
    CONVERSATIONS,
    FACTS,
    create_postgres,
    create_sqlite,
    fill_postgres,
    fill_sqlite,
)
from qemem import RemoteMemory
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import ConversationGoneError
from qemem.llm import LLMClient
from qemem.memory import Memory
from qemem.store import Scope, open_store, parse_store_url
from qemem.testing import OfflineLLM
from service_helpers import served


@pytest.fixture
def memory(store_url: str) -> Iterator[Memory]:
    """An empty memory of each backend, with the offline LLM."""
    with Memory(open_store(store_url), HashEmbedder(), llm=LLMClient(OfflineLLM())) as mem:
        yield mem


def contents(memory: Memory, conversation: str) -> dict[str, str]:
    """What each id names now: turns, episodes (turns and narrative) and facts."""
    named = {t.id: t.text for t in memory.turns(conversation)}
    named |= {e.id: f"{e.turn_ids} {e.content}" for e in memory.episodes(conversation)}
    named |= {f.id: f.content for f in memory.facts(conversation, include_superseded=True)}
    return named


def number(rid: str) -> int:
    return int(rid.rsplit(":", 1)[-1].lstrip("ES"))


def test_a_deleted_fact_s_id_is_never_given_again(memory: Memory) -> None:
    """Finding 3 of issue 30: after delete-fact S<max>, correct-fact made a new S<max>."""
    memory.add_messages("c1", messages("pottery"))
    memory.build("c1")
    facts = [f.id for f in memory.facts("c1")]
    last = max(facts, key=number)
    memory.delete_fact("c1", last)
    other = next(f for f in facts if f != last)
    correction = memory.correct_fact("c1", other, "Ana fires her pottery in a kiln.")
    assert correction.new not in facts and number(correction.new) == number(last) + 1


def test_a_rebuild_after_a_deleted_message_gives_its_episodes_new_ids(memory: Memory) -> None:
    """Finding 3 of issue 30: after a deleted message and a rebuild, E<n> named other turns."""
    memory.add_messages("c1", messages("garden"))
    memory.build("c1")
    before = contents(memory, "c1")
    last = max(memory.episodes("c1"), key=lambda e: number(e.id))
    forgotten = memory.delete_message("c1", last.turn_ids[0])
    assert last.id in forgotten.episodes
    memory.build("c1")
    after = contents(memory, "c1")
    assert last.id not in after
    assert {rid: after[rid] for rid in before.keys() & after.keys()} == {
        rid: before[rid] for rid in before.keys() & after.keys()
    }  # no id names other content than it did
    highest = max(number(e) for e in before if e.startswith("E"))
    assert all(number(e) > highest for e in after.keys() - before.keys() if e.startswith("E"))


def test_a_message_without_an_id_never_gets_a_deleted_one_s(memory: Memory) -> None:
    first = memory.add_messages("c1", messages("tea", sessions=1, per_session=3))
    assert first.ids == ["D1:1", "D1:2", "D1:3"]
    memory.delete_message("c1", "D1:3")
    assert memory.add_messages("c1", messages("coffee", sessions=1, per_session=1)).ids == ["D1:4"]
    memory.delete_message("c1", "D1:2")  # a message in the middle: the next goes last
    assert memory.add_messages("c1", messages("milk", sessions=1, per_session=1)).ids == ["D1:5"]
    turns = memory.turns("c1")
    assert [t.id for t in turns] == ["D1:1", "D1:4", "D1:5"]
    assert [t.position for t in turns] == sorted({t.position for t in turns})
    assert "milk" in turns[-1].text


def test_a_re_created_conversation_is_a_new_one(memory: Memory) -> None:
    memory.add_messages("c1", messages("old"))
    memory.build("c1")
    [old] = memory.conversations()
    assert old.created_at is not None and old.created_at.tzinfo is not None
    memory.delete("c1")
    memory.add_messages("c1", messages("new"))
    memory.build("c1")
    [new] = memory.conversations()
    assert new.created_at is not None and new.created_at > old.created_at
    assert memory.turns("c1")[0].id == "D1:1"  # a new life counts its ids from 1 again
    assert min(number(e.id) for e in memory.episodes("c1")) == 1
    assert min(number(f.id) for f in memory.facts("c1")) == 1


def test_listings_show_when_a_conversation_was_created(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    with served(llm=None, store_url=store) as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        remote.add_messages("c1", messages("old", sessions=1))
        [listed] = s.client.get("/v1/conversations", headers=s.auth(s.alice)).json()
        [seen] = remote.conversations()
        assert datetime.fromisoformat(listed["created_at"]) == seen.created_at
        assert remote.conversation("c1").created_at == seen.created_at
        assert remote.delete("c1")
        remote.add_messages("c1", messages("new", sessions=1))
        [again] = remote.conversations()
        assert again.created_at is not None and again.created_at > seen.created_at
    output = (
        CliRunner()
        .invoke(app, ["conversations", "--store", store, "--namespace", "alice", "--json"])
        .output
    )
    [row] = json.loads(output)
    assert datetime.fromisoformat(row["created_at"]) == again.created_at


def test_a_migrated_store_counts_on_from_its_highest_ids(store_url: str) -> None:
    """A store written before counters existed starts each one at the highest id it holds:
    legacy-1 holds D1:1, D1:2, D2:1, episodes E2 and E10, facts S1 and S2."""
    backend, target = parse_store_url(store_url)
    if backend == "sqlite":
        create_sqlite(target)
        fill_sqlite(target)
    else:
        create_postgres(target)
        fill_postgres(target)
    embedder = HashEmbedder(dim=4)  # the legacy store's embedder
    with Memory(open_store(store_url), embedder) as memory:
        assert memory.store.counters(Scope("legacy-1")) == {"D1:": 2, "D2:": 1, "E": 10, "S": 2}
        assert memory.store.counters(Scope("legacy-2", "team")) == {}
        assert all(c.created_at is not None for c in memory.store.conversations())
        correction = memory.correct_fact("legacy-1", FACTS[0][0], "Miso is a clumsy cat.")
        assert correction.new == "S3"
        namespace, conversation, speakers = CONVERSATIONS[1]
        gone = memory.store.pin(Scope(conversation, namespace))  # the highest store key
        memory.store.delete_conversation(Scope(conversation, namespace))
        memory.store.put_conversation(Scope(conversation, namespace), speakers)
        with pytest.raises(ConversationGoneError):  # the new one got a new key
            memory.store.get_conversation(gone)


def test_a_remote_ingest_leaves_message_ids_to_the_server(tmp_path: Path) -> None:
    """The remote client sends the ids a source gives and no others: the server numbers the
    rest from its counters, as an embedded ingest does."""
    source = tmp_path / "chat.json"
    source.write_text(json.dumps([{**m, "conversation_id": "c1"} for m in messages("tea")]))
    with served(llm=None) as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        remote.add_messages("c1", messages("first", sessions=1, per_session=1))
        remote.delete_message("c1", "D1:1")  # D1:1 is never given again
        remote.ingest(source)
        stored = [r.record.id for r in remote.search("c1", "tea", k=None)]
    with Memory(open_store(None), HashEmbedder()) as local:
        local.add_messages("c1", messages("first", sessions=1, per_session=1))
        local.delete_message("c1", "D1:1")
        local.ingest(source)
        assert sorted(stored) == sorted(t.id for t in local.turns("c1"))
    # the session D1:1 left empty went with it, and its number is not given again (issue 34)
    assert (
        "D1:1" not in stored and "D2:1" in stored and not any(i.startswith("D1:") for i in stored)
    )
