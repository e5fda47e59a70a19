"""Run the conditions' commands once each and read their figures out of the JSON they write."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from qemem.errors import InputError, QememError
from qemem.reproduce.conditions import (
    PLACEHOLDER,
    Condition,
    Conditions,
    Run,
    bundled_beam_sample,
)
from qemem.reproduce.expect import FigureResult, RunOutcome, judge_figures
from qemem.reproduce.grading import last_json_line


@dataclass(frozen=True)
class Completed:
    """What a command did: its exit status and output."""

    returncode: int
    stdout: str
    stderr: str


class Executor(Protocol):
    """Runs one ``qemem`` command (argv without the program name)."""

    def __call__(self, argv: list[str]) -> Completed: ...


def subprocess_executor(argv: list[str]) -> Completed:
    """``python -m qemem ARGV`` with this interpreter."""
    done = subprocess.run(
        [sys.executable, "-m", "qemem", *argv], capture_output=True, text=True, check=False
    )
    return Completed(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class Settings:
    """What one invocation runs the conditions with."""

    data: Path
    data_kind: str  # "sample", "locomo" or "beam"
    data_sha256: str
    embedder: str
    llm: str
    judge: str
    work: Path
    repo: Path | None  # the source checkout (benchmark scripts), when there is one
    #: the BEAM file ({beam}): the --data file when it is one, else the bundled BEAM sample
    beam: Path = field(default_factory=bundled_beam_sample)

    @property
    def llm_key(self) -> str:
        """The LLMs a run's pinned figures depend on: answerer and judge."""
        return f"{self.llm}, judge {self.judge}"

    @property
    def data_label(self) -> str:
        """``sample`` for the bundled sample, else the data file's name."""
        return "sample" if self.data_kind == "sample" else self.data.name

    def store(self) -> Path:
        """The turns-only store the LLM-free runs share (one per data file and embedder)."""
        tag = re.sub(r"[^A-Za-z0-9_.-]", "_", self.embedder)
        return self.work / "stores" / f"{self.data_sha256[:12]}-{tag}.db"


