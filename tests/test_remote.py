"""RemoteMemory against the real app (Starlette's sync test client: httpx over the ASGI app):
same methods, same return types and errors as the embedded Memory over the same store."""

from __future__ import annotations

from pathlib import Path

import pytest

from qemem import RemoteMemory
from qemem.answer import Answer
from qemem.embed import HashEmbedder
from qemem.errors import AuthError, ConflictError, InputError, LLMError, NotFoundError
from qemem.memory import Memory
from qemem.store import SQLiteStore
from service_helpers import MESSAGES, served


@pytest.mark.slow
def test_remote_matches_embedded_memory(sample_path: Path) -> None:
    with served() as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client, poll_seconds=0.02)
        report = remote.ingest(sample_path)
        assert report.added == {"demo-1": (5, 65)}
        assert remote.ingest(sample_path).turns_added == 0
        with Memory(SQLiteStore(":memory:"), HashEmbedder()) as local:
            local.ingest(sample_path)
            local_conv = local.conversation("demo-1")
            ids = {t.id for t in local.turns("demo-1")}
            expected = local.search("demo-1", "pottery class", k=5)
        assert {r.record.id for r in remote.search("demo-1", "a", k=None)} == ids
        [conv] = remote.conversations()
        assert conv.sessions == local_conv.sessions and conv.speakers == local_conv.speakers
        assert conv.namespace == "alice" == remote.conversation("demo-1").namespace
        assert remote.search("demo-1", "pottery class", k=5) == expected
        pool = remote.retrieve("demo-1", "When did Priya go to pottery?")
        assert pool.turns
        first = pool.turns[0].ref
        again = remote.retrieve("demo-1", "When did Priya go to pottery?", exclude=[first])
        assert first not in again.refs()
        answer = remote.ask("demo-1", "What pottery pieces has Priya made?")
        assert isinstance(answer, Answer) and answer.text and answer.cards
        [built] = remote.build("demo-1")
        assert built.conversation == "demo-1" and built.episodes > 0
        assert remote.delete("demo-1") and not remote.delete("demo-1")
        assert remote.conversations() == []


def test_remote_add_messages_and_errors() -> None:
    with served(llm=None) as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        assert remote.add_messages("c1", MESSAGES).ids == ["m1", "m2", "D2:1"]
        with pytest.raises(ConflictError):
            remote.add_messages("c1", [{**MESSAGES[0], "text": "changed"}])
        with pytest.raises(InputError):
            remote.add_messages("c1", [{**MESSAGES[0], "timestamp": "soon"}])
        with pytest.raises(NotFoundError):
            remote.search("nope", "cat")
        with pytest.raises(LLMError):
            remote.ask("c1", "Who has a cat?")
        assert remote.ask("c1", "Who has a cat?", mode="retrieval").pool.turns
        with pytest.raises(AuthError):
            RemoteMemory("http://testserver", "qm_bad_key", client=s.client).conversations()
        with pytest.raises(AuthError):
            RemoteMemory("http://testserver", s.reader, client=s.client).delete("c1")
