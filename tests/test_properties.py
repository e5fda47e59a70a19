"""Property-based tests (hypothesis): hostile input only ever raises ``QememError``, and a
rejected ingest leaves the store exactly as it was.

Deterministic (``derandomize``) and bounded (150 examples per property) so the suite stays
quick; ``QEMEM_FUZZ_EXAMPLES=N`` runs N random examples per property instead (a longer fuzz run).
"""

from __future__ import annotations

import json
import os
import re
import string
import tempfile
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qemem.answer.extract import extract_final_answer
from qemem.embed import HashEmbedder, open_embedder
from qemem.errors import InputError, QememError, StructuredOutputError
from qemem.evidence.quotes import verify_quote
from qemem.evidence.times import resolve_times
from qemem.ingest.reader import read_conversations
from qemem.lexicon import FIRST_YEAR, LAST_YEAR, parse_datetime
from qemem.llm import LLMClient, LLMRequest, Message, extract_json, make_provider
from qemem.memory import Memory
from qemem.store import SQLiteStore
from qemem.testing import OfflineLLM

EXAMPLES = int(os.environ.get("QEMEM_FUZZ_EXAMPLES", "0"))
QUICK = settings(
    derandomize=not EXAMPLES,
    max_examples=EXAMPLES or 150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
timestamps = st.one_of(
    st.sampled_from(
        [
            "2024-03-01T10:00:00",
            "2024-03-01T10:00+05:30",
            "2024-03-01T10:00Z",
            "1:56 pm on 8 May, 2023",
            "13:99 pm on 31 February, 2023",
            "2024-02-30",
            "",
            " ",
        ]
    ),
    st.text(max_size=25),
)
words = st.text(
    alphabet=string.ascii_letters + string.digits + " []{}\"'\\:/.-\u00e9\u200b\n", max_size=30
)


def field(name: str) -> st.SearchStrategy[Any]:
    plausible = {
        "timestamp": timestamps,
        "conversation_id": st.sampled_from(["c1", "c2", "base"]),
        "session_id": st.sampled_from(["s1", "s2", "s3"]),
        "speaker": st.sampled_from(["Ann", "Bob", "[bold]X[/]"]),
    }.get(name, words)
    return st.one_of(plausible, plausible, scalars, json_values)


def valid_record(n: int, conv: str, session: str, stamp: str) -> dict[str, Any]:
    return {
        "conversation_id": conv,
        "session_id": session,
        "timestamp": stamp,
        "speaker": "Ann" if n % 2 else "Bob",
        "text": f"message {n} [/] about kilns",
    }


@st.composite
def mutated_generic(draw: st.DrawFn) -> list[Any]:
    """A valid file of a few records with one field replaced by anything, or removed."""
    records: list[Any] = [
        valid_record(
            n,
            draw(st.sampled_from(["c1", "c2", "base"])),
            draw(st.sampled_from(["s1", "s2"])),
            draw(timestamps),
        )
        for n in range(draw(st.integers(1, 4)))
    ]
    target = records[draw(st.integers(0, len(records) - 1))]
    name = draw(st.sampled_from([*target, "id", "image_caption", "namespace"]))
    if draw(st.booleans()):
        target.pop(name, None)
    else:
        target[name] = draw(field(name))
    return records


def valid_sample() -> dict[str, Any]:
    def turns(session: int) -> list[dict[str, Any]]:
        return [
            {"speaker": "Ann", "text": "hello [b]", "dia_id": f"D{session}:1"},
            {"speaker": "Bob", "text": "hi", "dia_id": f"D{session}:2", "blip_caption": "a cat"},
        ]

    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1": turns(1),
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": turns(2),
            "session_2_date_time": "2:00 pm on 9 May, 2023",
        },
        "qa": [{"question": "Who?", "answer": "Ann", "category": 1, "evidence": ["D1:1"]}],
    }


LOCOMO_PATHS = [
    ("sample_id",),
    ("conversation",),
    ("conversation", "speaker_a"),
    ("conversation", "session_1"),
    ("conversation", "session_2_date_time"),
    ("conversation", "session_1", 0),
    ("conversation", "session_1", 0, "speaker"),
    ("conversation", "session_1", 1, "text"),
    ("conversation", "session_2", 1, "dia_id"),
    ("conversation", "session_2", 1, "blip_caption"),
    ("qa",),
]


