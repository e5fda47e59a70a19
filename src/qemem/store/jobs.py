"""Durable background jobs: rows of the store's ``jobs`` table, on both SQL backends.

Neither PostgreSQL job library we considered (procrastinate, pgqueuer) serves the embedded
SQLite default, so jobs are one small table (:data:`qemem.store.ddl.JOBS`) written through the
store's own connections. Any process of a store sees every job; a worker *claims* one in a
write transaction (PostgreSQL: ``SELECT ... FOR UPDATE SKIP LOCKED``; SQLite: ``BEGIN
IMMEDIATE`` excludes every other writer) and holds it under a *lease* it extends while it runs.
A job whose lease expired (its worker died) is claimed again, at most ``max_attempts`` times in
all, then failed. Times are epoch seconds of the writing process's clock.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, get_args

from qemem.errors import InputError
from qemem.store.dialect import Dialect

JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]
ACTIVE: tuple[JobStatus, ...] = ("queued", "running")
FINISHED: tuple[JobStatus, ...] = ("done", "failed", "cancelled")
KEEP_S = 7 * 86400.0
"""Finished jobs are removed this long after their last change."""

_COLUMNS = (
    "id, namespace, kind, conversation, status, done, total, attempts, max_attempts, "
    "lease_owner, lease_until, heartbeat_at, error, result, created, updated, not_before"
)


@dataclass(frozen=True)
class JobRow:
    """One job as stored. ``lease_owner`` names the worker holding it (``host:pid:token``),
    ``result`` is the job's JSON result once done; ``not_before``: when a queued job may start
    at the earliest, and for a running one when it is to run again once it ends."""

    id: str
    namespace: str
    kind: str
    conversation: str
    status: JobStatus
    done: int
    total: int
    attempts: int
    max_attempts: int
    lease_owner: str | None
    lease_until: float | None
    heartbeat_at: float | None
    error: str | None
    result: str | None
    created: float
    updated: float
    not_before: float | None = None

    def leased(self, owner: str, now: float | None = None) -> bool:
        """Whether ``owner`` runs this job under a lease that has not expired."""
        return (
            self.status == "running"
            and self.lease_owner == owner
            and (self.lease_until or 0.0) > (time.time() if now is None else now)
        )


@dataclass(frozen=True)
class Lease:
    """The lease a worker holds on a running job: the job's id and the worker's name."""

    job: str
    owner: str


def _row(values: Sequence[Any]) -> JobRow:
    (jid, ns, kind, conv, status, done, total, attempts, most, owner, until, beat) = values[:12]
    error, result, created, updated, after = values[12:]
    return JobRow(
        jid, ns, kind, conv, status, int(done), int(total), int(attempts), int(most), owner,
        None if until is None else float(until), None if beat is None else float(beat),
        error, result, float(created), float(updated), None if after is None else float(after),
    )  # fmt: skip


def check_status(status: str | None) -> JobStatus | None:
    """``status`` when it is a job status (or None), else InputError naming the valid ones."""
    if status is not None and status not in get_args(JobStatus):
        raise InputError(
            f"unknown job status {status!r}: use one of {', '.join(get_args(JobStatus))}"
        )
    return status  # type: ignore[return-value]


class JobTable:
    """The ``jobs`` table of one SQL store, through the store's transaction and statements
    (``query`` returns rows, ``execute`` the number of rows changed)."""

    def __init__(
        self,
        dialect: Dialect,
        transaction: Callable[[], AbstractContextManager[None]],
        query: Callable[[str, Sequence[object]], list[tuple[Any, ...]]],
        execute: Callable[[str, Sequence[object]], int],
    ) -> None:
        self.dialect = dialect
        self._transaction = transaction
        self._query = query
        self._exec = execute

    def _select(self, where: str, params: Sequence[object], tail: str = "") -> list[JobRow]:
        rows = self._query(f"SELECT {_COLUMNS} FROM jobs WHERE {where} {tail}", params)
        return [_row(r) for r in rows]

    def enqueue(
        self,
        namespace: str,
        kind: str,
        conversation: str,
        *,
        max_attempts: int = 3,
        delay: float | None = None,
    ) -> JobRow:
        """A new queued job, or the queued or running one of the same kind for the same
        conversation (at most one of those at a time). Removes long-finished jobs.

        Without ``delay`` the job may start at once (a queued one waiting is started now too).
        With ``delay`` (seconds) it waits until ``delay`` after the latest such call: a
        waiting job is pushed back, and a running one runs again that long after it ends
        (it may have missed what came meanwhile)."""
        now = time.time()
        with self._transaction():
            if self.dialect.lock is not None:  # PostgreSQL: enqueuers of one conversation queue
                self._exec(self.dialect.lock, (f"jobs:{namespace}/{conversation}",))
            self._exec(
                "DELETE FROM jobs WHERE status IN ('done', 'failed', 'cancelled') AND updated < ?",
                (now - KEEP_S,),
            )
            active = self._select(
                "namespace = ? AND kind = ? AND conversation = ? AND status IN (?, ?)",
                (namespace, kind, conversation, *ACTIVE),
            )
            due = None if delay is None else now + delay
            if active:
                self._postpone(active[0], due)
                return self._select("id = ?", (active[0].id,))[0]
            jid = self._insert(namespace, kind, conversation, max_attempts, due)
        return self._select("id = ?", (jid,))[0]

    def _insert(
        self, namespace: str, kind: str, conversation: str, max_attempts: int, due: float | None
    ) -> str:
        jid = f"job-{secrets.token_hex(8)}"
        now = time.time()
        self._exec(
            "INSERT INTO jobs (id, namespace, kind, conversation, status, max_attempts, "
            "created, updated, not_before) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
            (jid, namespace, kind, conversation, max(1, max_attempts), now, now, due),
        )
        return jid

    def _postpone(self, job: JobRow, due: float | None) -> None:
        """Move an active job's ``not_before`` to ``due`` (see :meth:`enqueue`): a queued job
        that may start at once stays so, and a running one is only marked to run again."""
        if job.status == "running":
            if due is not None:
                self._exec("UPDATE jobs SET not_before = ? WHERE id = ?", (due, job.id))
        elif job.not_before is not None:
            self._exec("UPDATE jobs SET not_before = ? WHERE id = ?", (due, job.id))

    def get(self, job_id: str, namespace: str | None = None) -> JobRow | None:
        """The job ``job_id`` (only if it belongs to ``namespace``, when given)."""
        rows = self._select("id = ?", (job_id,))
        return rows[0] if rows and namespace in (None, rows[0].namespace) else None

    def list(
        self,
        namespace: str,
        status: JobStatus | None = None,
        *,
        limit: int = 100,
        after: JobRow | None = None,
    ) -> list[JobRow]:
        """The namespace's ``limit`` newest jobs (of ``status``, when given), newest first in
        a stable order (by creation time, then id, both descending); with ``after``, the page
        of those that come after that job in this order."""
        where, params = "namespace = ?", list[object]([namespace])
        if status is not None:
            where, params = where + " AND status = ?", [*params, status]
        if after is not None:
            where += " AND (created < ? OR (created = ? AND id < ?))"
            params = [*params, after.created, after.created, after.id]
        return self._select(where, params, f"ORDER BY created DESC, id DESC LIMIT {int(limit)}")

    def counts(self) -> dict[str, int]:
        """How many jobs of all namespaces are in each status."""
        rows = self._query("SELECT status, count(*) FROM jobs GROUP BY status", ())
        return {str(status): int(count) for status, count in rows}

    def active(self, namespace: str, kind: str, conversation: str) -> JobRow | None:
        """The queued or running job of this kind for the conversation, if any."""
        rows = self._select(
            "namespace = ? AND kind = ? AND conversation = ? AND status IN (?, ?)",
            (namespace, kind, conversation, *ACTIVE),
        )
        return rows[0] if rows else None

    def claim(self, owner: str, lease_s: float) -> JobRow | None:
        """Take the oldest claimable job for ``owner`` under a lease of ``lease_s`` seconds:
        a queued one, or a running one whose lease expired. A job whose expired lease ends its
        last attempt is failed instead (and the next one looked at). None when none is left."""
        skip = " FOR UPDATE SKIP LOCKED" if self.dialect.name == "postgresql" else ""
        claimable = (
            "(status = 'queued' AND (not_before IS NULL OR not_before <= ?)) "
            "OR (status = 'running' AND lease_until < ?)"
        )
        while True:
            now = time.time()
            if not self._query(f"SELECT 1 FROM jobs WHERE {claimable} LIMIT 1", (now, now)):
                return None  # the usual case, answered without a write transaction
            with self._transaction():
                rows = self._select(claimable, (now, now), f"ORDER BY created, id LIMIT 1{skip}")
                if not rows:
                    return None
                job = rows[0]
                if job.status == "running" and job.attempts >= job.max_attempts:
                    self._fail_abandoned(job, now)
                    continue
                self._exec(
                    "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
                    "lease_owner = ?, lease_until = ?, heartbeat_at = ?, updated = ?, "
                    "not_before = NULL WHERE id = ?",
                    (owner, now + lease_s, now, now, job.id),
                )
            return self._select("id = ?", (job.id,))[0]

    def _fail_abandoned(self, job: JobRow, now: float) -> None:
        last = f" (last error: {job.error})" if job.error else ""
        self._exec(
            "UPDATE jobs SET status = 'failed', error = ?, lease_owner = NULL, "
            "lease_until = NULL, updated = ? WHERE id = ?",
            (
                f"its worker stopped (lease expired) in each of its {job.attempts} attempts"
                f"{last}: look at the server logs, then start it again",
                now,
                job.id,
            ),
        )

    def heartbeat(
        self, job_id: str, owner: str, lease_s: float, progress: tuple[int, int] | None = None
    ) -> bool:
        """Extend ``owner``'s lease (and record progress ``(done, total)``); False when the job
        is no longer ``owner``'s to run (cancelled, or taken over after the lease expired)."""
        now = time.time()
        sets, params = "lease_until = ?, heartbeat_at = ?, updated = ?", [now + lease_s, now, now]
        if progress is not None:
            sets, params = sets + ", done = ?, total = ?", [*params, *progress]
        with self._transaction():
            changed = self._exec(
                f"UPDATE jobs SET {sets} WHERE id = ? AND lease_owner = ? AND status = 'running'",
                (*params, job_id, owner),
            )
        return changed > 0

    def finish(
        self,
        job_id: str,
        owner: str,
        status: Literal["done", "failed"],
        *,
        error: str | None = None,
        result: str | None = None,
    ) -> bool:
        """End ``owner``'s run of the job; False (nothing written) when it is not ``owner``'s.
        A job marked to run again (see :meth:`enqueue`) is queued anew for then."""
        with self._transaction():
            self._lock_conversation_of(job_id)
            rows = self._select(
                "id = ? AND lease_owner = ? AND status = 'running'", (job_id, owner)
            )
            if not rows:
                return False
            self._exec(
                "UPDATE jobs SET status = ?, error = ?, result = ?, lease_until = NULL, "
                "not_before = NULL, updated = ? WHERE id = ?",
                (status, error, result, time.time(), job_id),
            )
            job = rows[0]
            if job.not_before is not None:
                self._insert(
                    job.namespace, job.kind, job.conversation, job.max_attempts, job.not_before
                )
        return True

    def _lock_conversation_of(self, job_id: str) -> None:
        """PostgreSQL: take the lock :meth:`enqueue` takes for the job's conversation (so a
        running job marked to run again is never missed while it ends)."""
        job = self.get(job_id)
        if self.dialect.lock is not None and job is not None:
            self._exec(self.dialect.lock, (f"jobs:{job.namespace}/{job.conversation}",))

    def release(self, job_id: str, owner: str) -> bool:
        """Give the job back to the queue (its worker is shutting down): queued again, the
        attempt not counted."""
        with self._transaction():
            changed = self._exec(
                "UPDATE jobs SET status = 'queued', attempts = attempts - 1, lease_owner = NULL, "
                "lease_until = NULL, updated = ? WHERE id = ? AND lease_owner = ? "
                "AND status = 'running'",
                (time.time(), job_id, owner),
            )
        return changed > 0

    def cancel_conversation(self, namespace: str, conversation: str) -> int:
        """Cancel the queued and running jobs of a conversation that is being deleted (in the
        deleting transaction), saying why in their error; how many were cancelled. A running
        one stops at its next progress step and, being pinned to the deleted conversation,
        writes nothing more meanwhile."""
        with self._transaction():
            if self.dialect.lock is not None:  # the lock enqueue takes: no job slips past
                self._exec(self.dialect.lock, (f"jobs:{namespace}/{conversation}",))
            return self._exec(
                "UPDATE jobs SET status = 'cancelled', error = CASE WHEN status = 'running' "
                "THEN ? ELSE ? END, lease_until = NULL, not_before = NULL, updated = ? "
                "WHERE namespace = ? AND conversation = ? AND status IN (?, ?)",
                (
                    f"conversation {conversation} was deleted while it was being built: the "
                    "build wrote nothing more",
                    f"conversation {conversation} was deleted before it was built",
                    time.time(),
                    namespace,
                    conversation,
                    *ACTIVE,
                ),
            )

    def cancel(self, namespace: str, job_id: str) -> JobRow | None:
        """Cancel a queued or running job of ``namespace`` (a running one stops at its next
        progress step); a finished one is left as it is. None when there is no such job."""
        with self._transaction():
            self._exec(
                "UPDATE jobs SET status = 'cancelled', lease_until = NULL, updated = ? "
                "WHERE id = ? AND namespace = ? AND status IN (?, ?)",
                (time.time(), job_id, namespace, *ACTIVE),
            )
        return self.get(job_id, namespace)
