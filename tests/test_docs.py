"""The documentation (README.md and docs/): every generated block is what its source gives
(measurement files, pyproject's layers, the operation table, the README's example answer,
the capable-model run folders when they are on the machine); no commit hashes and no machine
paths in the prose; the results page script prints figures and no conversation text."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def _script(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


blocks = _script(REPO / "scripts" / "docs_blocks.py")
results_page = _script(REPO / "benchmarks" / "results_page.py")


def _stale(kinds: list[str], results: Path | None = None) -> dict[str, list[str]]:
    sources = blocks.Sources(REPO, results)
    stale = {}
    for path in blocks.doc_files(REPO):
        outcome = blocks.regenerate(path.read_text(encoding="utf-8"), sources, only=kinds)
        if outcome.changed:
            stale[str(path.relative_to(REPO))] = outcome.changed
    return stale


HOW = "run `python scripts/docs_blocks.py` and commit the result"


def test_measurement_layer_and_operation_tables_match_their_sources() -> None:
    assert _stale(["measurement", "layers", "operations"]) == {}, HOW


def test_the_readme_example_answer_is_what_the_offline_llm_answers() -> None:
    assert _stale(["example-answer"]) == {}, HOW


def test_the_capable_model_figures_match_the_run_folders() -> None:
    results = blocks.default_results(REPO)
    if results is None:
        pytest.skip("the capable-model run folders are not on this machine (QEMEM_RESULTS_DIR)")
    assert _stale(["capable-model"], results) == {}, HOW


def test_every_measurement_file_is_shown_and_every_block_is_known() -> None:
    named = set()
    for path in blocks.doc_files(REPO):
        for args in blocks.blocks(path.read_text(encoding="utf-8")):
            kind, *rest = args.split()
            assert kind in blocks.KINDS, f"{path}: unknown block {args!r}"
            if kind == "measurement":
                named.add(rest[0])
    files = {str(p.relative_to(REPO)) for p in (REPO / "benchmarks/measurements").glob("*.yaml")}
    assert files == named, "each measurement file is shown once on a page, and exists"


COMMIT = re.compile(r"(?<![\w/.#=-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w…-])")
CITED = {"d2a6dff", "11c91fb"}  # commits of nemori-ai/nemori, the recipe docs/method.md cites


def test_the_docs_name_no_commit_and_no_machine_path() -> None:
    for path in blocks.doc_files(REPO):
        text = path.read_text(encoding="utf-8")
        named = set(COMMIT.findall(text)) - CITED
        assert not named, f"{path} names commits of qemem: {named}"
        assert "../shared" not in text and "/work/" not in text, path


def test_a_commit_is_told_from_a_hash_prefix_and_a_word() -> None:
    assert COMMIT.findall("before (`608756d`) and commit 8f80bac") == ["608756d", "8f80bac"]
    words = "sha256 `27b443bf…0d06`, data=27b443bf, `decade`, qm_f472c0d44672, 6f1c2a7e-5b0d"
    assert COMMIT.findall(words) == []


def test_a_measurement_file_renders_and_a_ragged_row_is_named(tmp_path: Path) -> None:
    good = tmp_path / "m.yaml"
    good.write_text(
        "title: T\ncommand: python benchmarks/x.py\nsetting: >-\n  two\n  lines\n"
        'tables:\n  - columns: [kind, "p50, ms"]\n    rows:\n      - [a, "1,234"]\n'
        "      - [b, 5.0 ms]\nnotes: n\n",
        encoding="utf-8",
    )
    text = blocks.render_measurement(good)
    assert text.startswith("**T** (`python benchmarks/x.py`): two lines\n")
    assert "| kind | p50, ms |\n| --- | ---: |\n| a | 1,234 |\n| b | 5.0 ms |" in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace('[a, "1,234"]', "[a, 1,234]"), encoding="utf-8")
    with pytest.raises(ValueError, match="rows of 2 cells"):
        blocks.render_measurement(bad)
    with pytest.raises(ValueError, match="unknown generated block"):
        blocks.render_block("nope", blocks.Sources(REPO))


@pytest.mark.slow
def test_the_results_page_prints_figures_and_no_conversation_text(
    tmp_path: Path, sample_path: Path
) -> None:
    run = tmp_path / "run"
    argv = ["eval", "locomo", "--data", str(sample_path), "--out", str(run), "--llm", "fake"]
    argv += ["--judge", "fake", "--embedder", "hash", "--no-plots", "--limit", "4"]
    done = subprocess.run([sys.executable, "-m", "qemem", *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    page = results_page.render_runs([run])
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert f"{summary['questions']} questions of LoCoMo" in page
    assert "| **method** |" in page and "| Accuracy, full method | accuracy |" in page
    for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        assert record["question"] not in page
        assert len(record["prediction"]) < 20 or record["prediction"] not in page
