"""Passages: long messages are cut into passages at ingest, each searched on its own; the
turn stays the unit of provenance; prompts show passages, not whole replies; passages go
with their turn (delete, redact, delete the conversation), are re-embedded with the store and
built for older stores by ``reindex``."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from contextlib import closing
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from qemem.embed import HashEmbedder
from qemem.embed.documents import document_text
from qemem.eval.coverage import ConversationUnits, best_passage
from qemem.evidence.context import SourceIndex, format_pool
from qemem.memory import Memory, reembed, reindex
from qemem.memory.turn_vectors import embed_turns
from qemem.models import Ref, Session, Turn, passage_key, search_text, split_key
from qemem.passages import OMITTED, excerpt, is_whole, split_passages
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.search import hybrid_search
from qemem.store import MemoryStore, Scope, open_store

WHEN = datetime(2024, 3, 14, 19, 15)
CODE = (
    "```python\ndef login():\n    if request.method == 'POST':\n"
    "        return redirect('/home')\n```"
)
FILLER = [
    f"Step {n}: we talk about topic number {n}, its trade-offs, costs and the plan for it."
    for n in range(120)
]
LONG = "\n\n".join(
    [*FILLER[:60], CODE, "The rotating gazebo budget is 4,200 dollars.", *FILLER[60:]]
)


def _covers_once(text: str, spans: list[tuple[int, int]], size: int) -> None:
    seen = [0] * len(text)
    for start, end in spans:
        assert end - start <= size and not text[end - 1].isspace()
        for i in range(start, end):
            seen[i] += 1
    assert all(n == 1 for i, n in enumerate(seen) if not text[i].isspace())
    assert all(n <= 1 for n in seen)


def test_a_short_text_is_one_passage_and_a_blank_one_none() -> None:
    assert split_passages("  hello world \n", 100) == [(0, 13)]  # indentation kept
    assert is_whole("  hello world \n", [(0, 13)])
    assert split_passages(" \n\t", 100) == []
    with pytest.raises(ValueError):
        split_passages("x", 0)


def test_long_text_is_cut_at_blocks_lines_sentences_then_words() -> None:
    spans = split_passages(LONG, 400)
    _covers_once(LONG, spans, 400)
    assert len(spans) > 10 and not is_whole(LONG, spans)
    code = LONG.index(CODE)
    assert any(start <= code and code + len(CODE) <= end for start, end in spans)  # one block
    lines = "def first_line():\n    return an_indented_line\nprint(first_line())"
    cut = split_passages(lines, 30)
    assert [lines[s:e] for s, e in cut] == [
        "def first_line():",
        "    return an_indented_line",  # a line keeps its indentation
        "print(first_line())",
    ]
    sentences = "One short sentence. Another one here! And a third? Yes."
    assert [sentences[s:e] for s, e in split_passages(sentences, 25)] == [
        "One short sentence.",
        "Another one here!",
        "And a third? Yes.",
    ]
    word = "x" * 25
    assert split_passages(word, 10) == [(0, 10), (10, 20), (20, 25)]


def test_an_excerpt_marks_what_it_leaves_out() -> None:
    text = "aaa bbb ccc ddd"
    assert excerpt(text, None) == text
    assert excerpt(text, [(4, 7)]) == f"{OMITTED}\nbbb\n{OMITTED}"
    assert excerpt(text, [(0, 3), (4, 7)]) == f"aaa bbb\n{OMITTED}"  # adjacent: joined
    assert excerpt(text, [(12, 15), (0, 3)]) == f"aaa\n{OMITTED}\nddd"


def test_passage_keys_never_equal_a_turn_id() -> None:
    assert passage_key("D1:3", None) == "D1:3"
    key = passage_key("a#1:2", (10, 20))
    assert key != "a#1:2" and split_key(key) == ("a#1:2", (10, 20))
    assert split_key("D1:3") == ("D1:3", None)


def _write(path: Path, texts: list[tuple[str, str]]) -> Path:
    records = [
        {
            "conversation_id": "c1",
            "session_id": "s1",
            "timestamp": f"2024-03-01T10:{n:02d}:00",
            "speaker": speaker,
            "text": text,
        }
        for n, (speaker, text) in enumerate(texts)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    return _write(
        tmp_path / "chat.jsonl",
        [
            ("User", "Can you plan my garden project?"),
            ("Assistant", LONG),
            ("User", "Thanks, that helps."),
        ],
    )


def test_a_long_message_is_searched_by_its_passages(store_url: str, chat: Path) -> None:
    with Memory.open(store_url, embedder=HashEmbedder()) as memory:
        memory.ingest(chat)
        assert memory.ingest(chat).turns_added == 0  # idempotent: nothing embedded again
        spans = memory.passages("c1")["D1:2"]
        assert spans == split_passages(LONG) and len(spans) > 1
        assert set(memory.passages("c1")) == {"D1:2"}  # short turns are one passage each
        [hit] = memory.search("c1", "rotating gazebo budget", k=1)
        assert hit.record.id == "D1:2" and hit.record.text == LONG  # the turn, whole
        assert hit.hit.span is not None and "gazebo" in LONG[slice(*hit.hit.span)]
        config = RetrievalConfig(budget_turns=1, context_window=1, context_tokens=None)
        pool = memory.retrieve("c1", "What is the rotating gazebo budget?", config=config)
        item = next(i for i in pool.turns if i.id == "D1:2")
        assert item.passages and hit.hit.span in item.passages
        assert len(item.passages) == 3  # the passage and one each side, not the whole reply
        bounded = replace(config, context_tokens=100)  # neighbours of up to 100 tokens a side
        pool = memory.retrieve("c1", "What is the rotating gazebo budget?", config=bounded)
        item = next(i for i in pool.turns if i.id == "D1:2")
        assert item.passages == [hit.hit.span]  # the passages beside it are longer
        shown = format_pool(SourceIndex(memory.store, memory.scope("c1")), pool)
        assert "gazebo" in shown and f"  | {OMITTED}" in shown
        assert FILLER[0] not in shown or FILLER[-1] not in shown


def test_prompts_keep_the_shape_of_code(chat: Path) -> None:
    with Memory.open(None, embedder=HashEmbedder()) as memory:
        memory.ingest(chat)
        assert memory.turns("c1", ["D1:2"])[0].text == LONG  # stored as sent
        pool = memory.retrieve("c1", "login request method POST redirect home")
        shown = format_pool(SourceIndex(memory.store, memory.scope("c1")), pool)
        assert "  | def login():\n  |     if request.method == 'POST':" in shown
        block = memory.context("c1", "login request method POST redirect home", budget_tokens=800)
        assert "  |         return redirect('/home')" in block.text
        passage = next(i for i in block.items if i.ref.id == "D1:2")
        assert passage.ref.span is not None and "def login" in passage.text


def test_passages_go_with_their_turn_and_conversation(store_url: str, chat: Path) -> None:
    with Memory.open(store_url, embedder=HashEmbedder()) as memory:
        memory.ingest(chat)
        memory.redact_message("c1", "D1:2")
        assert memory.passages("c1") == {}
        hits = memory.search("c1", "rotating gazebo budget", k=None)
        assert all("gazebo" not in h.record.text for h in hits)
        again = {"session_id": "s1", "timestamp": "2024-03-01T11:00:00", "speaker": "A"}
        assert memory.add_messages("c1", [{**again, "text": LONG}]).ids == ["D1:4"]
        assert set(memory.passages("c1")) == {"D1:4"}  # appended: passages too
        memory.delete_message("c1", "D1:1")
        assert set(memory.passages("c1")) == {"D1:4"}
        memory.delete_message("c1", "D1:4")
        assert memory.passages("c1") == {}
        memory.add_messages("c1", [{**again, "text": LONG, "id": "long-2", "session_id": "s2"}])
        assert set(memory.passages("c1")) == {"long-2"}
        assert memory.delete("c1")
    with closing(open_store(store_url)) as store:
        rows = store._query(
            "SELECT count(*) FROM vectors WHERE space IN ('passage', 'next:passage')"
        )  # type: ignore[attr-defined]
        assert rows[0][0] == 0  # no passage vector outlives its turn
        assert store._query("SELECT count(*) FROM passages")[0][0] == 0  # type: ignore[attr-defined]


def test_reindex_builds_the_passages_an_older_store_lacks(store_url: str) -> None:
    scope = Scope("old")
    embedder = HashEmbedder()
    turn = Turn("D1:1", "old", 1, 0, "Assistant", LONG, WHEN)
    with closing(open_store(store_url)) as store:
        store.put_conversation(scope, ["Assistant"])
        store.add_sessions(scope, [Session(1, WHEN, "s1")])
        vector = embedder.embed([f"Assistant: {LONG}"[:4000]])
        store.add_turns(scope, [turn], vector, embedder.id)  # as stores before passages
        assert store.passages(scope) == {}
        [hit] = hybrid_search(store, scope, "turn", ["gazebo budget"], embedder, k=1)
        assert hit.id == "D1:1" and hit.span is None  # searched whole until reindexed
        report = reindex(store, embedder)
        assert report.turns == {"old": 1} and report.passages["old"] == len(split_passages(LONG))
        assert store.passages(scope)["D1:1"] == split_passages(LONG)
        [hit] = hybrid_search(store, scope, "turn", ["gazebo budget"], embedder, k=1)
        assert hit.span is not None and "gazebo" in LONG[slice(*hit.span)]
        assert reindex(store, embedder).unchanged  # a second run finds nothing to do
        smaller = reindex(store, embedder, size=300)  # another size: split again
        assert smaller.turns == {"old": 1} and store.passages(scope)["D1:1"] == split_passages(
            LONG, 300
        )
        with pytest.raises(Exception, match="embedded with"):
            reindex(store, HashEmbedder(dim=64))


class _RedactingOnce(HashEmbedder):
    """Redacts ``D1:2`` through another memory the first time it embeds passages."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__()
        self.store, self.done = store, False

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        if not self.done:
            self.done = True
            Memory(self.store, HashEmbedder()).redact_message("old", "D1:2")
        return super().embed(texts, query=query)


