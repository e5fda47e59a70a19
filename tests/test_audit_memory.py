"""The memory audit (issue 23, item 6): the stratified, seeded sample of facts and episodes,
the blind judge that sees only the cited turns, population weights, the intervals, the census
of pronoun and dated facts, near-duplicate pairs, and the record in a run folder and its page."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from audit_support import make_run
from qemem.answer.memory_audit import (
    AuditedItem,
    DuplicatePair,
    duplicate_pairs,
    fact_subject,
    has_date,
    has_pronoun,
    label_shares,
    period,
    unresolved_pronoun,
)
from qemem.answer.sampling import weighted_share
from qemem.answer.wire import audit_from_json, audit_to_json
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import InputError, LLMError, NotFoundError
from qemem.eval.audit.markdown import audit_markdown, load_audits
from qemem.eval.audit.memory import MEMORY_FILE, write_memory_audit
from qemem.eval.stats import wilson_interval
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.models import Episode, SemanticFact, search_text
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM
from qemem.view import report_html

SCOPE = Scope("demo-1")
EARLY = [
    "Priya signed up for a pottery class.",
    "She loves the cat Biscuit.",
    "Priya went to Kyoto in May 2024.",
    "Priya makes mugs.",
    "Priya makes mugs.",
    "Priya owns a kiln.",
    "Priya dislikes spreadsheets.",
    "Priya reads novels on the train.",
    "Priya adopted Biscuit from a shelter.",
    "Priya studies Japanese.",
]
WORDS = [f"w{n}" for n in range(400)]


def _late_facts() -> list[str]:
    rng = np.random.default_rng(7)
    return [f"Tomas {' '.join(rng.choice(WORDS, 6, replace=False))}." for _ in range(100)]


def _store(sample_path: Path, *, late: bool = True) -> SQLiteStore:
    """The sample conversation with two early episodes and one late one, 10 early facts
    (citing E1) and, with ``late``, 100 late facts (citing E3)."""
    store = SQLiteStore(":memory:")
    embedder = HashEmbedder()
    Memory(store, embedder).ingest(sample_path)
    turns = {t.id: t for t in store.turns(SCOPE)}
    shapes = [
        ("E1", 1, "Pottery", "Priya signed up for pottery.", ("D1:3", "D1:4", "D1:5")),
        ("E2", 2, "Notice", "Priya handed in her notice.", ("D2:1", "D2:2")),
        ("E3", 5, "Race", "Tomas ran the race.", ("D5:1", "D5:2")),
    ]
    episodes = [
        Episode(eid, "demo-1", session, title, content, turns[ids[0]].timestamp, ids)
        for eid, session, title, content, ids in shapes
    ]
    store.add_episodes(
        SCOPE, episodes, embedder.embed([search_text(e) for e in episodes]), embedder.id
    )
    facts = [SemanticFact(f"S{n}", "demo-1", text, 1, ("E1",)) for n, text in enumerate(EARLY)]
    if late:
        facts += [
            SemanticFact(f"L{n}", "demo-1", text, 5, ("E3",))
            for n, text in enumerate(_late_facts())
        ]
    store.put_facts(SCOPE, facts, embedder.embed([search_text(f) for f in facts]), embedder.id)
    return store


class Recorder:
    """An offline judge that keeps every request it answers."""

    def __init__(self, fail: str | None = None) -> None:
        self.requests: list[LLMRequest] = []
        self.fail = fail

    def __call__(self, request: LLMRequest) -> str | dict[str, str]:
        self.requests.append(request)
        if self.fail is not None and request.inputs["statement"] == self.fail:
            return "no JSON here"
        return {"label": "Partially", "reason": "the class is named, its day is not"}


@pytest.fixture
def memory(sample_path: Path) -> Iterator[Memory]:
    with Memory(_store(sample_path), HashEmbedder(), llm="fake") as mem:
        yield mem


# ---------------------------------------------------------------- pure functions
def test_pronouns_and_dates_are_found_by_the_lexicon() -> None:
    assert has_pronoun("Evan's health worries his wife") and has_pronoun("They moved")
    assert not has_pronoun("Evan paints as a hobby") and not has_pronoun("It rained in Hilo")
    for dated in ("Evan went to Japan in May 2023", "on Friday", "Sam cooked yesterday",
                  "born 1990", "due 2024-05-08", "Sam moves next month"):  # fmt: skip
        assert has_date(dated), dated
    for plain in ("Evan may go hiking", "Sam likes tea", "Sam has 3 cats"):
        assert not has_date(plain), plain


def test_an_unresolved_pronoun_stands_for_no_one_named_before_it() -> None:
    dangling = [
        "His health improved",
        "She moved to Paris with Evan",
        "The doctor told her to rest",
        "Sam thinks you should rest",
        "I like tea",
    ]
    resolved = [
        "Jon lost his job",
        "The LGBTQ group gave Caroline the courage to embrace herself",
        "Evan's son hurt his ankle",
        "Evan paints",
    ]
    assert [unresolved_pronoun(t) for t in dangling + resolved] == [True] * 5 + [False] * 4


def test_period_is_the_third_of_the_conversation() -> None:
    sessions = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert [period(s, sessions) for s in (1, 3, 4, 6, 7, 9)] == [
        "early", "early", "middle", "middle", "late", "late"
    ]  # fmt: skip
    assert period(4, [4]) == "early"


def test_the_subject_is_the_first_speaker_named_else_the_first_capitalised_word() -> None:
    names = ["Sam", "Evan"]
    assert fact_subject("Evan's son and Sam went hiking", names) == "Evan"
    assert fact_subject("The son of Sam hurt his ankle", names) == "Sam"
    assert fact_subject("Samantha plays chess", names) == "Samantha"  # whole words only
    assert fact_subject("the dog is old", names) == ""


def test_duplicate_pairs_need_a_close_cosine_and_the_same_subject() -> None:
    ids = ["S9", "S2", "S3", "S4"]
    vectors = [[1.0, 0.0], [0.95, 0.3], [2.0, 0.0], [0.0, 1.0]]  # S3 unnormalised
    pairs = duplicate_pairs(ids, vectors, ["Evan", "Evan", "Sam", "Evan"], threshold=0.9)
    assert pairs == [DuplicatePair("S2", "S9", pytest.approx(0.9536, abs=1e-4), "Evan")]
    assert duplicate_pairs(ids, vectors, ["Evan", "Evan", "Evan", "Evan"], threshold=0.99) == [
        DuplicatePair("S3", "S9", 1.0, "Evan")
    ]
    assert duplicate_pairs(ids, vectors, ["", "", "", ""], threshold=0.9) == []
    assert duplicate_pairs(ids, vectors, ["Evan", "Evan", "Sam", "Evan"]) == []  # 0.96
    assert duplicate_pairs([], np.zeros((0, 4)), []) == []


def test_weighted_shares_and_their_intervals_on_hand_made_cases() -> None:
    # a stratum of 100 sampled 2 (weight 50) all 1, a census of 8 (weight 1) all 0
    got = weighted_share([1, 1, *[0] * 8], [50, 50, *[1] * 8], ["a", "a", *["b"] * 8])
    assert got["share"] == round(100 / 108, 4) and got["ci95"] == [got["share"]] * 2
    # one stratum, 100 of 400: the bootstrap interval is the normal one, close to Wilson's
    got = weighted_share([1] * 100 + [0] * 300, [1] * 400, ["a"] * 400, seed=1)
    half = 1.96 * (0.25 * 0.75 / 400) ** 0.5
    assert got["share"] == 0.25
    assert got["ci95"] == pytest.approx([0.25 - half, 0.25 + half], abs=0.006)
    assert got["ci95"] == pytest.approx(list(wilson_interval(100, 400)), abs=0.008)
    assert weighted_share([], [], [])["share"] is None


@pytest.mark.slow
def test_label_shares_weigh_each_record_by_its_stratum() -> None:
    def item(label: str, stratum: str, weight: float, space: str = "fact") -> AuditedItem:
        return AuditedItem(space, "x", "t", stratum, weight, ("D1:1",), label, "")  # type: ignore[arg-type]

    items = [
        item("supported", "fact|late", 50),
        item("unsupported", "fact|late", 50),
        *(item("contradicted", "fact|early", 1) for _ in range(4)),
        item("supported", "episode|early", 3, "episode"),
        AuditedItem("fact", "y", "t", "fact|early", 1, (), None, "unparsed"),
    ]
    shares = label_shares(items, "fact", seed=0)
    assert shares["supported"].share == round(50 / 104, 4)
    assert shares["contradicted"].share == round(4 / 104, 4)
    assert shares["supported_or_partial"].share == round(50 / 104, 4)
    assert shares["supported"].n == 6  # the unparsed record is left out
    assert label_shares(items, "episode", seed=0)["supported"].share == 1.0


# ---------------------------------------------------------------- the audit
@pytest.mark.slow
def test_the_sample_is_stratified_and_weighted_by_population(memory: Memory) -> None:
    audit = memory.audit_memory("demo-1", sample=5, seed=3)
    assert audit.population == {
        "episode|early": 2, "episode|late": 1, "fact|early": 10, "fact|late": 100
    }  # fmt: skip
    weights = {i.stratum: i.weight for i in audit.items}
    assert weights == {
        "episode|early": 2.0,
        "episode|late": 1.0,
        "fact|early": 10.0,
        "fact|late": 50.0,
    }
    for stratum, size in audit.population.items():
        assert sum(i.weight for i in audit.items if i.stratum == stratum) == size
    assert [i.id for i in memory.audit_memory("demo-1", sample=5, seed=3).items] == [
        i.id for i in audit.items
    ]
    others = {
        tuple(i.id for i in memory.audit_memory("demo-1", sample=5, seed=s).items)
        for s in range(4, 8)
    }
    assert len(others | {tuple(i.id for i in audit.items)}) > 1
    assert audit_from_json(audit_to_json(audit)) == audit


@pytest.mark.slow
def test_the_judge_sees_only_the_cited_turns_and_nothing_of_the_memory(
    sample_path: Path,
) -> None:
    recorder = Recorder()
    with Memory(_store(sample_path, late=False), HashEmbedder()) as mem:
        audit = mem.audit_memory("demo-1", sample=100, judge=LLMClient(OfflineLLM(recorder)))
    cited = {"E1": ["D1:3", "D1:4", "D1:5"], "E2": ["D2:1", "D2:2"], "E3": ["D5:1", "D5:2"]}
    assert len(audit.items) == 13 and len(recorder.requests) == 13
    by_text = {r.inputs["statement"]: r for r in recorder.requests}
    for item in audit.items:
        request = by_text[item.text]
        shown = [p["id"] for p in request.inputs["passages"]]
        assert shown == list(item.turns) == cited[item.id if item.space == "episode" else "E1"]
        assert set(request.inputs) == {"statement", "passages"}
        prompt = request.system + "\n".join(m.content for m in request.messages)
        assert not re.search(r"\b[SEL]\d+\b", prompt), prompt  # no record id
        if item.space == "fact":  # not the episode it came from
            assert "Pottery" not in prompt and "signed up for pottery" not in prompt
        assert item.label == "partially supported"
    assert audit.facts["partially supported"].share == 1.0


@pytest.mark.slow
def test_unresolved_provenance_and_unparsed_verdicts(sample_path: Path) -> None:
    store = _store(sample_path, late=False)
    store.put_facts(
        SCOPE,
        [SemanticFact("S99", "demo-1", "Tomas owns a boat.", 2, ())],
        HashEmbedder().embed(["Tomas owns a boat."]),
        HashEmbedder().id,
    )
    recorder = Recorder(fail=EARLY[0])
    with Memory(store, HashEmbedder()) as mem:
        audit = mem.audit_memory("demo-1", sample=100, judge=LLMClient(OfflineLLM(recorder)))
    items = {i.id: i for i in audit.items}
    assert items["S99"].label == "unsupported" and items["S99"].turns == ()
    statements = [r.inputs["statement"] for r in recorder.requests]
    assert audit.unresolved == 1 and "Tomas owns a boat." not in statements  # no call
    assert len(statements) == 14 and statements.count(EARLY[0]) == 2  # 13 and a repair
    assert items["S0"].label is None and len(audit.degradations) == 1
    assert audit.facts["unsupported"].n == 10  # 11 facts, one unparsed


@pytest.mark.slow
def test_a_fact_of_several_episodes_shows_all_their_turns_in_conversation_order(
    sample_path: Path,
) -> None:
    store = _store(sample_path, late=False)
    fact = SemanticFact("S50", "demo-1", "Priya left Northgate for pottery.", 2, ("E2", "E1"))
    store.put_facts(SCOPE, [fact], HashEmbedder().embed([fact.content]), HashEmbedder().id)
    recorder = Recorder()
    with Memory(store, HashEmbedder()) as mem:
        audit = mem.audit_memory("demo-1", sample=100, judge=LLMClient(OfflineLLM(recorder)))
    [item] = [i for i in audit.items if i.id == "S50"]
    assert item.turns == ("D1:3", "D1:4", "D1:5", "D2:1", "D2:2")
    [request] = [r for r in recorder.requests if r.inputs["statement"] == fact.content]
    assert [p["id"] for p in request.inputs["passages"]] == list(item.turns)
    assert request.inputs["passages"][0]["date"].startswith("Thursday, 14 March 2024")


@pytest.mark.slow
def test_the_census_counts_pronouns_dates_and_duplicates(memory: Memory) -> None:
    census = memory.audit_memory("demo-1", sample=1).census
    assert (census.facts, census.episodes) == (110, 3)
    assert census.pronoun == census.unresolved == ("S1",) and census.dated == ("S2",)
    assert census.pronoun_share == round(1 / 110, 4)
    assert [(d.first, d.second, d.subject) for d in census.duplicates] == [("S3", "S4", "Priya")]
    assert census.superseded == ()
    [old] = memory.facts("demo-1", ["S2"])
    memory.correct_fact("demo-1", "S2", "Priya made a mug on 14 March 2024.")
    census = memory.audit_memory("demo-1", sample=1).census
    assert census.superseded == ("S2",) and census.texts["S2"] == old.content


def test_bad_audits_are_refused(memory: Memory, sample_path: Path) -> None:
    with pytest.raises(InputError, match="sample"):
        memory.audit_memory("demo-1", sample=0)
    with pytest.raises(NotFoundError):
        memory.audit_memory("nope")
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm="fake") as bare:
        bare.ingest(sample_path)
        empty = bare.audit_memory("demo-1")
        assert (empty.population, empty.items, empty.census.facts) == ({}, [], 0)
        assert empty.facts["supported"].share is None and empty.trace.calls == []
    with Memory(_store(sample_path, late=False), HashEmbedder()) as without:
        with pytest.raises(LLMError):
            without.audit_memory("demo-1")
        with pytest.raises(LLMError, match="names no LLM"):
            without.audit_memory("demo-1", judge="")
        assert without.audit_memory("demo-1", sample=2, judge="fake").judge == "fake:fake"


# ---------------------------------------------------------------- the run folder and its page
@pytest.mark.slow
def test_a_run_folder_keeps_each_conversation_and_its_page_shows_them(
    memory: Memory, tmp_path: Path
) -> None:
    data = audit_to_json(memory.audit_memory("demo-1", sample=6))
    write_memory_audit(tmp_path, data)
    write_memory_audit(tmp_path, data | {"conversation": "other"})
    record = write_memory_audit(tmp_path, data | {"seed": 9})  # replaces demo-1
    assert sorted(record["conversations"]) == ["demo-1", "other"]
    assert record["conversations"]["demo-1"]["seed"] == 9
    assert "trace" not in record["conversations"]["demo-1"]
    assert record["conversations"]["demo-1"]["calls"] == 6
    assert json.loads((tmp_path / MEMORY_FILE).read_text("utf-8")) == record
    markdown = audit_markdown(tmp_path)
    assert "## Memory audit" in markdown and "near-duplicate pairs 1" in markdown
    assert "| facts | " in markdown and "Conversation other" in markdown
    html = report_html([], {"mode": "full"}, audits=load_audits(tmp_path))
    assert 'id="audit-memory"' in html and "S3 · S4" in html and "Priya makes mugs." in html


@pytest.mark.slow
def test_the_cli_audits_a_store_into_a_run_folder(sample_path: Path, tmp_path: Path) -> None:
    url = str(tmp_path / "memory.db")
    with Memory.open(url, embedder=HashEmbedder(), llm="fake") as mem:
        mem.ingest(sample_path)
        mem.build("demo-1")
    env = {"QEMEM_EMBEDDER": "hash", "QEMEM_STORE": None, "COLUMNS": "200"}
    args = ["eval", "audit", "memory", "-c", "demo-1", "--judge", "fake", "--sample", "4"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path), "--json"], env=env)
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output.strip().splitlines()[-1])
    assert printed["conversation"] == "demo-1" and "items" not in printed
    saved = json.loads((tmp_path / MEMORY_FILE).read_text("utf-8"))["conversations"]["demo-1"]
    assert len(saved["items"]) == 4 and (tmp_path / "llm-cache.db").exists()
    again = CliRunner().invoke(app, [*args, "--store", url], env=env)
    assert again.exit_code == 0 and "4 of 28 records judged" in again.output
    missing = CliRunner().invoke(app, args, env=env)
    assert isinstance(missing.exception, InputError) and "--store" in str(missing.exception)


@pytest.mark.slow
def test_auditing_the_memory_a_run_built_adds_a_section_to_its_report_and_page(
    sample_path: Path, tmp_path: Path
) -> None:
    run = make_run(sample_path, tmp_path / "run")
    [conversation] = json.loads((run / "build.json").read_text("utf-8"))
    args = ["eval", "audit", "memory", "-c", conversation, "--judge", "fake", "--out", str(run)]
    result = CliRunner().invoke(app, [*args, "--sample", "5"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "## Memory audit" in (run / "report.md").read_text("utf-8")
    page = (run / "report.html").read_text("utf-8")
    assert 'id="audit-memory"' in page and f"<h3>{conversation}</h3>" in page
