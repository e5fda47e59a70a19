"""Background build jobs: one thread per running build, at most one per conversation."""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from qemem.build import BuildReport
from qemem.errors import QememError
from qemem.service.schemas import Job

Build = Callable[[Callable[[int, int], None]], list[BuildReport]]


class Jobs:
    """Build jobs by id, each owned by one namespace (other namespaces never see it); the
    ``keep`` most recent are remembered."""

    def __init__(self, workers: int = 2, keep: int = 1000) -> None:
        self.keep = keep
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="qemem-build")
        self._lock = threading.Lock()
        self._jobs: dict[str, tuple[str, Job]] = {}
        self._active: dict[tuple[str, str], str] = {}

    def start(self, namespace: str, conversation: str, build: Build) -> Job:
        """Queue ``build`` unless one for the same conversation is queued or running."""
        with self._lock:
            running = self._active.get((namespace, conversation))
            if running is not None:
                return self._jobs[running][1].model_copy()
            job = Job(id=f"job-{secrets.token_hex(8)}", conversation=conversation, status="queued")
            self._jobs[job.id] = (namespace, job)
            for old in list(self._jobs)[: max(0, len(self._jobs) - self.keep)]:
                if self._jobs[old][1].status in ("done", "failed"):
                    del self._jobs[old]
            self._active[(namespace, conversation)] = job.id
        self._pool.submit(self._run, namespace, job, build)
        return job.model_copy()

    def get(self, namespace: str, job_id: str) -> Job | None:
        with self._lock:
            owner, job = self._jobs.get(job_id, ("", None))
            return job.model_copy() if job is not None and owner == namespace else None

    def by_status(self) -> dict[str, int]:
        """How many remembered jobs are in each status (all namespaces)."""
        with self._lock:
            return dict(Counter(job.status for _, job in self._jobs.values()))

    def active(self, namespace: str, conversation: str) -> str | None:
        with self._lock:
            return self._active.get((namespace, conversation))

    def _run(self, namespace: str, job: Job, build: Build) -> None:
        def progress(done: int, total: int) -> None:
            with self._lock:
                job.done, job.total = done, total

        with self._lock:
            job.status = "running"
        try:
            reports = build(progress)
        except QememError as exc:
            with self._lock:
                job.status, job.error = "failed", str(exc)
        except Exception as exc:  # a job must always end in a final state
            with self._lock:
                job.status, job.error = "failed", f"internal error: {exc!r}"
        else:
            with self._lock:
                job.status, job.reports = "done", reports
        finally:
            with self._lock:
                self._active.pop((namespace, job.conversation), None)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
