"""The calibrate rule (issue 23, item 1): by default every durable fact the messages state that
no known fact states is extracted, the prediction shown as a guess, not as knowledge; the
method's published wording stays available (``calibrate_rule="method"``) and is recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qemem.build import BuildConfig
from qemem.build.facts import calibrate_context
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.eval.locomo import LocomoRunConfig, run_locomo
from qemem.llm import LLMClient, LLMRequest, LLMResponse
from qemem.memory import Memory
from qemem.store import SQLiteStore
from qemem.testing import OfflineLLM

METHOD = "the known facts and the prediction miss or get wrong"


class Recording:
    """The offline LLM, keeping the calibrate prompts it was sent."""

    def __init__(self) -> None:
        self.inner = OfflineLLM()
        self.name, self.model = self.inner.name, self.inner.model
        self.calibrate: list[str] = []

    def complete(self, request: LLMRequest) -> LLMResponse:
        if request.stage == "build.calibrate":
            self.calibrate.append(request.messages[-1].content)
        return self.inner.complete(request)


def built(sample: Path, config: BuildConfig | None = None) -> tuple[Recording, list[object]]:
    provider = Recording()
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=LLMClient(provider)) as memory:
        memory.ingest(sample)
        reports = memory.build("demo-1", config=config)
    return provider, list(reports)


def test_the_prediction_is_a_guess_not_knowledge_by_default(sample_path: Path) -> None:
    provider, [report] = built(sample_path, BuildConfig(snapshot_lag=1))
    with_known = [p for p in provider.calibrate if "Facts already known" in p]
    assert with_known, "the sample's later episodes are extracted against known facts"
    for prompt in with_known:
        assert METHOD not in prompt
        assert "a guess, not known facts" in prompt
        assert "a fact the guess got right is still new" in prompt
    assert report.calibrate_rule == "complete"  # type: ignore[attr-defined]
    assert report.to_dict()["calibrate_rule"] == "complete"  # type: ignore[attr-defined]


def test_the_methods_wording_stays_available_and_is_recorded(sample_path: Path) -> None:
    provider, [report] = built(sample_path, BuildConfig(calibrate_rule="method", snapshot_lag=1))
    assert any(METHOD in p for p in provider.calibrate)
    assert report.to_dict()["calibrate_rule"] == "method"  # type: ignore[attr-defined]
    context, rule = calibrate_context(
        "- Priya has a cat.", "- Priya talks about pottery.", "method"
    )
    assert "What we predicted this episode would say" in context and METHOD in rule


def test_cli_build_takes_the_rule(sample_path: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    runner = CliRunner()
    common = ["--store", store, "--embedder", "hash"]
    assert runner.invoke(app, ["ingest", str(sample_path), *common]).exit_code == 0
    done = runner.invoke(
        app, ["build", *common, "--llm", "fake", "--calibrate-rule", "method", "--json"]
    )
    assert done.exit_code == 0, done.output
    assert '"calibrate_rule": "method"' in done.stdout


@pytest.mark.slow
def test_an_evaluation_run_records_the_rule(sample_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = LocomoRunConfig(
        sample_path, out, llm="fake", judge="fake", limit=1, plots=False, calibrate_rule="method"
    )
    run_locomo(config)
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert manifest["config"]["calibrate_rule"] == "method"
    built = json.loads((out / "build.json").read_text("utf-8"))
    assert {r["calibrate_rule"] for r in built.values()} == {"method"}
