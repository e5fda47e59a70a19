"""Issue 23, items 3 and 4, through whole builds with the offline LLM: a closing-only run
merges, pronoun facts are refused or rewritten, a paraphrase is stored once, the speakers'
known facts are marked and the messages before an episode are shown as context; every rule
is recorded in the report and ``BuildConfig.method()`` turns them all off."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from qemem.build import BuildConfig, BuildReport, build_memory
from qemem.build.facts import extract_facts, known_block
from qemem.embed import HashEmbedder
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.models import Episode, SemanticFact, Turn
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM

SAMPLE = Path("src/qemem/data/sample.json")
Handler = Callable[[LLMRequest], object]
TALK = [
    ("Priya", "I signed up for the eight-week pottery course at the canal studio."),
    ("Tomas", "Pottery suits you. I entered the Riverside Half Marathon in August."),
    ("Priya", "A half marathon! Is Pilot your training partner for the long runs?"),
    ("Tomas", "Pilot runs with me every Sunday along the forest trail near Porto."),
    ("Priya", "My cat Biscuit considers walking to her food bowl a workout."),
    ("Tomas", "I finished reading Born to Run, which convinced me to sign up."),
]
GOODBYE = [
    ("Priya", "Thanks, Tomas! Great to catch up. Enjoy your day!"),
    ("Tomas", "Bye Priya! Take care."),
]


def conversation(tmp_path: Path, lines: list[tuple[str, str]]) -> Path:
    session = [{"speaker": s, "dia_id": f"D1:{n}", "text": t} for n, (s, t) in enumerate(lines, 1)]
    data = [
        {
            "sample_id": "c1",
            "conversation": {
                "speaker_a": "Priya",
                "speaker_b": "Tomas",
                "session_1_date_time": "7:15 pm on 14 March, 2024",
                "session_1": session,
            },
            "qa": [],
        }
    ]
    path = tmp_path / "c1.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


def client(override: Handler | None = None) -> tuple[LLMClient, list[LLMRequest]]:
    """The offline LLM, answering with ``override`` when it returns something; requests kept."""
    default, seen, lock = OfflineLLM(), [], threading.Lock()

    def handler(request: LLMRequest) -> object:
        with lock:
            seen.append(request)
        answer = override(request) if override else None
        return default.complete(request) if answer is None else answer

    return LLMClient(OfflineLLM(handler)), seen  # type: ignore[arg-type]


def build(
    source: Path, config: BuildConfig, override: Handler | None = None
) -> tuple[SQLiteStore, Scope, BuildReport, list[LLMRequest]]:
    store = SQLiteStore(":memory:")
    Memory(store, HashEmbedder()).ingest(source)
    scope = Scope(json.loads(source.read_text("utf-8"))[0]["sample_id"])
    llm, seen = client(override)
    report = build_memory(store, scope, HashEmbedder(), llm, concurrency=1, config=config)
    return store, scope, report, seen


def prompts(seen: list[LLMRequest], stage: str) -> list[str]:
    return [r.messages[-1].content for r in seen if r.stage == stage]


def test_a_closing_only_run_merges_into_the_episode_it_closes(tmp_path: Path) -> None:
    source = conversation(tmp_path, TALK + GOODBYE)  # the offline LLM cuts [1-6], [7-8]
    store, scope, report, _ = build(source, BuildConfig())
    [episode] = store.episodes(scope)
    assert len(episode.turn_ids) == 8
    assert report.runs_merged == 1 and report.to_dict()["runs_merged"] == 1
    store, scope, report, _ = build(source, BuildConfig(merge_phatic=False))
    assert [len(e.turn_ids) for e in store.episodes(scope)] == [6, 2]
    assert report.runs_merged == 0


def test_a_greeting_only_run_merges_into_the_episode_it_opens(tmp_path: Path) -> None:
    hello = [("Priya", "Hey Tomas! Long time no see!"), ("Tomas", "Hey Priya! How are you?")]
    source = conversation(tmp_path, hello + TALK)

    def segment(request: LLMRequest) -> object:
        return (
            {"groups": [[1, 2], [3, 4, 5, 6, 7, 8]]} if request.stage == "build.segment" else None
        )

    store, scope, report, _ = build(source, BuildConfig(), segment)
    assert [len(e.turn_ids) for e in store.episodes(scope)] == [8]
    assert report.runs_merged == 1


def test_the_messages_before_an_episode_are_context_not_content(tmp_path: Path) -> None:
    source = conversation(tmp_path, TALK + TALK[::-1])  # two episodes of six
    store, scope, _, seen = build(source, BuildConfig(context_turns=2))
    first, second = prompts(seen, "build.episode")
    assert "(before)" not in first and "for context only" not in first
    assert "do not summarise them" in second
    assert f"(before) Tomas (14 March 2024, 19:15): {TALK[5][1]}" in second
    assert f"(before) Priya (14 March 2024, 19:15): {TALK[4][1]}" in second
    assert f"(before) Tomas (14 March 2024, 19:15): {TALK[3][1]}" not in second
    assert "(before) Tomas" in prompts(seen, "build.calibrate")[1]
    # the offline narrative quotes the episode's own turns only
    narrative = store.episodes(scope)[1].content
    assert TALK[5][1] in narrative and narrative.count(TALK[5][1]) == 1
    _, _, _, seen = build(source, BuildConfig(context_turns=0))
    assert not any("(before)" in p for p in prompts(seen, "build.episode"))


def test_pronoun_facts_are_refused_and_counted(sample_path: Path) -> None:
    def calibrate(request: LLMRequest) -> object:
        if request.stage == "build.calibrate":
            return {"facts": ["His ankle is healing.", "Priya has a cat named Biscuit."]}
        return None

    store, scope, report, _ = build(sample_path, BuildConfig(snapshot_lag=1), calibrate)
    contents = [f.content for f in store.facts(scope)]
    assert contents == ["Priya has a cat named Biscuit."]
    episodes = len(store.episodes(scope))
    assert report.facts_refused == episodes and report.facts_rewritten == 0
    assert report.to_dict()["facts_refused"] == episodes
    store, scope, report, _ = build(sample_path, BuildConfig(pronoun_rule="keep"), calibrate)
    assert "His ankle is healing." in [f.content for f in store.facts(scope)]
    assert report.facts_refused == 0


def test_a_pronoun_fact_of_a_single_known_speaker_is_rewritten() -> None:
    def calibrate(request: LLMRequest) -> object:
        if request.stage == "build.calibrate":
            return {"facts": ["Her kitten is called Miso.", "They moved to Leeds."]}
        return None

    when = datetime(2024, 7, 22)
    turns = [Turn("D4:4", "c1", 4, 3, "Priya", "I adopted a kitten! Her name is Miso.", when)]
    episode = Episode(
        "E5", "c1", 4, "Priya adopts a kitten", "Priya adopted Miso.", when, ("D4:4",)
    )
    known = [SemanticFact("S1", "c1", "Priya loves her cat Biscuit.", 1, ("E1",))]
    llm, _ = client(calibrate)
    out = extract_facts(llm, episode, turns, known, ["Priya", "Tomas"], BuildConfig())
    assert out.facts == ["Priya's kitten is called Miso."]
    assert (out.rewritten, out.refused, out.degraded) == (1, 1, None)


def test_a_rewritten_fact_keeps_its_supersession_claim() -> None:
    def calibrate(request: LLMRequest) -> object:
        if request.stage == "build.calibrate":
            claim = {"fact": "Her kitten is called Miso.", "supersedes": "S1", "turns": [1]}
            return {"facts": [claim, {"fact": "They moved.", "supersedes": "S1", "turns": [1]}]}
        return None

    when = datetime(2024, 7, 22)
    turns = [Turn("D4:4", "c1", 4, 3, "Priya", "Her name is Miso, not Mochi!", when)]
    episode = Episode("E5", "c1", 4, "Priya's kitten", "Priya named her kitten.", when, ("D4:4",))
    known = [SemanticFact("S1", "c1", "Priya's kitten is called Mochi; she loves her.", 1, ("E1",))]
    llm, _ = client(calibrate)
    out = extract_facts(llm, episode, turns, known, ["Priya", "Tomas"], BuildConfig())
    assert out.facts == ["Priya's kitten is called Miso."]
    assert out.claims == {"Priya's kitten is called Miso.": ("S1", ("D4:4",))}


def test_a_paraphrase_is_stored_once(sample_path: Path) -> None:
    first, again = "Priya paints watercolors as a hobby.", "Priya paints watercolors as her hobby."
    vectors = HashEmbedder().embed([first, again])
    cosine = float(vectors[0] @ vectors[1])
    assert 0.85 <= cosine < 0.97  # the cosine rule alone keeps both
    calls = []

    def calibrate(request: LLMRequest) -> object:
        if request.stage != "build.calibrate":
            return None
        calls.append(request)
        return {"facts": [first if len(calls) == 1 else again]}

    config = BuildConfig(snapshot_lag=1, paraphrase_cosine=0.85)
    store, scope, report, _ = build(sample_path, config, calibrate)
    [fact] = store.facts(scope)
    assert fact.content == first and len(fact.episode_ids) == len(store.episodes(scope))
    assert report.facts_added == 1
    calls.clear()
    config = BuildConfig(snapshot_lag=1, paraphrase_cosine=None)
    store, scope, report, _ = build(sample_path, config, calibrate)
    assert sorted(f.content for f in store.facts(scope)) == [first, again]


def test_known_facts_about_the_episode_s_speakers_are_marked(sample_path: Path) -> None:
    known = [
        SemanticFact("S1", "c", "Priya has a cat named Biscuit.", 1, ("E1",)),
        SemanticFact("S2", "c", "Arjun is planning a trip to Japan.", 1, ("E1",)),
        SemanticFact("S3", "c", "Tomas runs with Priya's brother.", 1, ("E1",)),
    ]
    block = known_block(known, ["Priya"])
    assert block.splitlines() == [
        "(A fact ending in (about Name) is about Priya, speaking in this episode.)",
        "- Priya has a cat named Biscuit. (about Priya)",
        "- Arjun is planning a trip to Japan.",
        "- Tomas runs with Priya's brother. (about Priya)",
    ]
    both = known_block(known, ["Tomas", "Priya"]).splitlines()
    assert both[0] == (
        "(A fact ending in (about Name) is about Tomas or Priya, speaking in this episode.)"
    )
    assert both[3] == "- Tomas runs with Priya's brother. (about Tomas, Priya)"
    labelled = known_block(known, ["Priya"], ids=True).splitlines()
    assert labelled[1] == "- [S1] Priya has a cat named Biscuit. (about Priya)"
    assert known_block(known, []).splitlines()[0] == "- Priya has a cat named Biscuit."
    _, _, _, seen = build(sample_path, BuildConfig(snapshot_lag=1))
    predict = prompts(seen, "build.predict")
    assert all("speaking in this episode.)" in p for p in predict)
    assert any("is about Priya or Tomas" in p for p in predict)
    # the sample's one-turn episodes (a session's 13th turn) have a single speaker
    assert any("is about Tomas, speaking" in p for p in predict)
    assert any("(about Priya" in p and "- [S" in p for p in prompts(seen, "build.calibrate"))
    _, _, _, seen = build(sample_path, BuildConfig(snapshot_lag=1, mark_speakers=False))
    assert not any("(about Priya" in p for p in prompts(seen, "build.predict"))


def test_the_method_config_turns_every_rule_off_and_is_recorded(tmp_path: Path) -> None:
    source = conversation(tmp_path, TALK + GOODBYE)
    store, scope, report, seen = build(source, BuildConfig.method())
    assert report.to_dict()["rules"] == {
        "calibrate_rule": "method",
        "paraphrase_cosine": None,
        "pronoun_rule": "keep",
        "merge_phatic": False,
        "context_turns": 0,
        "mark_speakers": False,
    }
    assert report.runs_merged == 0
    assert [len(e.turn_ids) for e in store.episodes(scope)] == [6, 2]  # the goodbye stays alone
    assert not any("(before)" in r.messages[-1].content for r in seen)
    assert BuildConfig().rules()["context_turns"] == 3
    assert report.to_dict()["calibrate_rule"] == "method"
