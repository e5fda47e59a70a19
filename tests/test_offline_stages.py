"""The offline LLM's stage answerers: each reads its stage's structured inputs, never the prompt,
and no library module imports qemem.testing."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import qemem.prompts
from qemem.answer import ask
from qemem.build import build_memory
from qemem.embed import HashEmbedder
from qemem.evidence import ViewCard
from qemem.llm import LLMClient, LLMRequest, Message, open_llm, stages
from qemem.memory import Memory
from qemem.models import Episode, SemanticFact, Turn
from qemem.participants import Participants
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM, base_stage, offline_answer
from qemem.testing.offline import ANSWERERS

SCOPE = Scope("demo-1")
QUESTION = "When did Priya go to her first pottery class?"
WHEN = datetime(2024, 3, 14, 19, 15)


def turn(tid: str, speaker: str, text: str, session: int = 1) -> Turn:
    return Turn(tid, "c", session, int(tid.split(":")[1]), speaker, text, WHEN)


def answer_of(stage: str, **inputs: Any) -> Any:
    return offline_answer(
        LLMRequest("any system", [Message("user", "any prompt")], stage, inputs=inputs)
    )


def test_plan_is_built_from_the_question() -> None:
    plan = answer_of("plan", question=QUESTION)
    assert plan["need"] == f"What the conversation says about: {QUESTION}"
    assert plan["temporal"] is True
    assert plan["queries"][0] == "did Priya go to her first pottery class"
    assert "Priya go first pottery class" in plan["queries"]
    assert plan["queries"][-1] == "I go first pottery class"
    assert 4 <= len(plan["queries"]) <= 6


def test_construct_cites_the_memories_sharing_most_words() -> None:
    turns = [
        turn("D1:1", "Tomas", "How was your week?"),
        turn("D1:3", "Priya", "Busy. I went to my first pottery class on Saturday. Loved it."),
        turn("D1:5", "Tomas", "Pottery sounds fun."),
    ]
    out = answer_of("construct", question=QUESTION, need="the class date", turns=turns)
    assert [c["sources"] for c in out["cards"]] == [["D1:3"], ["D1:5"]]
    assert out["cards"][0]["quote"] == "I went to my first pottery class on Saturday."
    assert out["cards"][0]["claim"] == "Priya said: I went to my first pottery class on Saturday."
    assert out["sufficient"] is True and out["follow_up_queries"] == []


def test_construct_reads_episodes_facts_as_shown() -> None:
    turns = [turn("D1:3", "Priya", "My first pottery class was great.")]
    shown = Episode("E1", "c", 1, "Pottery", "Priya took a pottery class.", WHEN, ("D1:3",))
    full = Episode("E2", "c", 1, "Priya: pottery", "her first class", WHEN, ("D1:9",))
    fact = SemanticFact("S1", "c", "Priya likes pottery classes.", 1, ("E1",))
    out = answer_of(
        "construct", question=QUESTION, need="", episodes=[shown, full], facts=[fact], turns=turns
    )
    # E1's turns are all shown, so only its title is listed; the fact does not read "who: what"
    assert [c["sources"] for c in out["cards"]] == [["E2"], ["D1:3"]]
    assert out["cards"][0]["claim"] == "Priya said: pottery: her first class"


def test_answer_quotes_the_first_card_else_the_best_memory() -> None:
    card = ViewCard("Priya said: pottery", ["D1:3"], "on  Saturday", "", "")
    assert answer_of("answer", question=QUESTION, cards=[card]).endswith(
        "FINAL ANSWER: on Saturday"
    )
    bare = ViewCard("Priya went on Saturday", ["D1:3"], "", "", "")
    assert answer_of("answer.retry", question=QUESTION, cards=[bare]).endswith(
        "FINAL ANSWER: Priya went on Saturday"
    )
    turns = [turn("D1:3", "Priya", "Hello. My first pottery class was fun!")]
    text = answer_of("answer", question=QUESTION, cards=[], turns=turns)
    assert text == (
        "From the evidence shown: My first pottery class was fun!\n"
        "FINAL ANSWER: My first pottery class was fun!"
    )
    assert answer_of("answer", question=QUESTION).endswith("FINAL ANSWER: no information")


def test_build_stages_answer_from_the_turns() -> None:
    turns = [turn(f"D1:{n}", "Priya", f"Message {n} about\npottery") for n in range(1, 9)]
    assert answer_of("build.segment", turns=turns) == {"groups": [[1, 2, 3, 4, 5, 6], [7, 8]]}
    episode = answer_of("build.episode.repair", turns=turns[:2])
    assert episode == {
        "title": "Priya: Message pottery",
        "narrative": 'Priya said: "Message 1 about pottery" Priya said: "Message 2 about pottery"',
    }
    assert answer_of("build.calibrate", turns=turns) == {
        "facts": ["Priya mentioned Message 1 about pottery"]
    }
    assert answer_of("build.predict") == {"prediction": []}


def test_every_stage_has_an_offline_answerer() -> None:
    constants = {
        value
        for name, value in vars(stages).items()
        if name.isupper() and isinstance(value, str) and not value.startswith(".")
    }
    assert constants == set(stages.STAGES)  # each stage constant is one of STAGES
    assert set(ANSWERERS) == set(stages.STAGES)


def test_the_library_calls_only_the_stages_named(sample_path: Path) -> None:
    llm = OfflineLLM()
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=LLMClient(llm)) as memory:
        memory.ingest(sample_path)
        memory.build("demo-1")
        memory.ask("demo-1", QUESTION)
        memory.ask("demo-1", QUESTION, mode="no-refine")
        memory.check("demo-1", "Priya went to a pottery class.")
        memory.audit_memory("demo-1", sample=2)
    called = {base_stage(request.stage) for request in llm.calls}
    assert called <= set(stages.STAGES)
    assert {stages.PLAN, stages.CONSTRUCT, stages.ANSWER, *stages.BUILD} <= called


def test_base_stage_drops_follow_up_suffixes() -> None:
    assert base_stage("answer.retry") == "answer"
    assert base_stage("build.segment.repair") == "build.segment"
    assert base_stage("construct") == "construct"


def test_fake_spec_builds_the_offline_llm() -> None:
    client = open_llm("fake:other")
    assert client is not None and isinstance(client.provider, OfflineLLM)
    assert (client.provider.name, client.provider.model) == ("fake", "other")


def _sample_store(embedder: HashEmbedder) -> SQLiteStore:
    store = SQLiteStore(":memory:")
    sample = resources.files("qemem.data").joinpath("sample.json")
    with resources.as_file(sample) as path:
        Memory(store, embedder).ingest(path)
    return store


REWORDED = {
    "plan": ("Question: {question}", "We were asked «{question}»."),
    "construct_input": (
        "Question: {question}\nInformation needed: {need}",
        "Asked: {question} / {need}",
    ),
    "answer_input": ("Question: {question}", "Now answer «{question}»"),
    "build_episode": ("Messages:\n{lines}", "The lines follow.\n\n{lines}\n(end)"),
}


def _run_method(embedder: HashEmbedder) -> tuple[Any, ...]:
    store = _sample_store(embedder)
    llm = LLMClient(OfflineLLM())
    build_memory(store, SCOPE, embedder, llm)
    answer = ask(store, SCOPE, embedder, llm, QUESTION)
    episodes = [(e.title, e.content) for e in store.episodes(SCOPE)]
    cards = [(c.claim, c.sources, c.quote) for c in answer.cards]
    return answer.text, cards, answer.evidence.plan.queries, episodes


def test_rewording_the_prompts_does_not_change_the_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = HashEmbedder()
    before = _run_method(embedder)
    original = qemem.prompts.load_prompt

    def reworded(name: str) -> str:
        text = original(name)
        if name in REWORDED:
            old, new = REWORDED[name]
            assert old in text
            text = text.replace(old, new)
        return text

    monkeypatch.setattr(qemem.prompts, "load_prompt", reworded)
    fields = Participants.of(["a"]).prompt_fields()
    assert "We were asked" in qemem.prompts.render("plan", question="q", span="s", **fields)
    assert _run_method(embedder) == before
    assert before[1] and before[3]  # cards and episodes were made


@pytest.mark.slow
def test_no_library_module_imports_qemem_testing() -> None:
    package = Path(qemem.prompts.__file__).parents[1]
    names = sorted(
        ".".join(("qemem", *f.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
        for f in package.rglob("*.py")
        if f.relative_to(package).parts[0] != "testing" and f.name != "__main__.py"
    )
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(k for k in sys.modules if k.startswith('qemem.testing')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(package.parent)},
    ).stdout
    assert len(names) > 50 and "qemem.service.app" in names
    assert out.strip() == "[]"
