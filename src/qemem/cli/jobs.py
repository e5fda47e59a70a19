"""``qemem jobs``: the background jobs of a namespace (list, show, cancel), through
``Memory``'s job methods."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from pydantic import TypeAdapter
from rich.table import Table

from qemem.cli.common import (
    JsonOpt,
    NamespaceOpt,
    StoreOpt,
    console,
    err_console,
    existing_store,
    plain,
    print_json,
)
from qemem.cli.flags import FlagGroup
from qemem.memory import Memory
from qemem.memory.jobs import Job

jobs_app = typer.Typer(
    help="Background jobs (builds) of a namespace: list, show, cancel. Any server of the "
    "store (qemem serve, qemem mcp --auto-build) runs them.",
    no_args_is_help=True,
    cls=FlagGroup,
)

JOB = TypeAdapter(Job)
JobIdArg = Annotated[str, typer.Argument(help="The job id (see `qemem jobs list`).")]


def job_json(job: Job) -> dict[str, Any]:
    """A job as JSON (the HTTP API's shape)."""
    data: dict[str, Any] = JOB.dump_python(job, mode="json")
    return data


def _progress(job: Job) -> str:
    return f"{job.done}/{job.total}" if job.total else ""


@jobs_app.command("list")
def jobs_list(
    store: StoreOpt,
    namespace: NamespaceOpt = "default",
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only jobs of this status: queued, running, done, failed or cancelled."
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="Jobs per page (1 to 500).")] = 50,
    before: Annotated[
        str | None,
        typer.Option("--before", help="The page after this job id (the last one listed)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the namespace's jobs, newest first, one page at a time."""
    with Memory.open(existing_store(store), namespace=namespace, read_only=True) as memory:
        page = memory.jobs(status, limit=limit, before=before)
        more = len(page) == limit and bool(memory.jobs(status, limit=1, before=page[-1].id))
    if as_json:
        print_json([job_json(j) for j in page])
    else:
        table = Table()
        table.add_column("id", no_wrap=True)  # whole: it is what the other commands take
        for name in ("conversation", "status", "progress", "attempts", "created"):
            table.add_column(name)
        for j in page:
            table.add_row(
                j.id,
                plain(j.conversation),
                j.status if j.kind == "build" else f"{j.kind}: {j.status}",
                _progress(j),
                f"{j.attempts}/{j.max_attempts}",
                j.created[:19],
            )
        console.print(table if page else "no jobs")
    if more:
        err_console.print(f"more jobs follow: add --before {page[-1].id}")


@jobs_app.command("show")
def jobs_show(
    job_id: JobIdArg, store: StoreOpt, namespace: NamespaceOpt = "default", as_json: JsonOpt = False
) -> None:
    """Show one job: status, progress, attempts, error and, once done, its build reports."""
    with Memory.open(existing_store(store), namespace=namespace, read_only=True) as memory:
        job = memory.job(job_id)
    _print_job(job, as_json)


@jobs_app.command("cancel")
def jobs_cancel(
    job_id: JobIdArg, store: StoreOpt, namespace: NamespaceOpt = "default", as_json: JsonOpt = False
) -> None:
    """Cancel a queued or running job (a running build stops at its next step; what it
    stored stays). A finished job is left as it is."""
    with Memory.open(existing_store(store), namespace=namespace) as memory:
        was = memory.job(job_id).status
        job = memory.cancel_job(job_id)
    if as_json:
        print_json(job_json(job))
    elif was in ("queued", "running"):
        console.print(f"cancelled {job.id} (it was {was})")
    else:
        console.print(f"{job.id} is {job.status} already: nothing to cancel")


def _print_job(job: Job, as_json: bool) -> None:
    if as_json:
        print_json(job_json(job))
        return
    table = Table("field", "value", show_header=False)
    for name, value in (
        ("id", job.id),
        ("conversation", plain(job.conversation)),
        ("kind", job.kind),
        ("status", job.status),
        ("progress", _progress(job)),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("worker", job.worker or ""),
        ("created", job.created),
        ("updated", job.updated),
        ("not before", job.not_before or ""),
        ("error", plain(job.error or "")),
    ):
        table.add_row(name, value)
    for r in job.reports:
        built = (
            f"{r.episodes} episodes, {r.facts_added} facts added, {r.facts_merged} merged, "
            f"{r.llm_calls} LLM calls, {r.seconds:.1f} s"
        )
        table.add_row("built", plain(f"{r.conversation}: {built}"))
    console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(jobs_app, name="jobs")
