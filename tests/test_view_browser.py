"""The answer page and the run page in a real browser (Debian's chromium through Playwright).

Pages are opened from file://; every test fails on a console error, an uncaught exception, a
dialog, or a request to anything but the page's own file and data: URLs. Screenshots are saved
under the test's temporary folder. Under CI=true a missing chromium fails; elsewhere it skips.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qemem.answer.wire import answer_to_json
from qemem.embed import HashEmbedder
from qemem.eval.locomo import LocomoRunConfig, run_locomo
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM
from qemem.view import answer_html, report_html

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update"]
HOSTILE = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
PLAN = {
    "need": "When it happened.",
    "answer_type": "date",
    "aggregate": False,
    "temporal": True,
    "queries": ["pottery class", "first class", "half marathon", "studio"],
}

if not CHROMIUM.exists() and os.environ.get("CI") != "true":
    pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import Browser, ConsoleMessage, Page, Request, expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.exists(), "CI needs /usr/bin/chromium: .ci/run installs it with apt-get"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=ARGS
        )
        yield launched
        launched.close()


class Watched:
    """A page whose console errors, page errors, dialogs and outside requests are recorded."""

    def __init__(self, browser: Browser, path: Path, width: int = 1280, height: int = 600):
        self.page: Page = browser.new_page(viewport={"width": width, "height": height})
        self.problems: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        self.page.on(
            "dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss())
        )
        self.page.on("request", self._request)
        self.page.goto(path.as_uri())

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"console {message.type}: {message.text}")

    def _request(self, request: Request) -> None:
        if not request.url.startswith(("file://", "data:")):
            self.problems.append(f"request: {request.url}")

    def close(self) -> None:
        self.page.close()
        assert self.problems == []


def scripted(*cards: dict[str, Any]) -> LLMClient:
    def respond(request: LLMRequest) -> Any:
        stage = request.stage.split(".")[0]
        if stage == "plan":
            return PLAN
        if stage == "construct":
            return {"cards": list(cards), "sufficient": True}
        return "FINAL ANSWER: the Saturday before 14 March"

    return LLMClient(OfflineLLM(respond))


POTTERY = {
    "claim": "Priya went to her first pottery class.",
    "sources": ["D1:3"],
    "quote": "I went to my first pottery class last Saturday",
    "time": "9 March 2024",
    "relation": "answer candidate",
}
MARATHON = {
    "claim": "Tomas ran the half marathon.",
    "sources": ["D5:8"],
    "quote": "crossing that line was the best feeling",
    "time": "",
    "relation": "intermediate fact",
}


def test_answer_page(browser: Browser, sample_path: Path, tmp_path: Path) -> None:
    store = SQLiteStore(":memory:")
    builder = Memory(store, HashEmbedder(), llm=LLMClient(OfflineLLM()))
    builder.ingest(sample_path)
    builder.build("demo-1")  # episodes E1... and facts S1... for the episode and fact cards
    learned = " ".join(store.facts(Scope("demo-1"), ["S1"])[0].content.split()[:6])
    written = {"claim": "From a fact.", "sources": ["S1"], "quote": learned, "time": ""}
    cards = (
        POTTERY,
        MARATHON,
        {**POTTERY, "sources": ["E1"]},
        {**POTTERY, "sources": ["S1"]},
        written,
    )
    with Memory(store, HashEmbedder(), llm=scripted(*cards)) as mem:
        answer = mem.ask("demo-1", "When did Priya go to her first pottery class?")
    path = tmp_path / "answer.html"
    path.write_text(answer_html(answer_to_json(answer)), "utf-8")
    watched = Watched(browser, path)
    page = watched.page
    mark = page.locator('[data-turn="D1:3"] mark')
    expect(mark).to_have_count(1)
    assert "first pottery class last Saturday" in mark.inner_text()
    expect(page.locator('[data-turn="D1:2"] mark')).to_have_count(0)  # context, not cited
    expect(page.locator('[data-turn="D1:3"]')).to_contain_text("cited by card 1")
    shown = page.locator(".session .turn").evaluate_all("ts => ts.map(t => t.dataset.turn)")
    session_1 = ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"]  # D1:3 and two either side
    assert shown == [*session_1, "D5:6", "D5:7", "D5:8", "D5:9", "D5:10"]

    episode, fact = answer.sources.episodes["E1"], answer.sources.facts["S1"]
    expect(page.locator('[id="e-E1"]')).to_contain_text(episode.title)
    expect(page.locator('[id="e-E1"] .turn')).to_have_count(min(12, len(episode.turn_ids)))
    expect(page.locator('[id="f-S1"]')).to_contain_text(fact.content)
    expect(page.locator('[id="f-S1"]')).to_contain_text(f"from {fact.episode_ids[0]}")
    expect(page.locator('[id="card-4"] .badge.warn')).to_have_text("model-written fact")
    expect(page.locator('[id="card-0"]')).to_contain_text("rules from the quote the Saturday")

    turn = page.locator('[id="t-D5:8"]')
    expect(turn).not_to_be_in_viewport()
    page.locator('.card button[data-target="t-D5:8"]').first.click()
    expect(turn).to_be_in_viewport()
    expect(turn).to_be_focused()
    page.screenshot(path=tmp_path / "answer-scrolled.png")

    expect(page.locator('[id="p-D1:3"]')).to_contain_text(
        "times: last Saturday → the Saturday before 14 March 2024"
    )
    page.locator('[id="p-D1:3"] button').click()  # a carded pool item leads to its card
    expect(page.locator('[id="card-0"]')).to_be_in_viewport()
    uncarded = page.locator("tr.item:not(.carded)").first
    uncarded.locator("button").click()
    expect(uncarded).to_contain_text("not cited by any card")

    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=tmp_path / "answer.png")
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=tmp_path / "answer-dark.png")
    page.set_viewport_size({"width": 390, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=tmp_path / "answer-phone.png")
    watched.close()


def test_run_report(browser: Browser, sample_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_locomo(
        LocomoRunConfig(
            sample_path, out, llm="fake", judge="fake", limit=6, plots=False, embedder="hash"
        )
    )
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    wrong = sum(1 for r in records if r["score"] < 0.5)
    watched = Watched(browser, out / "report.html", height=900)
    page = watched.page
    rows = page.locator("tr.q:visible")
    expect(rows).to_have_count(6)
    page.select_option("#f-correct", "wrong")
    expect(rows).to_have_count(wrong)
    expect(page.locator("#count")).to_have_text(f"{wrong} of 6 questions")
    page.select_option("#f-correct", "")

    page.locator('th[data-key="f1"] button').click()
    values = [float(v or "-1") for v in rows.evaluate_all("rs => rs.map(r => r.dataset.f1)")]
    assert values == sorted(values)
    expect(page.locator('th[data-key="f1"]')).to_have_attribute("aria-sort", "ascending")

    first = rows.first
    n = first.get_attribute("data-n")
    record = sorted(records, key=lambda r: r["index"])[int(n or 0)]
    first.locator("button.expand").focus()
    page.keyboard.press("Enter")  # keyboard opens the row
    detail = page.locator("tr.detail")
    expect(detail).to_have_count(1)
    expect(detail).to_contain_text(f"Gold answer: {record['gold']}")
    for tid in record["evidence"]:
        expect(page.locator(f'[id="q{n}-t-{tid}"] .badge.gold')).to_have_count(1)
    expect(detail.locator(".evidence-status .badge")).to_have_count(len(record["evidence"]))
    page.screenshot(path=tmp_path / "report.png", full_page=False)
    detail.scroll_into_view_if_needed()
    page.screenshot(path=tmp_path / "report-detail.png")
    page.set_viewport_size({"width": 390, "height": 800})  # the opened row fits a phone
    box = detail.locator(".detail-body").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    page.screenshot(path=tmp_path / "report-phone.png")
    page.keyboard.press("Enter")  # and closes it
    expect(detail).to_be_hidden()
    watched.close()


def test_hostile_text_never_executes(browser: Browser, tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    base = {"conversation_id": "x", "session_id": "s1", "timestamp": "2024-01-02T10:00"}
    chat.write_text(json.dumps([{**base, "id": "D1:1", "speaker": HOSTILE, "text": HOSTILE}]))
    card = {"claim": HOSTILE, "sources": ["D1:1"], "quote": HOSTILE, "relation": HOSTILE}
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=scripted(card)) as mem:
        mem.ingest(chat)
        answer = mem.ask("x", f"What did they say? {HOSTILE}")
    page_path = tmp_path / "answer.html"
    page_path.write_text(answer_html(answer_to_json(answer)), "utf-8")
    record = {
        "conversation": "x",
        "index": 0,
        "mode": "full",
        "category": 1,
        "category_name": HOSTILE,
        "question": answer.question,
        "gold": HOSTILE,
        "evidence": ["D1:1"],
        "judge_labels": ["WRONG"],
        "score": 0.0,
        "f1": 0.0,
        "llm": {},
        "refinement": {"rounds": 0, "termination": HOSTILE},
        "visibility": {"refined": True, "cited": True},
        "answer": answer_to_json(answer),
    }
    report_path = tmp_path / "report.html"
    report_path.write_text(report_html([record], {"mode": HOSTILE}), "utf-8")
    for path in (page_path, report_path):
        watched = Watched(browser, path)
        page = watched.page
        if path == report_path:
            page.locator("button.expand").click()
        expect(page.locator('[data-turn="D1:1"] .text')).to_contain_text("<script>")
        assert page.evaluate("window.__xss") is None
        assert (
            page.locator("main img").count() == 0
            and page.locator("main script:not([type='application/json'])").count() == 0
        )
        watched.close()
