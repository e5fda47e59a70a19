"""Background jobs seen through ``Memory``: the ``Job`` record and the methods that enqueue,
read, list and cancel the jobs of a namespace (rows of the store, :mod:`qemem.store.jobs`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import TypeAdapter

from qemem.build import BuildReport
from qemem.errors import ConfigError, InputError, NotFoundError, StoreError
from qemem.llm import LLMClient
from qemem.models import check_text
from qemem.store import MemoryStore
from qemem.store.jobs import KEEP_S, JobRow, JobStatus, JobTable, check_status

REPORTS = TypeAdapter(list[BuildReport])
"""A build job's result: its reports, as JSON."""
MAX_JOBS_PAGE = 500
"""The most jobs one ``Memory.jobs`` page lists."""


@dataclass(frozen=True)
class Job:
    """A background job (a build, for now) of one conversation, a row of the store that every
    server process sees: ``status`` is queued, running, done, failed or cancelled;
    ``done``/``total`` its progress; ``reports`` the build's, once done; ``attempts`` how often
    a worker started it (a job whose worker died is started again, at most ``max_attempts``
    times); ``worker`` the process running it; times in UTC (ISO 8601)."""

    id: str
    conversation: str
    status: JobStatus
    kind: str = "build"
    done: int = 0
    total: int = 0
    attempts: int = 0
    max_attempts: int = 3
    error: str | None = None
    reports: list[BuildReport] = field(default_factory=list)
    worker: str | None = None
    created: str = ""
    updated: str = ""
    not_before: str | None = None
    """When a queued automatic build may start at the earliest (its conversation quiet)."""


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def job_of(row: JobRow) -> Job:
    """The ``Job`` of a stored row."""
    return Job(
        id=row.id,
        conversation=row.conversation,
        status=row.status,
        kind=row.kind,
        done=row.done,
        total=row.total,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        error=row.error,
        reports=REPORTS.validate_json(row.result) if row.result else [],
        worker=row.lease_owner if row.status == "running" else None,
        created=_iso(row.created),
        updated=_iso(row.updated),
        not_before=None if row.not_before is None else _iso(row.not_before),
    )


def _no_job(job_id: str) -> NotFoundError:
    return NotFoundError(
        f"no job {job_id!r}: list the jobs to see them (qemem jobs list)", kind="job", name=job_id
    )


def check_auto_build(seconds: float | None, llm: Callable[[], LLMClient | None]) -> float | None:
    """``seconds`` of an automatic build's wait (None: no automatic builds); a ConfigError
    unless it is more than 0 and ``llm()`` gives an LLM to build with."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not seconds > 0:
        raise ConfigError(
            f"auto-build must be a number of seconds more than 0 (got {seconds!r}): it is how "
            "long a conversation stays quiet after an append before it is built"
        )
    if llm() is None:
        raise ConfigError(
            "auto-build needs an LLM to build with: set QEMEM_LLM (e.g. "
            "anthropic:claude-haiku-4-5, fake for an offline trial) or pass --llm SPEC "
            "(llm= to Memory), or leave auto-build off; see docs/llm.md"
        )
    return float(seconds)


def check_limit(limit: int) -> int:
    """``limit`` when it is a page size from 1 to :data:`MAX_JOBS_PAGE`, else InputError."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_JOBS_PAGE:
        raise InputError(
            f"limit must be a whole number from 1 to {MAX_JOBS_PAGE} (got {limit!r}): it is "
            "how many jobs one page lists; page on with before=<the last job's id>"
        )
    return limit


def job_table(store: MemoryStore) -> JobTable:
    """The store's jobs; StoreError for a store that keeps none."""
    table = getattr(store, "jobs", None)
    if not isinstance(table, JobTable):
        raise StoreError(
            f"this store ({type(store).__name__}) keeps no background jobs: use a SQLite or "
            "PostgreSQL store"
        )
    return table


class MemoryJobs:
    """The job methods of ``Memory`` (its store and namespace)."""

    store: MemoryStore
    namespace: str
    job_attempts: int = 3
    """How many times a job is started before it fails for good (workers that die)."""
    auto_build: float | None = None
    """Seconds a conversation stays quiet after an append before it gets a build job."""

    def _enqueue(
        self,
        kind: str,
        conversation: str,
        delay: float | None = None,
        namespace: str | None = None,
    ) -> Job:
        table = job_table(self.store)
        return job_of(
            table.enqueue(
                namespace or self.namespace,
                kind,
                conversation,
                max_attempts=self.job_attempts,
                delay=delay,
            )
        )

    def _appended(self, conversation: str, turns_added: int, namespace: str | None = None) -> None:
        """With ``auto_build``: (re)schedule the build of the conversation (of ``namespace``,
        default this one's) for ``auto_build`` seconds after this append or ingest, so a burst
        of them makes one job."""
        if self.auto_build is not None and turns_added:
            self._enqueue("build", conversation, delay=self.auto_build, namespace=namespace)

    def job(self, job_id: str) -> Job:
        """The namespace's job ``job_id`` (NotFoundError if there is none)."""
        row = job_table(self.store).get(check_text(job_id, "job id"), self.namespace)
        if row is None:
            raise _no_job(job_id)
        return job_of(row)

    def jobs(
        self, status: str | None = None, *, limit: int = 50, before: str | None = None
    ) -> list[Job]:
        """The namespace's ``limit`` (1 to 500) newest jobs (only those of ``status``, when
        given), newest first (by creation time, then id); ``before``: the id of the last job
        of the previous page, to list the page after it."""
        limit = check_limit(limit)
        table = job_table(self.store)
        after = None
        if before is not None:
            after = table.get(check_text(before, "job id", field="before"), self.namespace)
            if after is None:
                raise NotFoundError(
                    f"no job {before!r} to list the jobs after: it may have been removed "
                    f"(finished jobs are kept {KEEP_S / 86400:g} days); list from the start"
                )
        rows = table.list(self.namespace, check_status(status), limit=limit, after=after)
        return [job_of(r) for r in rows]

    def cancel_job(self, job_id: str) -> Job:
        """Cancel a queued or running job (a running build stops at its next step; what it
        stored stays, and a later build resumes from it); a finished job is returned as it
        is. NotFoundError if there is no such job."""
        row = job_table(self.store).cancel(self.namespace, check_text(job_id, "job id"))
        if row is None:
            raise _no_job(job_id)
        return job_of(row)

    def build_job(self, conversation: str) -> Job | None:
        """The conversation's queued or running build job, if any."""
        check_text(conversation, "conversation id", field="conversation")
        row = job_table(self.store).active(self.namespace, "build", conversation)
        return None if row is None else job_of(row)