@st.composite
def mutated_locomo(draw: st.DrawFn) -> Any:
    """A valid LoCoMo file with one value replaced by anything (or a date, id, speaker...)."""
    sample = valid_sample()
    path = draw(st.sampled_from(LOCOMO_PATHS))
    parent: Any = sample
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = draw(st.one_of(field(str(path[-1])), json_values))
    return [sample] if draw(st.booleans()) else sample


generic_files = st.one_of(mutated_generic(), mutated_generic(), st.lists(json_values, max_size=4))
locomo_files = st.one_of(mutated_locomo(), mutated_locomo(), json_values)

BASE = [
    {
        "conversation_id": "base",
        "session_id": "s1",
        "timestamp": "2024-03-01T09:00:00",
        "speaker": "Ann",
        "text": f"base message {n}",
    }
    for n in range(3)
]


def snapshot(memory: Memory) -> list[Any]:
    """Everything a reader can see in the store."""
    return [
        (c, memory.turns(c.id), memory.episodes(c.id), memory.facts(c.id))
        for ns in ("default", "x", "")
        for c in memory.store.conversations(ns)
    ]


def write(directory: str, name: str, text: str) -> Path:
    path = Path(directory) / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
@QUICK
@given(records=generic_files, as_array=st.booleans())
def test_generic_ingest_rejects_cleanly_or_is_idempotent(
    records: list[Any], as_array: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(SQLiteStore(":memory:"), HashEmbedder(64))
        memory.ingest(write(tmp, "base.jsonl", "".join(json.dumps(r) + "\n" for r in BASE)))
        before = snapshot(memory)
        body = (
            json.dumps(records)
            if as_array
            else "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        )
        path = write(tmp, "in.json" if as_array else "in.jsonl", body)
        try:
            memory.ingest(path, fmt="jsonl")
        except QememError:
            assert snapshot(memory) == before
        else:
            assert memory.ingest(path, fmt="jsonl").turns_added == 0
        memory.close()


@pytest.mark.slow
@QUICK
@given(samples=locomo_files)
def test_locomo_ingest_rejects_cleanly(samples: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(SQLiteStore(":memory:"), HashEmbedder(64))
        memory.ingest(write(tmp, "base.jsonl", "".join(json.dumps(r) + "\n" for r in BASE)))
        before = snapshot(memory)
        path = write(tmp, "locomo.json", json.dumps(samples))
        try:
            read_conversations(path, "locomo")
            memory.ingest(path, fmt="locomo")
        except QememError:
            assert snapshot(memory) == before
        memory.close()


@pytest.mark.slow
@QUICK
@given(text=st.one_of(timestamps, st.from_regex(r"\d{1,2}:\d{2} [ap]m on \d{1,2} \w+, \d{1,6}")))
def test_parse_datetime_keeps_wall_time_or_raises_input_error(text: str) -> None:
    try:
        parsed = parse_datetime(text)
    except QememError:
        return
    again = parse_datetime(parsed.isoformat())
    assert again.isoformat() == parsed.isoformat()
    if text[:1].isdigit() and "T" in text:  # ISO: the local wall time is what was written
        assert parsed.isoformat().startswith(text[:10])


offsets = st.builds(
    timezone,
    st.timedeltas(
        min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)
    ).map(lambda d: timedelta(minutes=round(d.total_seconds() / 60))),
)


@QUICK
@given(
    moment=st.datetimes(
        min_value=datetime(FIRST_YEAR, 1, 1),
        max_value=datetime(LAST_YEAR, 12, 31, 23, 59, 59),
        timezones=st.one_of(st.none(), offsets),
    )
)
def test_parse_datetime_round_trips_local_time_and_offset(moment: datetime) -> None:
    parsed = parse_datetime(moment.isoformat())
    assert parsed.replace(tzinfo=None) == moment.replace(tzinfo=None)  # the wall time
    assert parsed.utcoffset() == moment.utcoffset()
    assert parsed.date() == moment.date()  # the speaker's calendar date, not UTC's


@QUICK
@given(moment=st.datetimes(timezones=st.one_of(st.none(), offsets)))
def test_parse_datetime_refuses_dates_outside_the_plausible_years(moment: datetime) -> None:
    if FIRST_YEAR <= moment.year <= LAST_YEAR:
        assert parse_datetime(moment.isoformat()).year == moment.year
    else:
        with pytest.raises(InputError, match=f"years {FIRST_YEAR} to {LAST_YEAR}"):
            parse_datetime(moment.isoformat())


time_words = st.lists(
    st.sampled_from(
        "last next this week weeks month year day days ago in from now the before after "
        "yesterday tomorrow summer winter Monday Friday weekend two 3 99999999999 0 -1 "
        "a few couple of earlier later , .".split()
    ),
    max_size=8,
).map(" ".join)


@QUICK
@given(text=st.one_of(time_words, st.text(max_size=40)), anchor=st.dates())
def test_resolve_times_never_crashes(text: str, anchor: date) -> None:
    try:
        found = resolve_times(text, anchor)
    except QememError:
        return
    for t in found:
        assert t.start <= t.end and t.expression in text


@pytest.mark.slow
@QUICK
@given(
    source=st.lists(st.from_regex(r"[A-Za-z]{2,9}", fullmatch=True), min_size=4, max_size=30),
    data=st.data(),
)
def test_verbatim_spans_verify(source: list[str], data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(source) - 3))
    end = data.draw(st.integers(start + 3, len(source)))
    check = verify_quote(" ".join(source[start:end]), " ".join(source))
    assert check.verified and 0.0 <= check.score <= 1.0


@QUICK
@given(quote=st.text(max_size=60), source=st.text(max_size=120))
def test_verify_quote_total(quote: str, source: str) -> None:
    check = verify_quote(quote, source)
    assert 0.0 <= check.score <= 1.0


@QUICK
@given(
    prose=st.text(max_size=60),
    answer=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ]{0,20}[A-Za-z0-9]", fullmatch=True),
)
def test_final_answer_extraction(prose: str, answer: str) -> None:
    text, found = extract_final_answer(prose)
    assert isinstance(text, str) and isinstance(found, bool)
    clean = re.sub(r"(?i)final\s*answer", "", prose)
    extracted, found = extract_final_answer(f"{clean}\nFINAL ANSWER: {answer}")
    assert found and extracted == answer


