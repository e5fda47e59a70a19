"""A CLI smoke test per command with a missing, empty, directory and read-only store and output
path (issue 21): each fails with a short clear error (exit status 2, never a traceback) and
leaves nothing behind, or (a writing command given a new store) succeeds. The commands come
from the typer app: one that takes ``--store`` or an output path without a row in ``COMMANDS``
fails ``test_every_command_with_a_store_or_an_output_has_a_row``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.main import get_command

from qemem.cli import app
from qemem.datasets.longmemeval import convert_longmemeval
from qemem.memory import Memory

READS, WRITES, CHANGES = "reads", "writes", "changes"  # CHANGES: needs an existing store
# argv (split at spaces) with STORE, OUT, SAMPLE, NEMORI, MEMFILE and JOB (a job of the store
# when it has one) replaced; store access
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("ingest SAMPLE --store STORE -q", WRITES),
    "conversations": ("conversations --store STORE", READS),
    "delete": ("delete demo-1 --store STORE", CHANGES),
    "reembed": ("reembed --store STORE --embedder hash:64 -q", CHANGES),
    "reindex": ("reindex --store STORE --embedder hash -q", CHANGES),
    "search": ("search pottery --store STORE -c demo-1", READS),
    "demo": ("demo --store STORE", WRITES),
    "build": ("build --store STORE -c demo-1 --llm fake", CHANGES),
    "import-nemori": ("import-nemori NEMORI --store STORE -c demo-1", CHANGES),
    "ask": ("ask pottery? --store STORE -c demo-1 --mode retrieval", READS),
    "context": ("context pottery? --store STORE -c demo-1", READS),
    "check": ("check Priya-made-a-mug. --store STORE -c demo-1 --llm fake", READS),
    "import-memory": ("import-memory MEMFILE --store STORE", CHANGES),
    "export-memory": ("export-memory --store STORE -c demo-1", READS),
    "facts": ("facts --store STORE -c demo-1 --as-of 2024-06-01", READS),
    "delete-message": ("delete-message D1:1 --store STORE -c demo-1", CHANGES),
    "redact-message": ("redact-message D1:2 --store STORE -c demo-1", CHANGES),
    "delete-fact": ("delete-fact S1 --store STORE -c demo-1", CHANGES),
    "correct-fact": ("correct-fact S1 Priya-makes-mugs. --store STORE -c demo-1", CHANGES),
    "serve": ("serve --store STORE", CHANGES),  # never started: refused first
    "mcp": ("mcp --store STORE", CHANGES),
    "keys create": ("keys create --store STORE --namespace t", WRITES),
    "keys list": ("keys list --store STORE", READS),
    "keys revoke": ("keys revoke nokey --store STORE", CHANGES),
    "jobs list": ("jobs list --store STORE", READS),
    "jobs show": ("jobs show JOB --store STORE", READS),
    "jobs cancel": ("jobs cancel JOB --store STORE", CHANGES),
    "eval coverage": ("eval coverage --data SAMPLE --store STORE", WRITES),
    "eval audit memory": ("eval audit memory --store STORE -c demo-1 --judge fake", READS),
    "eval locomo": (
        "eval locomo --data SAMPLE --store STORE --out OUT --llm fake --no-build --limit 1 "
        "--no-plots",
        WRITES,
    ),
    "eval beam": (
        "eval beam --data BEAM --store STORE --out OUT --llm fake --no-build --limit 1",
        WRITES,
    ),
    "eval longmemeval": (
        "eval longmemeval --data LME --store STORE --out OUT --llm fake --no-build --limit 1",
        WRITES,
    ),
}
# the commands that take -c repeated (several conversations), as run across two of them
SEVERAL: dict[str, str] = {
    "search": "search pottery --store STORE -c demo-1 -c c1",
    "ask": "ask pottery? --store STORE -c demo-1 -c c1 --mode retrieval",
    "context": "context pottery? --store STORE -c demo-1 -c c1",
}
# commands with an output path: argv with OUTPUT replaced; whether it names a file or a folder
OUTPUTS: dict[str, tuple[str, str]] = {
    "export-memory": ("export-memory --store STORE -c demo-1 -o OUTPUT", "file"),
    "ask": ("ask pottery? --store STORE -c demo-1 --mode retrieval --html OUTPUT", "file"),
    "eval locomo": (
        "eval locomo --data SAMPLE --out OUTPUT --llm fake --no-build --limit 1 --no-plots",
        "folder",
    ),
    "eval compare": ("eval compare STORE STORE -o OUTPUT", "file"),
    "eval beam": ("eval beam --data BEAM --out OUTPUT --llm fake --no-build --limit 1", "folder"),
    "eval longmemeval": (
        "eval longmemeval --data LME --out OUTPUT --llm fake --no-build --limit 1",
        "folder",
    ),
    "eval audit memory": (
        "eval audit memory --store STORE -c demo-1 --judge fake --out OUTPUT",
        "folder",
    ),
    "data locomo": ("data locomo --out OUTPUT", "folder"),
    "data beam": ("data beam --from BEAMDIR --sizes 100K --out OUTPUT", "file"),
    "data longmemeval": ("data longmemeval LMERAW --out OUTPUT", "file"),
    "reproduce": ("reproduce -c coverage-turns --dry-run --out OUTPUT", "folder"),
}
SERVERS = {"serve", "mcp"}  # given a store that can be read, they would start serving


def _params(command: object) -> set[str]:
    return {opt for p in getattr(command, "params", []) for opt in p.opts}


def _commands() -> dict[str, set[str]]:
    def walk(command: object, path: tuple[str, ...]) -> Iterator[tuple[str, set[str]]]:
        subs = getattr(command, "commands", None)
        if subs is None:
            yield " ".join(path), _params(command)
            return
        for name, sub in subs.items():
            yield from walk(sub, (*path, name))

    return dict(walk(get_command(app), ()))


def test_every_command_with_a_store_or_an_output_has_a_row() -> None:
    found = _commands()
    stores = {name for name, opts in found.items() if "--store" in opts}
    outputs = {name for name, opts in found.items() if {"-o", "--out", "--html"} & opts}
    assert stores == set(COMMANDS)
    assert outputs == set(OUTPUTS)


# ---------------------------------------------------------------- running qemem


COMMAND = get_command(app)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # typer builds the click command anew on each call otherwise (a quarter second)
    monkeypatch.setattr("typer.main.get_command", lambda typer_app: COMMAND)
    for name in ("QEMEM_LLM", "QEMEM_STORE", "QEMEM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.setenv("COLUMNS", "200")


def qemem(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``qemem ARGS`` through the console entry point: its exit status and its output."""
    from qemem.cli import main

    old = sys.argv
    sys.argv = ["qemem", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out + out.err


def refused(code: int, output: str) -> None:
    """A clear refusal: status 2 and a short message, no traceback."""
    assert code == 2, output
    assert "Traceback" not in output and output.strip(), output
    assert len(output.strip().splitlines()) <= 8, output  # one line, or typer's usage panel


@pytest.fixture
def files(tmp_path: Path, sample_path: Path) -> dict[str, str]:
    """The inputs of the commands: a memory file, an (empty) NEMORI folder, the bundled BEAM
    sample and the LongMemEval fixture converted."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    lme = inputs / "lme.json"
    fixture = Path(__file__).parent / "fixtures" / "longmemeval" / "longmemeval_sample.json"
    converted = convert_longmemeval(fixture)
    lme.write_text(json.dumps(converted.samples), "utf-8")
    (inputs / "nemori").mkdir()
    memfile = inputs / "memory.json"
    memfile.write_text(
        '{"format": "qemem-memory/1", "conversation": "demo-1", "note": "", '
        '"episodes": [], "facts": []}',
        "utf-8",
    )
    return {
        "SAMPLE": str(sample_path),
        "BEAM": str(sample_path.parent / "beam_sample.json"),
        "LME": str(lme),
        "LMERAW": str(fixture),
        "BEAMDIR": str(Path(__file__).parent / "fixtures" / "beam"),
        "NEMORI": str(inputs / "nemori"),
        "MEMFILE": str(memfile),
        "OUT": str(tmp_path / "run"),
        "JOB": "job-none",
    }


def argv(template: str, names: dict[str, str]) -> list[str]:
    return [names.get(a, a) for a in template.split()]


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# ---------------------------------------------------------------- stores


@pytest.mark.parametrize("name", COMMANDS)
def test_a_missing_store(
    name: str, tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    template, kind = COMMANDS[name]
    typo = tmp_path / "typo.db"
    code, output = qemem(argv(template, {**files, "STORE": str(typo)}), capsys)
    if kind == WRITES:  # a new store is what a writing command makes
        assert code == 0 and "Traceback" not in output, output
        return
    refused(code, output)
    assert "no qemem store" in output, output
    assert not any(p.name.startswith("typo.db") for p in tmp_path.iterdir())


@pytest.mark.parametrize("name", COMMANDS)
def test_an_empty_store(
    name: str, tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = listing(tmp_path)
    code, output = qemem(argv(COMMANDS[name][0], {**files, "STORE": ""}), capsys)
    refused(code, output)
    assert "store is empty" in output
    assert listing(tmp_path) == before


@pytest.mark.parametrize("name", COMMANDS)
def test_a_directory_as_store(
    name: str, tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "adir"
    folder.mkdir()
    code, output = qemem(argv(COMMANDS[name][0], {**files, "STORE": str(folder)}), capsys)
    refused(code, output)
    assert list(folder.iterdir()) == []


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder no one can write: permission bits for a normal user; for root (whom they do
    not stop), a read-only bind mount of it, else the test is skipped."""
    folder = tmp_path / "ro"
    folder.mkdir()
    yield from _read_only(folder)


def _read_only(folder: Path) -> Iterator[Path]:
    shadow = folder.with_name(folder.name + "-files")
    shadow.mkdir()
    if os.geteuid() != 0:
        yield shadow  # filled by the test, then made read-only by make_read_only
        return
    mounted = subprocess.run(
        ["mount", "--bind", str(shadow), str(folder)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"running as root and cannot bind-mount read-only: {mounted.stderr!r}")
    try:
        yield shadow
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)  # even if a file is open


def make_read_only(shadow: Path) -> Path:
    """The read-only view of ``shadow``'s content (see the ``read_only`` fixture)."""
    folder = shadow.with_name(shadow.name.removesuffix("-files"))
    if os.geteuid() != 0:
        for path in [*shadow.rglob("*"), shadow]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        return shadow
    done = subprocess.run(
        ["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"running as root and cannot remount read-only: {done.stderr!r}")
    return folder


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - SERVERS))
def test_a_read_only_store(
    name: str,
    read_only: Path,
    files: dict[str, str],
    sample_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Memory.open(read_only / "m.db", embedder="hash", llm="fake") as memory:
        memory.ingest(sample_path)
        job = memory.enqueue_build("demo-1")
    folder = make_read_only(read_only)
    template, kind = COMMANDS[name]
    before = listing(folder)
    names = {**files, "STORE": str(folder / "m.db"), "JOB": job.id}
    code, output = qemem(argv(template, names), capsys)
    if kind == READS:
        assert code == 0 and "Traceback" not in output, output
    else:
        refused(code, output)
        assert "read-only" in output, output
    assert listing(folder) == before  # no -wal/-shm or journal files either


# ---------------------------------------------------------------- output paths


@pytest.fixture
def store(tmp_path: Path, sample_path: Path) -> str:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash") as memory:
        memory.ingest(sample_path)
    return str(path)


def _output_case(case: str, tmp_path: Path, kind: str) -> Path:
    if case == "missing folder":
        return tmp_path / "no" / "such" / "out"
    a_file = tmp_path / "a-file"
    a_file.write_text("x", "utf-8")
    return a_file / "out" if kind == "folder" else tmp_path  # a folder named as a file


@pytest.mark.parametrize("case", ["missing folder", "not a file or folder"])
@pytest.mark.parametrize("name", OUTPUTS)
def test_an_output_path_that_cannot_be(
    name: str,
    case: str,
    tmp_path: Path,
    store: str,
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    template, kind = OUTPUTS[name]
    if case == "missing folder" and kind == "folder":
        pytest.skip("an output folder is created with its parents (by design)")
    output_path = _output_case(case, tmp_path, kind)
    before = listing(tmp_path)
    code, output = qemem(
        argv(template, {**files, "STORE": store, "OUTPUT": str(output_path)}), capsys
    )
    refused(code, output)
    assert listing(tmp_path) == before


@pytest.mark.parametrize("name", OUTPUTS)
def test_a_read_only_output_folder(
    name: str,
    read_only: Path,
    store: str,
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = make_read_only(read_only)
    template, _ = OUTPUTS[name]
    target = folder / "out"
    code, output = qemem(argv(template, {**files, "STORE": store, "OUTPUT": str(target)}), capsys)
    refused(code, output)
    assert "not writable" in output or "read-only" in output.lower(), output
    assert listing(folder) == []


# ---------------------------------------------------------------- several conversations


@pytest.mark.parametrize("name", SEVERAL)
def test_several_conversations(
    name: str,
    tmp_path: Path,
    files: dict[str, str],
    sample_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from service_helpers import MESSAGES

    typo = tmp_path / "typo.db"
    code, output = qemem(argv(SEVERAL[name], {**files, "STORE": str(typo)}), capsys)
    refused(code, output)
    assert "no qemem store" in output and not typo.exists(), output
    path = tmp_path / "m.db"
    with Memory.open(path, embedder="hash") as memory:
        memory.ingest(sample_path)
        code, output = qemem(argv(SEVERAL[name], {**files, "STORE": str(path)}), capsys)
        refused(code, output)
        assert "no conversation c1" in output, output
        memory.add_messages("c1", MESSAGES)
    code, output = qemem(argv(SEVERAL[name], {**files, "STORE": str(path)}), capsys)
    assert code == 0 and "Traceback" not in output, output
    assert "demo-1" in output and "c1" in output, output