def resolve(run: Run, settings: Settings) -> tuple[list[str], str]:
    """The run's argv and output with every placeholder filled in."""

    def fill(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            key, arg = m.group(1), m.group(2)
            if key == "out":
                return str(settings.work / "runs" / (arg or run.name))
            if key == "store":
                return str(settings.store())
            if key == "repo":
                if settings.repo is None:
                    raise InputError(f"run {run.name!r} needs a source checkout of qemem")
                return str(settings.repo)
            return str(getattr(settings, key))

        return PLACEHOLDER.sub(one, text)

    return [fill(token) for token in shlex.split(run.command)], fill(run.output)


def display(run: Run, argv: list[str]) -> str:
    """The command as a user would type it."""
    return shlex.join([Path(sys.executable).name, *argv] if run.script else ["qemem", *argv])


INFO_KEYS = ("embedder", "answerer", "judge", "mode", "llm", "data_sha256", "commit", "qemem")


def run_info(document: Any) -> dict[str, Any]:
    """The config, model ids and data hash a run's output records about itself."""
    if not isinstance(document, dict):
        return {}
    nested: dict[str, Any] = document["run"] if isinstance(document.get("run"), dict) else {}
    found = {k: v for src in (nested, document) for k, v in src.items() if k in INFO_KEYS}
    return {k: v for k, v in found.items() if v is not None and not isinstance(v, dict)}


class Runner:
    """Runs the conditions' runs for one setting, each run once, in dependency order."""

    def __init__(self, conditions: Conditions, settings: Settings, execute: Executor) -> None:
        self.conditions = conditions
        self.settings = settings
        self.execute = execute
        self.outcomes: dict[str, RunOutcome] = {}

    def plan(self, condition: Condition) -> list[tuple[str, str]]:
        """(run name, command) for every run the condition needs, in the order they run."""
        names = [n for run in condition.runs() for n in self.conditions.order(run)]
        out = []
        for name in dict.fromkeys(names):
            run = self.conditions.runs[name]
            try:
                out.append((name, display(run, resolve(run, self.settings)[0])))
            except InputError as exc:
                out.append((name, f"{run.command} ({exc})"))
        return out

    def run(self, name: str, progress: Callable[[str], None] | None = None) -> RunOutcome:
        """The outcome of run ``name`` (and the runs it needs), executing it at most once."""
        if name in self.outcomes:
            return self.outcomes[name]
        for dep in self.conditions.order(name)[:-1]:
            if self.run(dep, progress).error:
                failed = RunOutcome(name, "", error=f"run {dep!r}, which it needs, failed")
                self.outcomes[name] = failed
                return failed
        run = self.conditions.runs[name]
        try:
            argv, output = resolve(run, self.settings)
        except InputError as exc:
            self.outcomes[name] = RunOutcome(name, run.command, error=str(exc))
            return self.outcomes[name]
        outcome = RunOutcome(name, display(run, argv))
        if progress is not None:
            progress(outcome.command)
        (self.settings.work / "runs").mkdir(parents=True, exist_ok=True)
        self.settings.store().parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        done = self._script(argv) if run.script else self.execute(argv)
        outcome.seconds = round(time.perf_counter() - start, 2)
        try:
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise InputError(f"exit status {done.returncode}: {' | '.join(tail)}")
            outcome.document = _document(done.stdout, output)
            outcome.info = run_info(outcome.document)
        except QememError as exc:
            outcome.error = str(exc)
        self.outcomes[name] = outcome
        return outcome

    def _script(self, argv: list[str]) -> Completed:
        done = subprocess.run(
            [sys.executable, *argv],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.settings.repo,
        )
        return Completed(done.returncode, done.stdout, done.stderr)


def _document(stdout: str, output: str) -> Any:
    if output == "stdout":
        return last_json_line(stdout)
    try:
        return json.loads(Path(output).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the run's output {output}: {exc}") from None


@dataclass
class ConditionResult:
    """A condition's figures as measured and graded, with the runs they came from."""

    condition: Condition
    runs: list[RunOutcome]
    figures: list[FigureResult]
    skipped: str | None = None

    @property
    def status(self) -> str:
        """FAIL (a figure failed or a run failed), else the best grade any figure got."""
        if self.skipped:
            return "SKIP"
        grades = [f.grade for f in self.figures]
        for status in ("FAIL", "ERROR", "OKish", "OK", "DATA", "NEW", "REF"):
            if status in grades:
                return "FAIL" if status == "ERROR" else status
        return "-"


def uses_llm(conditions: Conditions, condition: Condition) -> bool:
    """Whether any run of the condition (or a run it needs) calls an LLM."""
    return any(
        conditions.runs[n].uses_llm for run in condition.runs() for n in conditions.order(run)
    )


def run_conditions(
    runner: Runner,
    names: Iterable[str],
    pinned: dict[str, list[dict[str, Any]]],
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[ConditionResult]:
    """Run (or with ``dry_run`` only plan) the named conditions and grade their figures."""
    results = []
    for name in names:
        condition = runner.conditions.conditions[name]
        skipped = skip_reason(runner.conditions, condition, runner.settings)
        if skipped or dry_run:
            outcomes = [RunOutcome(n, c) for n, c in runner.plan(condition)]
        else:
            outcomes = [runner.run(n, progress) for n, _ in runner.plan(condition)]
        llm = runner.settings.llm_key if uses_llm(runner.conditions, condition) else None
        documents = {o.name: o for o in outcomes}
        figures = judge_figures(
            condition,
            documents,
            pinned.get(name, []),
            runner.settings,
            llm,
            run=not (skipped or dry_run),
        )
        results.append(ConditionResult(condition, outcomes, figures, skipped))
    return results


def skip_reason(conditions: Conditions, condition: Condition, settings: Settings) -> str | None:
    """Why the condition does not run with these settings, if it does not."""
    if condition.pending:
        return f"pending: {condition.pending}"
    runs = [conditions.runs[n] for run in condition.runs() for n in conditions.order(run)]
    if settings.repo is None and any(r.script for r in runs):
        return "runs a benchmark script: needs a source checkout of qemem"
    if settings.data_kind not in condition.data:
        needs = {
            "locomo": "LoCoMo data: pass --data PATH",
            "beam": "BEAM data: pass --data with a `qemem data beam` file",
        }
        wanted = [needs[k] for k in condition.data if k in needs]
        return f"needs {' or '.join(wanted)}" if wanted else "runs on the bundled sample only"
    return None
