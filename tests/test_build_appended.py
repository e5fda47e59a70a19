"""Messages appended to an already-built session: the next build segments that session's last
episode again together with them (the episode and what only it supported are removed), and
leaves the memory of every other session as it was."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qemem.embed import HashEmbedder
from qemem.memory import Memory
from qemem.store import open_store

TOPICS = [
    "my grey cat Pixel",
    "the trip to Lisbon",
    "learning the cello",
    "a new job at the bakery",
]


def messages(session: str, start: int, count: int) -> list[dict[str, str]]:
    return [
        {
            "session_id": session,
            "timestamp": f"2024-03-{10 + int(session[1:]):02d}T19:{n:02d}:00",
            "speaker": "Ana" if n % 2 else "Ben",
            "text": f"{session} message {n}: we talked about {TOPICS[n % len(TOPICS)]} today.",
            "id": f"{session}-m{n}",
        }
        for n in range(start, start + count)
    ]


@pytest.fixture
def memory(store_url: str) -> Iterator[Memory]:
    with Memory(open_store(store_url), HashEmbedder(), llm="fake") as mem:
        mem.add_messages("c1", messages("s1", 0, 10) + messages("s2", 0, 10))
        mem.build("c1")
        yield mem


def test_appended_messages_resegment_the_last_episode_of_their_session(memory: Memory) -> None:
    session = {t.id: t.session for t in memory.turns("c1")}
    one, two = session["s1-m0"], session["s2-m0"]
    before = memory.episodes("c1")
    last = max(
        (e for e in before if e.session == one), key=lambda e: int(e.turn_ids[0].split("m")[-1])
    )
    untouched = [e for e in before if e.session == two]
    facts_two = {f.id: f.content for f in memory.facts("c1") if f.session == two}
    assert untouched and facts_two
    added = memory.add_messages("c1", messages("s1", 10, 4))
    [report] = memory.build("c1")
    after = memory.episodes("c1")
    assert last.id not in {e.id for e in after}  # replaced
    assert [e for e in after if e.session == two] == untouched  # byte-identical
    facts = {f.id: f for f in memory.facts("c1")}
    assert {i: facts[i].content for i in facts_two} == facts_two  # kept, content unchanged
    covered = [t for e in after for t in e.turn_ids]
    assert sorted(covered) == sorted([*session, *added.ids])  # all turns, new ones too
    assert len(covered) == len(set(covered))  # every turn in exactly one episode
    rebuilt = [e for e in after if e.session == one and e not in before]
    assert set(last.turn_ids) <= {t for e in rebuilt for t in e.turn_ids}
    assert set(added.ids) <= {t for e in rebuilt for t in e.turn_ids}
    assert report.sessions == [one] and report.episodes == len(rebuilt)
    [again] = memory.build("c1")
    assert again.episodes == 0 and memory.episodes("c1") == after  # nothing new: no change


def test_a_build_stopped_after_removing_the_last_episode_removes_no_other(
    memory: Memory,
) -> None:
    session = {t.id: t.session for t in memory.turns("c1")}
    before = memory.episodes("c1")
    mine = [e for e in before if e.session == session["s1-m0"]]
    assert len(mine) > 1
    added = memory.add_messages("c1", messages("s1", 10, 4))
    memory.store.delete_episodes(memory.scope("c1"), [mine[-1].id])  # then the build stopped
    memory.build("c1")
    after = memory.episodes("c1")
    assert [e for e in after if e in before] == [e for e in before if e != mine[-1]]
    covered = {t for e in after for t in e.turn_ids}
    assert set(added.ids) | set(mine[-1].turn_ids) <= covered


def test_an_interrupted_build_resumes_without_resegmenting(memory: Memory) -> None:
    """Turns pending only because a build stopped are in the stored segmentation: the build
    resumes with it and keeps every committed episode."""
    episodes = memory.episodes("c1")
    newest = max(episodes, key=lambda e: int(e.id[1:]))
    memory.store.delete_episodes(memory.scope("c1"), [newest.id])  # as if it was not committed
    memory.build("c1")
    after = memory.episodes("c1")
    assert [e for e in after if e.id != newest.id][: len(episodes) - 1] == [
        e for e in episodes if e.id != newest.id
    ]
    assert [e.turn_ids for e in after][-1] == newest.turn_ids


def test_episodes_are_ordered_by_their_first_turn_not_their_id(memory: Memory) -> None:
    """An episode built again gets a new, higher id but keeps its place in its session, in
    listings and as the tie order of search."""
    scope = memory.scope("c1")
    episodes = memory.episodes("c1")
    first = episodes[0]
    memory.store.delete_episodes(scope, [first.id])
    memory.store.set_state(scope, f"build.segments.{first.session}", "")  # build it anew
    memory.build("c1")
    after = memory.episodes("c1")
    new = [e for e in after if e.id not in {o.id for o in episodes}]
    assert new and all(int(e.id[1:]) > int(o.id[1:]) for e in new for o in episodes)
    assert after[: len(new)] == new and after[0].turn_ids[0] == first.turn_ids[0]
    assert [e.id for e in after[len(new) :]] == [e.id for e in episodes[1:]]
    rows = memory.store.index_rows(scope, "episode")
    assert list(rows.ids) == [e.id for e in after]
