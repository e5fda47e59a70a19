"""``JobWorker``: runs a store's background jobs (:mod:`qemem.store.jobs`) in a few threads.

Each thread claims the oldest claimable job, runs it under a lease that a heartbeat extends
every third of the lease (and each progress step), and ends it done or failed. A job that is
cancelled, or taken over by another worker after this one's lease expired, stops at its next
progress step; a worker that shuts down gives its running jobs back to the queue. Every
``qemem serve`` process runs one worker, so any process of any replica may run any job. A
failed job's error names no server path (every channel shows it; the log keeps the path).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable

from qemem.errors import JobStoppedError, QememError, without_paths
from qemem.memory.facade import Memory
from qemem.memory.jobs import REPORTS, job_table
from qemem.store.jobs import JobRow, JobTable, Lease

log = logging.getLogger(__name__)

DEFAULT_LEASE_S = 60.0
"""How long a job's lease lasts without a heartbeat (``qemem serve --job-lease``)."""
PROGRESS_EVERY_S = 0.25
"""Progress is written to the job's row at most this often (and always at the last step)."""


class _Run:
    """One claimed job's lease: heartbeats in a thread, progress through ``progress``."""

    def __init__(self, table: JobTable, lease: Lease, lease_s: float, stopping: threading.Event):
        self.table, self.lease, self.lease_s, self.stopping = table, lease, lease_s, stopping
        self.lost = threading.Event()
        self._ended = threading.Event()
        self._written = 0.0
        self._confirmed = time.monotonic()  # the last heartbeat the store accepted
        self._beats = threading.Thread(target=self._beat, daemon=True, name="qemem-job-beat")

    def __enter__(self) -> _Run:
        self._beats.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ended.set()
        self._beats.join()

    def _extend(self, progress: tuple[int, int] | None = None) -> None:
        try:
            sent = time.monotonic()
            if self.table.heartbeat(self.lease.job, self.lease.owner, self.lease_s, progress):
                self._confirmed = sent
            else:
                self.lost.set()
        except Exception as exc:  # the store is unreachable: the lease may expire meanwhile
            log.warning("job %s: heartbeat failed: %r", self.lease.job, exc)

    def _beat(self) -> None:
        while not self._ended.wait(self.lease_s / 3):
            self._extend()

    def progress(self, done: int, total: int) -> None:
        """Record progress; raise JobStoppedError when the job is to stop here."""
        self._check()
        now = time.monotonic()
        if now - self._written >= PROGRESS_EVERY_S or done >= total:
            self._written = now
            self._extend((done, total))
            self._check()

    def _check(self) -> None:
        if time.monotonic() - self._confirmed > self.lease_s:  # another worker may hold it now
            self.lost.set()
        if self.lost.is_set():
            raise JobStoppedError(
                f"job {self.lease.job} was cancelled, or its lease ran out (another worker "
                "may run it now)"
            )
        if self.stopping.is_set():
            raise JobStoppedError(f"job {self.lease.job}: its worker is shutting down")


class JobWorker:
    """Runs the jobs of ``memory``'s store in ``threads`` threads; ``tenant(namespace)`` is the
    ``Memory`` a job of that namespace runs with. ``lease_s``: the lease of a running job."""

    def __init__(
        self,
        memory: Memory,
        tenant: Callable[[str], Memory],
        *,
        lease_s: float = DEFAULT_LEASE_S,
        threads: int = 2,
    ) -> None:
        self.table = job_table(memory.store)
        self.store_path = str(getattr(memory.store, "path", ""))
        self.tenant = tenant
        self.lease_s = lease_s
        self.poll_s = min(1.0, lease_s / 5)
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.threads = max(1, threads)
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start claiming and running jobs (again, after ``close``)."""
        self.close()
        self._stopping.clear()
        self._threads = [
            threading.Thread(target=self._loop, daemon=True, name=f"qemem-jobs-{n}")
            for n in range(self.threads)
        ]
        for thread in self._threads:
            thread.start()

    def wake(self) -> None:
        """Look for jobs now (one was just queued) rather than at the next poll."""
        self._wake.set()

    def close(self) -> None:
        """Stop claiming; running jobs stop at their next step and are queued again."""
        self._stopping.set()
        self._wake.set()
        for thread in self._threads:
            thread.join()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            owner = f"{self.name}:{secrets.token_hex(4)}"
            self._wake.clear()  # a job queued from now on wakes the wait below
            try:
                job = self.table.claim(owner, self.lease_s)
                if job is not None:
                    self.run(job, Lease(job.id, owner))
                    continue
            except Exception as exc:  # e.g. the store is unreachable or closed: try again later
                log.warning("background jobs: %r", exc)
            self._wake.wait(self.poll_s)

    def run(self, job: JobRow, lease: Lease) -> None:
        """Run a claimed job to its end (or until it is to stop)."""
        with _Run(self.table, lease, self.lease_s, self._stopping) as run:
            try:
                if job.kind != "build":
                    raise QememError(f"unknown job kind {job.kind!r}: upgrade this qemem server")
                reports = self.tenant(job.namespace).build(
                    job.conversation, progress=run.progress, lease=lease
                )
            except JobStoppedError:
                if self._stopping.is_set():
                    self.table.release(job.id, lease.owner)
                return
            except QememError as exc:
                log.warning("job %s failed: %s", job.id, exc)
                error = without_paths(str(exc), [self.store_path])
                self.table.finish(job.id, lease.owner, "failed", error=error)
                return
            except Exception as exc:  # a job must always end in a final state
                log.exception("job %s failed", job.id)
                error = without_paths(f"internal error: {exc!r}", [self.store_path])
                self.table.finish(job.id, lease.owner, "failed", error=error)
                return
            result = REPORTS.dump_json(reports).decode()
            self.table.finish(job.id, lease.owner, "done", result=result)