def test_reindex_writes_no_passage_of_a_message_redacted_meanwhile(store_url: str) -> None:
    scope, embedder = Scope("old"), HashEmbedder()
    secret = LONG.replace("gazebo", "pergola")
    turns = [Turn(f"D1:{n}", "old", 1, n, "A", text, WHEN) for n, text in [(1, LONG), (2, secret)]]
    with closing(open_store(store_url)) as store:
        store.put_conversation(scope, ["A"])
        store.add_sessions(scope, [Session(1, WHEN, "s1")])
        vectors = embedder.embed([document_text(search_text(t)) for t in turns])
        store.add_turns(scope, turns, vectors, embedder.id)  # as stores before passages
        report = reindex(store, _RedactingOnce(store), batch=1)
        assert report.turns == {"old": 1}  # the first write was fenced, then read again
        assert set(store.passages(scope)) == {"D1:1"}
        hits = hybrid_search(store, scope, "turn", ["rotating pergola budget"], embedder, k=None)
        texts = {t.id: t.text for t in store.turns(scope)}
        assert all("pergola" not in texts[h.id] for h in hits)


def test_reembed_moves_passages_to_the_new_embedder(chat: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder=HashEmbedder()) as memory:
        memory.ingest(chat)
    with closing(open_store(path)) as store:
        report = reembed(store, HashEmbedder(dim=64))
        assert report.embedded["passage"] == len(split_passages(LONG))
    with Memory.open(path, embedder=HashEmbedder(dim=64)) as memory:
        [hit] = memory.search("c1", "rotating gazebo budget", k=1)
        assert hit.hit.span is not None


