"""Issue 21, what the CLI still lacked after items 6 and 10 landed: flag help without a
``<bool>`` placeholder, and output files in a folder that takes no new file (as root too,
where permission bits say yes) or whose write fails all the same refused without a
traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.memory import Memory

runner = CliRunner()
NO_NEW_FILES = Path("/proc")
"""A folder that takes no new file, for root too (permission bits would say it does)."""


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.delenv("QEMEM_LLM", raising=False)
    monkeypatch.delenv("QEMEM_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["ingest"],
        ["search"],
        ["eval", "locomo"],
        ["eval", "audit", "claims"],
        ["keys", "create"],
    ],
)
def test_flags_show_no_value_placeholder(command: list[str]) -> None:
    shown = runner.invoke(app, [*command, "--help"])
    assert shown.exit_code == 0 and "Show this message and exit." in shown.output
    assert "<bool>" not in shown.output
    assert "<str>" in shown.output or not command  # options that take a value keep theirs


def test_an_output_file_in_a_folder_that_takes_no_file_is_refused_first(
    tmp_path: Path, sample_path: Path
) -> None:
    store = str(tmp_path / "m.db")
    with Memory.open(store, embedder="hash") as memory:
        memory.ingest(sample_path)
    target = str(NO_NEW_FILES / "qemem-out")
    for args in (
        ["ask", "x", "--store", store, "-c", "demo-1", "--mode", "retrieval", "--html", target],
        ["export-memory", "--store", store, "-c", "demo-1", "-o", target],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "is not writable" in result.output, result.output
        assert "Traceback" not in result.output and "demo-1" not in result.output


def test_a_failing_write_is_an_output_error(tmp_path: Path) -> None:
    from qemem.cli.common import write_output
    from qemem.errors import OutputError

    gone = tmp_path / "gone" / "a.html"  # its folder was removed after the check
    with pytest.raises(OutputError, match=f"cannot write {gone}"):
        write_output(gone, "<html></html>")
    written = tmp_path / "a.html"
    write_output(written, "caf\u00e9")
    assert written.read_text("utf-8") == "caf\u00e9"
