"""Parsing (LoCoMo and generic), idempotent and appending ingest, and bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from qemem.errors import InputError
from qemem.ingest import locomo_questions, parse_generic, parse_locomo, read_conversations
from qemem.ingest.locomo import clean_evidence, load_locomo
from qemem.lexicon import parse_datetime
from qemem.memory import Memory

IST = timezone(timedelta(hours=5, minutes=30))

SAMPLE_ID = "demo-1"


def locomo_sample(sessions: int = 2) -> dict:
    conv: dict = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for s in range(1, sessions + 1):
        conv[f"session_{s}_date_time"] = f"1:56 pm on {s} May, 2023"
        conv[f"session_{s}"] = [
            {"speaker": "Ana", "dia_id": f"D{s}:1", "text": f"Hello from session {s}."},
            {
                "speaker": "Ben",
                "dia_id": f"D{s}:2",
                "text": "Look at this!",
                "img_url": ["x"],
                "blip_caption": "a photo of a red kite",
            },
            {"speaker": "Ana", "dia_id": f"D{s}:3", "text": "Lovely kite."},
        ]
    return {
        "sample_id": "tiny",
        "conversation": conv,
        "qa": [{"question": "Q?", "answer": 2022, "evidence": ["D1:1; D2:03"], "category": 2}],
    }


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9)),
        ("12:30 pm on 1 Jan, 2024", datetime(2024, 1, 1, 12, 30)),
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 13, 56)),
        ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08T01:00+05:30", datetime(2023, 5, 8, 1, 0, tzinfo=IST)),
    ],
)
def test_parse_datetime(text: str, expected: datetime) -> None:
    parsed = parse_datetime(text)
    assert parsed == expected and parsed.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize("text", ["yesterday", "1:56 pm on 31 February, 2023", ""])
def test_parse_datetime_rejects_garbage(text: str) -> None:
    with pytest.raises(InputError):
        parse_datetime(text)


def test_locomo_parsing_keeps_ids_order_and_captions() -> None:
    [conv] = parse_locomo([locomo_sample()], "tiny.json")
    assert conv.id == "tiny" and conv.speakers == ["Ana", "Ben"]
    assert [s.index for s in conv.sessions] == [1, 2]
    first = conv.sessions[0]
    assert first.date_time == datetime(2023, 5, 1, 13, 56)
    assert [t.id for t in first.turns] == ["D1:1", "D1:2", "D1:3"]
    assert first.turns[1].text == "Look at this! [shares a photo: a photo of a red kite]"
    assert all(t.timestamp == first.date_time for t in first.turns)


def test_locomo_questions_clean_evidence_and_cast_numbers() -> None:
    [q] = locomo_questions([locomo_sample()])
    assert q.answer == "2022" and q.category_name == "temporal"
    assert q.evidence == ("D1:1", "D2:3")
    assert clean_evidence(["D30:05", "junk"]) == ("D30:5",)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda s: s["conversation"]["session_1"][0].pop("text"), "session_1[0].text"),
        (lambda s: s["conversation"].pop("session_2_date_time"), "session_2_date_time"),
        (
            lambda s: s["conversation"].__setitem__("session_1_date_time", "soon"),
            "session_1_date_time",
        ),
        (
            lambda s: s["conversation"]["session_2"][0].__setitem__("dia_id", "D1:1"),
            "session_2[0].dia_id",
        ),
    ],
)
def test_locomo_bad_input_names_file_record_and_field(mutate, field: str) -> None:
    sample = locomo_sample()
    mutate(sample)
    with pytest.raises(InputError) as info:
        parse_locomo([sample], "bad.json")
    assert info.value.file == "bad.json"
    assert info.value.record == "sample tiny"
    assert info.value.field == field
    assert "bad.json" in str(info.value)


GENERIC = [
    {
        "conversation_id": "c1",
        "session_id": "morning",
        "timestamp": "2024-03-01T09:00:00",
        "speaker": "user",
        "text": "I adopted a cat named Miso.",
    },
    {
        "conversation_id": "c1",
        "session_id": "morning",
        "timestamp": "2024-03-01T08:59:00",
        "speaker": "agent",
        "text": "Congratulations!",
        "id": "m-2",
    },
    {
        "conversation_id": "c1",
        "session_id": "evening",
        "timestamp": "2024-03-02T19:00:00",
        "speaker": "user",
        "text": "Miso slept all day.",
        "image_caption": "a sleepy cat",
    },
]


def test_generic_json_and_jsonl_parse_the_same(tmp_path: Path) -> None:
    as_json = read_conversations(write(tmp_path / "chat.json", GENERIC))
    jsonl = tmp_path / "chat.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in GENERIC) + "\n\n", encoding="utf-8")
    assert read_conversations(jsonl) == as_json
    [conv] = as_json
    assert [s.key for s in conv.sessions] == ["morning", "evening"]
    morning = conv.sessions[0]
    # file order is kept even though the second message has an earlier timestamp
    assert [t.text for t in morning.turns] == ["I adopted a cat named Miso.", "Congratulations!"]
    assert morning.date_time == datetime(2024, 3, 1, 9, 0)
    assert conv.sessions[1].turns[0].text.endswith("[shares a photo: a sleepy cat]")


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (
            {"session_id": "s", "timestamp": "2024-01-01", "speaker": "a", "text": "t"},
            "conversation_id",
        ),
        (
            {
                "conversation_id": "c",
                "session_id": "s",
                "timestamp": "someday",
                "speaker": "a",
                "text": "t",
            },
            "timestamp",
        ),
        (
            {
                "conversation_id": "c",
                "session_id": "s",
                "timestamp": "2024-01-01",
                "speaker": "a",
                "text": "",
            },
            "text",
        ),
        (
            {
                "conversation_id": "c",
                "session_id": "s",
                "timestamp": "2024-01-01",
                "speaker": "a",
                "text": "t",
                "id": 5,
            },
            "id",
        ),
    ],
)
def test_generic_bad_records(record: dict, field: str) -> None:
    with pytest.raises(InputError) as info:
        parse_generic([GENERIC[0], record], "chat.json")
    assert (info.value.file, info.value.record, info.value.field) == (
        "chat.json",
        "record 2",
        field,
    )


def test_generic_bad_jsonl_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(GENERIC[0]) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 2"):
        read_conversations(path)


def test_ingest_sample_and_reingest_changes_nothing(memory: Memory, sample_path: Path) -> None:
    turns = memory.turns(SAMPLE_ID)
    samples = load_locomo(sample_path)
    expected = sum(
        len(v)
        for k, v in samples[0]["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
    )
    assert len(turns) == expected
    # conversation order: session, then position (all turns of a session share a timestamp)
    assert [(t.session, t.position) for t in turns] == sorted(
        (t.session, t.position) for t in turns
    )
    report = memory.ingest(sample_path)
    assert report.turns_added == 0 and report.sessions_added == 0
    assert memory.turns(SAMPLE_ID) == turns


def test_appending_a_session_adds_only_it(empty_memory: Memory, tmp_path: Path) -> None:
    first = empty_memory.ingest(write(tmp_path / "a.json", [locomo_sample(1)]))
    assert first.added == {"tiny": (1, 3)}
    second = empty_memory.ingest(write(tmp_path / "b.json", [locomo_sample(2)]))
    assert second.added == {"tiny": (1, 3)}
    assert [t.id for t in empty_memory.turns("tiny")] == [
        "D1:1",
        "D1:2",
        "D1:3",
        "D2:1",
        "D2:2",
        "D2:3",
    ]
    assert len(empty_memory.conversation("tiny").sessions) == 2


def test_generic_append_to_a_growing_session(empty_memory: Memory, tmp_path: Path) -> None:
    empty_memory.ingest(write(tmp_path / "a.json", GENERIC[:1]))
    empty_memory.ingest(write(tmp_path / "b.json", GENERIC))
    turns = empty_memory.turns("c1")
    assert [t.id for t in turns] == ["D1:1", "m-2", "D2:1"]
    assert [s.key for s in empty_memory.conversation("c1").sessions] == ["morning", "evening"]


def test_conflicting_reingest_is_refused_and_store_unchanged(
    empty_memory: Memory, tmp_path: Path
) -> None:
    empty_memory.ingest(write(tmp_path / "a.json", [locomo_sample(1)]))
    before = empty_memory.turns("tiny")
    changed = locomo_sample(2)
    changed["conversation"]["session_1"][2]["text"] = "Rewritten history."
    with pytest.raises(InputError, match="conflicts with the stored turn D1:3"):
        empty_memory.ingest(write(tmp_path / "b.json", [changed]))
    assert empty_memory.turns("tiny") == before
    assert len(empty_memory.conversation("tiny").sessions) == 1


def test_bad_file_writes_nothing(empty_memory: Memory, tmp_path: Path) -> None:
    good, bad = locomo_sample(1), locomo_sample(1)
    bad["sample_id"] = "broken"
    bad["conversation"]["session_1"][1]["speaker"] = None
    with pytest.raises(InputError):
        empty_memory.ingest(write(tmp_path / "mixed.json", [good, bad]))
    assert empty_memory.conversations() == []


def test_namespaces_keep_conversations_apart(sample_path: Path) -> None:
    from qemem.embed import HashEmbedder
    from qemem.store import SQLiteStore

    store = SQLiteStore(":memory:")
    alice = Memory(store, HashEmbedder(), namespace="alice")
    bob = Memory(store, HashEmbedder(), namespace="bob")
    alice.ingest(sample_path)
    assert [c.id for c in alice.conversations()] == [SAMPLE_ID]
    assert bob.conversations() == []
    bob.ingest(sample_path)
    assert bob.delete(SAMPLE_ID)
    assert len(alice.turns(SAMPLE_ID)) > 0