def test_a_long_turn_is_embedded_by_passages_and_its_vector_is_its_first() -> None:
    embedder = HashEmbedder()
    turns = [
        Turn("a", "c", 1, 0, "U", "short", WHEN),
        Turn("b", "c", 1, 1, "A", LONG, WHEN),
    ]
    seen: list[int] = []

    def embed(texts: object, progress: object) -> np.ndarray:
        seen.append(len(list(texts)))  # type: ignore[call-overload]
        return embedder.embed(list(texts))  # type: ignore[call-overload]

    short, long = embed_turns(embed, turns)
    assert short.passages == () and long.passages == tuple(split_passages(LONG))
    assert seen == [1 + len(long.passages)]  # one call, nothing embedded twice
    assert np.allclose(long.vector, long.passage_vectors[0])


def test_coverage_needs_the_passage_that_best_matches_the_answer() -> None:
    turn = Turn("D1:2", "c", 1, 1, "A", LONG, WHEN)
    spans = split_passages(LONG, 400)
    best = best_passage(turn, spans, "The gazebo budget was 4,200 dollars")
    assert best is not None and "gazebo" in LONG[best[0] : best[1]]
    assert best_passage(turn, spans, "nothing in common here") == spans[0]
    assert best_passage(turn, [], "gazebo") is None
    short = Turn("D1:1", "c", 1, 0, "U", "plan my garden", WHEN)
    known = ConversationUnits.of([short, turn], {"D1:2": spans})
    assert known.evidence(["D1:1", "D1:2", "D9:9"], "gazebo budget") == [
        ("D1:1", None),
        ("D1:2", best),
        ("D9:9", None),
    ]
    assert ("D9:9", None) not in known.aliases  # an unknown turn is never covered


def test_refs_of_a_pool_name_the_passages_it_holds(chat: Path) -> None:
    with Memory.open(None, embedder=HashEmbedder()) as memory:
        memory.ingest(chat)
        config = RetrievalConfig(budget_turns=1, context_window=0)
        pool = memory.retrieve("c1", "What is the rotating gazebo budget?", config=config)
        item = next(i for i in pool.turns if i.id == "D1:2")
        refs = [r for r in pool.refs() if r.id == "D1:2"]
        assert refs == [Ref("turn", "D1:2", span=s) for s in item.passages or []]
        assert len(refs) == 1  # one hit, no context: the gazebo passage
        wider = RetrievalConfig(budget_turns=20, context_window=0)
        again = memory.retrieve("c1", "the rotating gazebo budget", exclude=refs, config=wider)
        later = next(i for i in again.turns if i.id == "D1:2")
        assert later.passages and refs[0].span not in later.passages  # other passages


def test_with_long_messages_a_larger_block_never_shows_less(chat: Path) -> None:
    with Memory.open(None, embedder=HashEmbedder()) as memory:
        memory.ingest(chat)
        question = "What is the rotating gazebo budget for the garden?"
        blocks = [memory.context("c1", question, budget_tokens=b) for b in range(100, 4000, 150)]
    for small, large in itertools.pairwise(blocks):
        refs = [i.ref for i in small.items]
        assert [i.ref for i in large.items[: len(refs)]] == refs
        assert small.tokens <= small.budget_tokens
    passages = [i for i in blocks[-1].items if i.ref.span is not None]
    assert passages and all(i.tokens <= 400 for i in passages)  # a passage, never the reply
