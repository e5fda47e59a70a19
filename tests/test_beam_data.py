"""``qemem data beam``: BEAM's chats and probes as LoCoMo-shaped JSON (hand-written fixtures in
BEAM's layout under tests/fixtures/beam: two 100K-like chats, a 10M-like chat of two plans with
a backwards date, and a 10M-like chat whose second plan lacks its chat.json)."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.datasets.beam import (
    convert_beam,
    dates_forward,
    parse_anchor,
    parse_chat_numbers,
    write_beam,
)
from qemem.datasets.beam_probes import ABILITIES
from qemem.datasets.beam_text import clean_message, strip_markers, tame_runaway
from qemem.datasets.convert import manifest_path
from qemem.errors import InputError
from qemem.ingest.locomo import load_locomo, locomo_questions
from qemem.ingest.reader import read_conversations

FIXTURE = Path(__file__).parent / "fixtures" / "beam"


def _qa(sample: dict[str, Any], ability: str) -> dict[str, Any]:
    return next(q for q in sample["qa"] if q["ability"] == ability)


@pytest.mark.parametrize(
    ("raw", "text", "tail", "inner"),
    [
        ("Where do I start? ->-> 1,14", "Where do I start?", 1, 0),
        ("Where do I start? ->->  3,8  ", "Where do I start?", 1, 0),
        ("Budget? ->-> 4,N/A", "Budget?", 1, 0),
        ("Budget? ->-> 6,", "Budget?", 1, 0),
        ("Budget? ->-> 2,22, 24", "Budget?", 1, 0),
        ("Budget? ->-> 5,(N/A, as this detail is not in focus)", "Budget?", 1, 0),
        ("Code?\n```\nx = 1\n``` ->-> 3,N/A", "Code?\n```\nx = 1\n```", 1, 0),
        (
            "Help? ->-> 7,9Please answer.\nAssistant\n\nSure.",
            "Help? Please answer.\nAssistant\n\nSure.",
            0,
            1,
        ),
        (
            "An arrow -> stays, and so does ->-> alone",
            "An arrow -> stays, and so does ->-> alone",
            0,
            0,
        ),
    ],
)
def test_generator_markers_are_removed(raw: str, text: str, tail: int, inner: int) -> None:
    assert strip_markers(raw) == (text, tail, inner)


def test_runaway_output_is_cut_and_ordinary_text_kept() -> None:
    growing = "\n".join("|" + " " * n + "\\" for n in range(0, 400, 20))
    tamed = tame_runaway(growing)
    assert max(len(line) for line in tamed.split("\n")) == 1 + 128 + 1
    # once cut to 128 spaces the lines are identical: at most 8 copies stay
    assert tamed.count("|" + " " * 128 + "\\") == 8
    assert tame_runaway("/\n" * 1000) == "\n".join(["/"] * 8 + [""])
    table = "| a" + " " * 100 + "| b |\n\n\n\n\n\n\n\n\n\n\nend\n    pass\n    pass"
    assert tame_runaway(table) == table  # blank lines and short repeats are left alone
    clean = clean_message("x" + " " * 300 + "y ->-> 1,1")
    assert (clean.text, clean.tail_markers, clean.runaway_chars) == ("x" + " " * 128 + "y", 1, 302)
    assert clean_message("plain text").runaway_chars is None


def test_dates_run_forward_keeping_later_spacing() -> None:
    days = [date(2025, 3, 31), date(2024, 7, 2), date(2024, 7, 5), date(2024, 7, 1)]
    new, moved = dates_forward(days)
    # 2024-07-02 moves to 2025-04-01 (+273 days); 07-05 keeps its 3 days after it; 07-01 is
    # before the (shifted) 07-05 and moves to the day after it
    assert new == [date(2025, 3, 31), date(2025, 4, 1), date(2025, 4, 4), date(2025, 4, 5)]
    assert moved == [1, 3]
    assert dates_forward([date(2024, 1, 1), date(2024, 1, 1)]) == (
        [date(2024, 1, 1), date(2024, 1, 1)],
        [],
    )
    assert parse_anchor("March-15-2024", "f", "x") == date(2024, 3, 15)
    with pytest.raises(InputError, match=r"unrecognised time anchor '15/03/2024'.*field x"):
        parse_anchor("15/03/2024", "f", "x")


def test_chat_numbers() -> None:
    assert parse_chat_numbers("1-3,8,2") == [1, 2, 3, 8]
    assert parse_chat_numbers("") == []
    for bad in ("a", "3-1", "0"):
        with pytest.raises(InputError, match="chats"):
            parse_chat_numbers(bad)


def test_a_100k_chat_becomes_one_locomo_sample() -> None:
    conversion = convert_beam(FIXTURE, ["100K"])
    first, second = conversion.samples
    assert first["sample_id"] == "beam-100K-1" and second["sample_id"] == "beam-100K-2"
    talk = first["conversation"]
    assert (talk["speaker_a"], talk["speaker_b"]) == ("User", "Assistant")
    assert [talk[f"session_{n}_date_time"] for n in (1, 2, 3)] == [
        "9:00 am on 2 March, 2024",
        "9:00 am on 20 March, 2024",
        "9:00 am on 11 April, 2024",
    ]
    opening = talk["session_1"][0]
    assert opening == {
        "speaker": "User",
        "dia_id": "D1:1",
        "text": "I'm starting a weather station on a Raspberry Pi 4 and want to log the "
        "temperature every 10 minutes, where should I begin?",
        "role": "user",
        "beam_id": 0,
    }
    turns = [t for n in (1, 2, 3) for t in talk[f"session_{n}"]]
    assert [t["beam_id"] for t in turns] == list(range(26))
    assert [t["role"] for t in turns[20:24]] == ["user", "assistant", "user", "assistant"]
    assert not any("->->" in t["text"] for t in turns)
    entry = conversion.manifest["conversations"][0]
    assert entry["messages"] == 26 and entry["sessions"] == 3 and entry["probes"] == 10
    assert entry["markers_removed"] == {"end": 13, "inside": 0}
    assert [r["message"] for r in entry["runaway_messages"]] == [13, 15]
    assert entry["redated_sessions"] == []


def test_probes_keep_ability_rubric_reference_and_mapped_evidence() -> None:
    sample = convert_beam(FIXTURE, ["100K"], [1]).samples[0]
    assert [q["ability"] for q in sample["qa"]] == list(ABILITIES)
    contradiction = _qa(sample, "contradiction_resolution")
    assert contradiction["evidence"] == ["D1:5", "D2:1"]
    assert contradiction["evidence_parts"] == {
        "first_statement": ["D1:5"],
        "second_statement": ["D2:1"],
    }
    assert contradiction["answer"].startswith("You said you had never soldered")
    assert contradiction["reference_field"] == "ideal_answer"
    assert contradiction["category"] == 3 and len(contradiction["rubric"]) == 4
    ordering = _qa(sample, "event_ordering")
    assert ordering["evidence"] == ["D1:1", "D1:2", "D2:7", "D3:1"]
    assert ordering["evidence_parts"] == [["D1:1", "D1:2"], ["D2:7"], "D3:1"]
    assert ordering["ordering_items"] == ["Temperature logging", "Web dashboard", "Dashboard live"]
    abstention = _qa(sample, "abstention")
    assert (abstention["evidence"], abstention["category"]) == ([], 5)
    assert abstention["abstention_type"] == "unavailable_information"
    assert abstention["evidence_note"] == "the probe names no source messages"
    assert abstention["reference_field"] == "ideal_response"
    summary = _qa(sample, "summarization")
    assert summary["evidence"] == [] and summary["reference_field"] == "ideal_summary"
    instruction = _qa(sample, "instruction_following")
    assert instruction["reference_field"] == "expected_compliance"
    assert instruction["beam_fields"]["instruction_being_tested"].startswith("Always show code")
    assert _qa(sample, "temporal_reasoning")["category"] == 2
    assert _qa(sample, "multi_session_reasoning")["category"] == 1
    assert _qa(sample, "knowledge_update")["evidence"] == ["D1:7", "D2:3"]


def test_a_10m_chat_joins_its_plans_and_redates_a_backwards_session(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"chat file absent .*10M/2/plan-1/chat\.json"):
        convert_beam(FIXTURE, ["10M"])
    conversion = convert_beam(FIXTURE, ["10M"], skip_incomplete=True)
    (sample,) = conversion.samples
    talk = sample["conversation"]
    assert [talk[f"session_{n}_date_time"] for n in (1, 2, 3)] == [
        "9:00 am on 31 March, 2025",
        "9:00 am on 1 April, 2025",  # was 2 July 2024, before the session before it
        "9:00 am on 20 May, 2025",  # 20 August 2024, moved by the same 273 days
    ]
    # plan-1's ids restart at 0; the probes count ids across plans (4 = plan-1's first)
    assert [t["beam_id"] for t in talk["session_3"]] == [4, 5]
    ordering = _qa(sample, "event_ordering")
    assert ordering["evidence"] == ["D1:1", "D3:1"]
    update = _qa(sample, "knowledge_update")
    assert update["evidence_parts"] == {"original_info": ["D1:1"], "updated_info": ["D3:1", "D3:2"]}
    (redated,) = conversion.manifest["conversations"][0]["redated_sessions"]
    assert (redated["session"], redated["date"], redated["new_date"]) == (
        "session_2",
        "2024-07-02",
        "2025-04-01",
    )
    assert redated["source"].endswith("plan-0/chat.json batch 2")
    assert conversion.manifest["skipped"] == [
        {"id": "beam-10M-2", "absent": [str(FIXTURE / "10M" / "2" / "plan-1" / "chat.json")]}
    ]
    assert conversion.manifest["totals"]["redated_sessions"] == 1
    out = tmp_path / "beam-10m.json"
    write_beam(conversion, out)
    (conversation,) = read_conversations(out)  # qemem's ingest takes the re-dated sessions
    assert [s.date_time.date() for s in conversation.sessions] == [
        date(2025, 3, 31),
        date(2025, 4, 1),
        date(2025, 5, 20),
    ]


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "beam"
    shutil.copytree(FIXTURE / "100K" / "2", root / "chats" / "100K" / "2")
    return root


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text("utf-8"))
    change(data)
    path.write_text(json.dumps(data), "utf-8")


@pytest.mark.parametrize(
    ("target", "change", "message"),
    [
        ("chat.json", lambda d: d[0]["turns"][0][1].update(role="system"), r"role must be user"),
        ("chat.json", lambda d: d[0]["turns"][0][1].update(id=7), r"ids must run 0, 1, 2"),
        ("chat.json", lambda d: d[1]["turns"][0][0].pop("time_anchor"), r"time_anchor"),
        ("chat.json", lambda d: d[0]["turns"][0][0].update(content="->-> 1,1"), r"empty once"),
        ("probes", lambda d: d["information_extraction"][0].pop("answer"), r"no reference answer"),
        (
            "probes",
            lambda d: d["information_extraction"][0].update(source_chat_ids=[9]),
            r"9 is not",
        ),
        ("probes", lambda d: d["information_extraction"][0].update(source_chat_ids="0"), r"ids"),
        ("probes", lambda d: d["information_extraction"][0].update(rubric=[]), r"'rubric'"),
        ("probes", lambda d: d.update(telepathy=[]), r"unknown abilities telepathy"),
    ],
)
def test_what_cannot_be_mapped_is_refused_with_file_and_field(
    tmp_path: Path, target: str, change: Any, message: str
) -> None:
    root = _copy(tmp_path)
    chat = root / "chats" / "100K" / "2"
    path = chat / "chat.json" if target == "chat.json" else chat / "probing_questions"
    path = path if target == "chat.json" else path / "probing_questions.json"
    _edit(path, change)
    with pytest.raises(InputError, match=message) as caught:
        convert_beam(root, ["100K"])
    assert f"file {path}" in str(caught.value) and "field" in str(caught.value)


def test_missing_folders_and_sizes_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no 500K folder"):
        convert_beam(FIXTURE, ["500K"])
    with pytest.raises(InputError, match=r"unknown size '2M'"):
        convert_beam(FIXTURE, ["2M"])
    with pytest.raises(InputError, match=r"no chat 3 \(it has 1-2\)"):
        convert_beam(FIXTURE, ["100K"], [3])
    root = _copy(tmp_path)
    (root / "chats" / "100K" / "2" / "probing_questions" / "probing_questions.json").unlink()
    with pytest.raises(InputError, match=r"no probing questions"):
        convert_beam(root, ["100K"])


def test_cli_writes_the_file_and_its_manifest(tmp_path: Path) -> None:
    out = tmp_path / "beam.json"
    result = CliRunner().invoke(
        app, ["data", "beam", "--from", str(FIXTURE), "--out", str(out), "--chats", "1", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["conversations"] == 1 and summary["probes"] == 10
    assert summary["probes_without_evidence"] == 2 and summary["skipped"] == []
    manifest = json.loads(manifest_path(out).read_text("utf-8"))
    assert manifest["output_sha256"] and "->->" in manifest["rules"]["markers"]
    questions = locomo_questions(load_locomo(out))
    assert len(questions) == 10 and sum(not q.evidence for q in questions) == 2
    refused = CliRunner().invoke(
        app, ["data", "beam", "--from", str(FIXTURE), "--out", str(out), "--sizes", "10M"]
    )
    assert isinstance(refused.exception, InputError)
    assert (
        "10M/2/plan-1/chat.json" in str(refused.exception) and not out.with_suffix(".part").exists()
    )


def test_the_download_scripts_layout_is_read(tmp_path: Path) -> None:
    """BEAM's download script writes test_chats/<size>/<conversation id>/ (no chats/ folder);
    numbered chats come first in number order, others by name."""
    for name in ("10", "2", "seed-a"):
        shutil.copytree(FIXTURE / "100K" / "2", tmp_path / "test_chats" / "100K" / name)
    samples = convert_beam(tmp_path / "test_chats", ["100K"]).samples
    assert [s["sample_id"] for s in samples] == ["beam-100K-2", "beam-100K-10", "beam-100K-seed-a"]
    assert [
        s["sample_id"] for s in convert_beam(tmp_path / "test_chats", ["100K"], [10]).samples
    ] == ["beam-100K-10"]
