"""Timestamps with a UTC offset keep their local wall time and offset end to end; a
conversation's timestamps all have an offset or none."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from qemem import RemoteMemory
from qemem.errors import InputError
from qemem.evidence.agreement import time_agrees
from qemem.evidence.context import SourceIndex, show_date
from qemem.evidence.times import resolve_times
from qemem.ingest import parse_generic, parse_locomo
from qemem.lexicon import parse_datetime
from qemem.memory import Memory
from qemem.memory_file import MemoryFile
from qemem.models import Episode, format_datetime
from service_helpers import served


def message(n: int, timestamp: str, session: str = "s1", **changes: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "timestamp": timestamp,
        "speaker": "Ann" if n % 2 else "Raj",
        "text": f"message {n}: I went hiking yesterday",
        "id": f"m{n}",
    } | changes


AWARE = [
    message(1, "2023-05-08T01:00:00+05:30"),
    message(2, "2023-05-08T01:05:00+05:30"),
    message(3, "2023-05-08T10:00:00+05:30", "s2"),
    message(4, "2023-05-08T10:00:00Z", "s3"),  # same wall time as m3, 5h30 later
]


def test_offsets_round_trip_on_both_backends(store_url: str) -> None:
    with Memory.open(store_url, embedder="hash", llm="fake") as memory:
        memory.add_messages("c1", AWARE)
        memory.build("c1")
    with Memory.open(store_url, embedder="hash", read_only=True) as memory:
        turns = {t.id: t for t in memory.turns("c1")}
        assert [turns[f"m{n}"].timestamp.isoformat() for n in range(1, 5)] == [
            "2023-05-08T01:00:00+05:30",
            "2023-05-08T01:05:00+05:30",
            "2023-05-08T10:00:00+05:30",
            "2023-05-08T10:00:00+00:00",
        ]
        assert turns["m3"].timestamp != turns["m4"].timestamp
        assert turns["m3"].timestamp < turns["m4"].timestamp
        conv = memory.conversation("c1")
        assert [s.date_time.isoformat() for s in conv.sessions] == [
            "2023-05-08T01:00:00+05:30",
            "2023-05-08T10:00:00+05:30",
            "2023-05-08T10:00:00+00:00",
        ]
        assert conv.span == (conv.sessions[0].date_time, conv.sessions[-1].date_time)
        episodes = memory.episodes("c1")
        assert episodes and all(e.timestamp.utcoffset() is not None for e in episodes)
        first = next(e for e in episodes if e.session == 1)
        assert first.timestamp.isoformat() == "2023-05-08T01:00:00+05:30"


def test_yesterday_near_midnight_uses_the_local_date() -> None:
    with Memory.open(None, embedder="hash") as memory:
        memory.add_messages("c1", AWARE[:2])
        index = SourceIndex(memory.store, memory.scope("c1"))
        turn = index.turns[0]
        anchor = index.session_date(turn)
        assert anchor.date() == date(2023, 5, 8)  # UTC would say 7 May, 19:30
        [found] = resolve_times(turn.text, anchor)
        assert (found.start, found.end) == (date(2023, 5, 7), date(2023, 5, 7))
        assert time_agrees("7 May 2023", found) is True
        assert time_agrees("6 May 2023", found) is False
        assert show_date(anchor) == "Monday, 8 May 2023, 01:00 UTC+05:30"


def test_format_datetime_shows_local_time_and_offset() -> None:
    [conv] = parse_generic([{**message(1, "2023-05-08T23:30-04:00"), "conversation_id": "c"}])
    when = conv.sessions[0].date_time
    assert format_datetime(when) == "8 May 2023, 23:30 UTC-04:00"
    assert format_datetime(when.replace(tzinfo=None)) == "8 May 2023, 23:30"


def test_order_and_backwards_check_compare_instants(tmp_path: Path) -> None:
    with Memory.open(None, embedder="hash") as memory:
        with pytest.raises(InputError, match="dates run backwards"):
            # 10:00+05:30 is 04:30 UTC, before 09:00Z although its wall time is later
            memory.add_messages(
                "c1", [message(1, "2023-05-08T09:00Z"), message(2, "2023-05-08T10:00+05:30", "s2")]
            )
        assert memory.conversations() == []


def test_a_changed_offset_is_a_changed_session_date() -> None:
    with Memory.open(None, embedder="hash") as memory:
        memory.add_messages("c1", [message(1, "2023-05-08T10:00+05:30")])
        same_instant = [{**message(2, "2023-05-08T04:30Z"), "conversation_id": "c1"}]
        with pytest.raises(InputError, match="conflicts with the stored session date"):
            memory.ingest(parse_generic(same_instant))


def test_mixing_offsets_is_refused_naming_the_record(tmp_path: Path) -> None:
    records = [
        {**message(1, "2023-05-08T10:00+05:30"), "conversation_id": "c1"},
        {**message(2, "2023-05-08T10:05"), "conversation_id": "c1"},
    ]
    with pytest.raises(InputError, match=r"has no UTC offset.*record 2.*field timestamp"):
        parse_generic(records, "chat.json")
    other = [records[0], {**records[1], "conversation_id": "c2"}]  # separate conversations
    assert len(parse_generic(other)) == 2
    with Memory.open(tmp_path / "m.db", embedder="hash") as memory:
        memory.add_messages("c1", [message(1, "2023-05-08T10:00")])
        with pytest.raises(InputError, match=r"has a UTC offset.*session s2"):
            memory.add_messages("c1", [message(2, "2023-05-09T10:00Z", "s2")])
        with pytest.raises(InputError, match=r"has a UTC offset.*field timestamp"):
            memory.add_messages("c1", [message(3, "2023-05-08T10:05Z")])  # stored session s1
        assert [t.id for t in memory.turns("c1")] == ["m1"]


def test_mixing_offsets_is_refused_in_locomo_and_memory_files(tmp_path: Path) -> None:
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Raj",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "text": "hi", "dia_id": "D1:1"}],
            "session_2_date_time": "2023-05-09T10:00+05:30",
            "session_2": [{"speaker": "Raj", "text": "hey", "dia_id": "D2:1"}],
        },
    }
    with pytest.raises(InputError, match=r"sample conv-x.*session_2_date_time"):
        parse_locomo([sample], "locomo.json")
    with Memory.open(tmp_path / "m.db", embedder="hash") as memory:
        memory.add_messages("c1", [message(1, "2023-05-08T10:00")])
        naive = memory.turns("c1")[0].timestamp
        episode = Episode("E1", "c1", 1, "Hike", "Ann hiked.", naive, ("m1",))
        aware = Episode(
            "E1", "c1", 1, "Hike", "Ann hiked.", parse_datetime("2023-05-08T10:00+05:30"), ("m1",)
        )
        with pytest.raises(InputError, match=r"has a UTC offset.*episode E1"):
            memory.import_memory(MemoryFile("c1", "", (aware,), ()))
        assert memory.import_memory(MemoryFile("c1", "", (episode,), ())).episodes_added == 1


def test_remote_sends_and_returns_offsets(tmp_path: Path) -> None:
    records = [{**m, "conversation_id": "c1"} for m in AWARE]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with served(llm=None) as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        assert remote.ingest(path).turns_added == 4
        conv = remote.conversation("c1")
        offsets = [s.date_time.utcoffset() for s in conv.sessions]
        assert offsets == [timedelta(hours=5, minutes=30)] * 2 + [timedelta(0)]
        assert [s.date_time.hour for s in conv.sessions] == [1, 10, 10]
        body = s.client.get("/v1/conversations/c1", headers=s.auth(s.alice)).json()
        assert body["sessions"][0]["date_time"] == "2023-05-08T01:00:00+05:30"