@pytest.mark.slow
@QUICK
@given(
    value=st.one_of(
        st.lists(json_values, max_size=3),
        st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    ),
    before=st.text(alphabet=string.ascii_letters + " .,:\n", max_size=30),
    after=st.text(alphabet=string.ascii_letters + " .,:\n", max_size=30),
    fenced=st.booleans(),
)
def test_json_is_found_in_prose(value: Any, before: str, after: str, fenced: bool) -> None:
    body = json.dumps(value, ensure_ascii=False)
    text = f"{before}\n```json\n{body}\n```\n{after}" if fenced else f"{before} {body} {after}"
    assert extract_json(text) == value


class Reply(pydantic.BaseModel):
    answer: str
    sources: list[str]


@pytest.mark.slow
@QUICK
@given(
    first=st.one_of(st.text(max_size=80), json_values.map(json.dumps)), second=st.text(max_size=80)
)
def test_structured_output_fails_only_as_structured_output_error(first: str, second: str) -> None:
    replies = iter([first, second])
    client = LLMClient(OfflineLLM(handler=lambda request: next(replies)))
    request = LLMRequest("system", [Message("user", "question")], "prop")
    try:
        out = client.structured(request, Reply)
    except StructuredOutputError:
        return
    assert isinstance(out.value, Reply)


@QUICK
@given(
    spec=st.one_of(
        st.text(max_size=30),
        st.tuples(
            st.sampled_from(
                ["fake", "faulty", "cmd", "llamacpp", "openai-compat", "anthropic", "openai", "x"]
            ),
            st.text(max_size=20),
        ).map(":".join),
    )
)
def test_spec_parser_raises_only_config_errors(spec: str) -> None:
    try:
        provider = make_provider(spec)
    except QememError:
        return
    assert provider.name and provider.model is not None


@QUICK
@given(arg=st.one_of(st.text(max_size=8), st.integers(-(10**9), 10**9).map(str)))
def test_embedder_spec_raises_only_config_errors(arg: str) -> None:
    try:
        embedder = open_embedder(f"hash:{arg}")
    except QememError:
        return
    assert embedder.dim > 0 and embedder.embed(["a b"]).shape == (1, embedder.dim)
